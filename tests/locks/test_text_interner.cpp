// The timeline's interner (text_interner.hpp, private to the locks library) against a
// model of its contract: under random interning, retains, releases and collects, every
// live id keeps its text, equal texts share an id, and a freed text's bytes, reused for
// the next text of its length, never show through another live id.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "timeline/text_interner.hpp"

using lockscope::locks::timeline_detail::interner;
using lockscope::locks::timeline_detail::no_id;

namespace {

// Text number n: mostly one length (a client library's owners), some shorter than a
// pointer, some longer than the reused lengths.
std::string text_of(unsigned n) {
  const unsigned kind = n % 10;
  const std::size_t size = kind < 7 ? 39 : kind < 8 ? 5 : kind < 9 ? 200 : 8 + n % 20;
  std::string s = std::to_string(n);
  while (s.size() < size) s += static_cast<char>('a' + (s.size() * 7 + n) % 26);
  return s.substr(0, size);
}

}  // namespace

TEST_CASE("interner: live ids keep their texts while freed texts' bytes are reused", "[interner]") {
  std::mt19937 random(43);
  for (const std::size_t compact_after : {std::size_t{64}, std::size_t{64 * 1024}}) {
    interner owners(compact_after);
    std::map<std::uint32_t, std::pair<std::string, int>> live;  // id -> (text, references)
    std::map<std::string, std::uint32_t> id_of;
    for (int step = 0; step < 60'000; ++step) {
      const unsigned op = static_cast<unsigned>(random() % 10);
      if (op < 4) {
        const std::string s = text_of(static_cast<unsigned>(random() % 5000));
        const std::uint32_t id = owners.id(s);
        REQUIRE(owners.text(id) == s);
        if (const auto it = id_of.find(s); it != id_of.end()) REQUIRE(it->second == id);
        if (random() % 3 != 0) {  // retained; else left to the next collect
          owners.retain(id);
          auto& e = live[id];
          e.first = s;
          ++e.second;
          id_of[s] = id;
        }
      } else if (op < 7 && !live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(random() % live.size()));
        owners.release(it->first);
        if (--it->second.second == 0) {
          id_of.erase(it->second.first);
          live.erase(it);
        }
      } else {
        owners.collect();
        for (const auto& [id, e] : live) REQUIRE(owners.text(id) == e.first);
      }
    }
    owners.collect();
    REQUIRE(owners.live() == live.size());
    std::size_t bytes = 0;
    for (const auto& [id, e] : live) {
      REQUIRE(owners.text(id) == e.first);
      REQUIRE(owners.id(e.first) == id);
      bytes += e.first.size();
    }
    REQUIRE(owners.text_bytes() == bytes);
  }
}

TEST_CASE("interner: texts of one length coming and going reuse their bytes: no new block, no compaction", "[interner]") {
  interner owners;
  std::vector<std::uint32_t> kept;
  for (int i = 0; i < 1000; ++i) {
    kept.push_back(owners.id("0123456789abcdef0123456789abcdef-kept:" + std::to_string(1000 + i)));
    owners.retain(kept.back());
  }
  const std::size_t arena = owners.arena_bytes();
  const void* const first_text = owners.text(kept[0]).data();
  // A storm's refused unlocks: a fresh owner each, freed by the next collect.
  for (int i = 0; i < 200'000; ++i) {
    owners.id("0123456789abcdef0123456789abcdef-gone:" + std::to_string(100'000 + i));
    owners.collect();
  }
  CHECK(owners.arena_bytes() == arena);
  CHECK(static_cast<const void*>(owners.text(kept[0]).data()) == first_text);  // never compacted: nothing moved
  for (int i = 0; i < 1000; ++i) {
    CHECK(owners.text(kept[static_cast<std::size_t>(i)]) ==
          "0123456789abcdef0123456789abcdef-kept:" + std::to_string(1000 + i));
  }
}

// A capture's end frees thousands of owners at one collect (the table rebuilt in one pass,
// not shifted once an id): the ids still referenced are found by their texts, the freed
// texts are not (interning one again gives a fresh id), and the table keeps working for
// the texts that come after.
TEST_CASE("interner: a collect that frees most ids at once keeps the others findable", "[interner]") {
  std::mt19937 random(45);
  for (const std::size_t count : {std::size_t{1500}, std::size_t{30'000}}) {
    interner owners;
    std::vector<std::string> texts;
    std::vector<std::uint32_t> ids;
    for (std::size_t i = 0; i < count; ++i) {
      texts.push_back("00000000-0000-4000-8000-" + std::to_string(100'000'000'000 + i) + ":1");
      ids.push_back(owners.id(texts.back()));
      owners.retain(ids.back());
    }
    owners.collect();
    std::vector<bool> kept(count);
    for (std::size_t i = 0; i < count; ++i) {
      kept[i] = random() % 10 == 0;  // nine in ten leave
      if (!kept[i]) owners.release(ids[i]);
    }
    owners.collect();
    std::size_t live = 0;
    for (std::size_t i = 0; i < count; ++i) live += kept[i];
    REQUIRE(owners.live() == live);
    for (std::size_t i = 0; i < count; ++i) {
      if (kept[i]) {
        REQUIRE(owners.text(ids[i]) == texts[i]);
        REQUIRE(owners.id(texts[i]) == ids[i]);
      }
    }
    // The freed texts, interned again, each get an id of their own, none a live one's.
    std::map<std::uint32_t, std::string> again;
    for (std::size_t i = 0; i < count; ++i) {
      if (kept[i]) continue;
      const std::uint32_t id = owners.id(texts[i]);
      owners.retain(id);
      REQUIRE(owners.text(id) == texts[i]);
      REQUIRE(again.emplace(id, texts[i]).second);
    }
    for (std::size_t i = 0; i < count; ++i) {
      if (kept[i]) {
        REQUIRE(again.count(ids[i]) == 0);
        REQUIRE(owners.id(texts[i]) == ids[i]);
      }
    }
    REQUIRE(owners.live() == count);
  }
}

// What a user learnt of a text once (the timeline: an owner's client part) stays with its
// id while the id lives, and a new id, a freed one's number reused, starts with none: a
// model of every live id's note under random interning, releases and collects.
TEST_CASE("interner: an id's note lives as long as the id, and a new id's is 0", "[interner]") {
  std::mt19937 random(47);
  interner owners;
  std::map<std::uint32_t, std::pair<std::string, std::uint32_t>> live;  // id -> (text, note)
  std::map<std::uint32_t, std::pair<std::string, std::uint32_t>> released;  // until the next collect
  for (int step = 0; step < 80'000; ++step) {
    const unsigned op = static_cast<unsigned>(random() % 8);
    if (op < 4) {
      const std::string s = "00000000-0000-4000-8000-" + std::to_string(100'000'000'000 + random() % 3000) + ":7";
      const std::uint32_t id = owners.id(s);
      if (const auto it = live.find(id); it != live.end()) {
        REQUIRE(it->second.first == s);
        REQUIRE(owners.note(id) == it->second.second);
      } else if (const auto gone = released.find(id); gone != released.end()) {  // not freed yet
        REQUIRE(gone->second.first == s);
        REQUIRE(owners.note(id) == gone->second.second);
        owners.retain(id);
        live.insert(released.extract(gone));
      } else {
        REQUIRE(owners.note(id) == 0);
        const std::uint32_t note = 1 + static_cast<std::uint32_t>(random() % 1000);
        owners.set_note(id, note);
        owners.retain(id);
        live.emplace(id, std::make_pair(s, note));
      }
    } else if (op < 7 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(random() % live.size()));
      owners.release(it->first);
      released.insert(live.extract(it));
    } else {
      owners.collect();
      released.clear();
      for (const auto& [id, e] : live) REQUIRE(owners.note(id) == e.second);
    }
  }
}

// collect() after every operation, as the timeline calls it: most leave one candidate,
// a new id retained at once (its shortcut) or not, or an id released to nothing. The
// live count and texts follow a model of the contract, and the arena's dead bytes
// never trigger a compaction the shortcut would skip.
TEST_CASE("interner: one candidate at a time is freed exactly when it has no reference", "[interner]") {
  std::mt19937 random(44);
  for (const std::size_t compact_after : {std::size_t{0}, std::size_t{64}, std::size_t{64 * 1024}}) {
    interner owners(compact_after);
    std::map<std::uint32_t, std::pair<std::string, int>> live;  // id -> (text, references)
    for (int step = 0; step < 40'000; ++step) {
      const unsigned op = static_cast<unsigned>(random() % 8);
      if (op < 4) {
        std::string s = "owner-" + std::to_string(random() % 3000);
        s.resize(8 + random() % 40, 'x');
        const std::uint32_t id = owners.id(s);
        REQUIRE(owners.text(id) == s);
        if (op < 3) {
          owners.retain(id);
          auto& e = live[id];
          e.first = s;
          ++e.second;
          if (op == 0) owners.retain(id), ++e.second;
        }
      } else if (!live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(random() % live.size()));
        owners.release(it->first);
        if (op == 4) {  // retained again before the collect: stays
          owners.retain(it->first);
        } else if (--it->second.second == 0) {
          live.erase(it);
        }
      }
      owners.collect();
      REQUIRE(owners.live() == live.size());
      if (step % 500 == 0) {
        for (const auto& [id, e] : live) REQUIRE(owners.text(id) == e.first);
      }
    }
    for (const auto& [id, e] : live) REQUIRE(owners.text(id) == e.first);
  }
}

// id_of_view(): a text that stays put until the next collect is viewed, not copied, and
// stored only if still referenced then. Against the same model as above, with id() and
// id_of_view() mixed at random: each viewed text is the caller's buffer, overwritten and
// dropped right after the collect, so an id kept without its text stored would read the
// overwrite (or freed memory under ASan); ids, texts and counts stay those of id() alone.
TEST_CASE("interner: ids of viewed texts are stored only when kept past the collect", "[interner]") {
  std::mt19937 random(47);
  for (const std::size_t compact_after : {std::size_t{64}, std::size_t{64 * 1024}}) {
    interner viewed_too(compact_after), copied(compact_after);
    std::map<std::uint32_t, std::pair<std::string, int>> live;  // id -> (text, references)
    std::vector<std::unique_ptr<std::string>> views;            // the viewed texts until the collect
    std::vector<std::uint32_t> kept_since_collect;               // the ids a collect may have to store
    std::size_t kept_viewed = 0, freed_viewed = 0, collects = 0;
    for (int step = 0; step < 60'000; ++step) {
      const unsigned op = static_cast<unsigned>(random() % 10);
      if (op < 5) {
        // A small pool of texts: a view often meets its own text again, or one live.
        const std::string s = text_of(static_cast<unsigned>(random() % (op < 2 ? 300 : 5000)));
        std::uint32_t id = 0;
        const bool view = random() % 2 == 0;
        if (view) {
          views.push_back(std::make_unique<std::string>(s));
          id = viewed_too.id_of_view(*views.back());
        } else {
          id = viewed_too.id(s);
        }
        REQUIRE(copied.id(s) == id);
        REQUIRE(viewed_too.text(id) == s);
        if (random() % 3 != 0) {
          viewed_too.retain(id);
          copied.retain(id);
          auto& e = live[id];
          e.first = s;
          ++e.second;
          kept_since_collect.push_back(id);
          if (view) ++kept_viewed;
        } else if (view) {
          ++freed_viewed;
        }
      } else if (op < 7 && !live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(random() % live.size()));
        viewed_too.release(it->first);
        copied.release(it->first);
        if (--it->second.second == 0) live.erase(it);
      } else {
        viewed_too.collect();
        copied.collect();
        for (auto& v : views) v->assign(v->size(), '#');  // the caller's buffers reused
        views.clear();
        // The ids kept since the last collect are the ones it had to store; every live id
        // is read back at every 16th collect (each read of the whole map is long at -O0).
        for (const std::uint32_t id : kept_since_collect) {
          const auto it = live.find(id);
          if (it != live.end()) REQUIRE(viewed_too.text(id) == it->second.first);
        }
        kept_since_collect.clear();
        if (++collects % 16 == 0) {
          const auto wrong = std::find_if(live.begin(), live.end(),
                                          [&](const auto& kv) { return viewed_too.text(kv.first) != kv.second.first; });
          REQUIRE(wrong == live.end());
        }
        REQUIRE(viewed_too.live() == copied.live());
        REQUIRE(viewed_too.text_bytes() == copied.text_bytes());
      }
    }
    CHECK(kept_viewed > 1000);
    CHECK(freed_viewed > 1000);
  }
}

// id() compares a text with the last id's text, kept beside it: that copy of the view must
// follow the text wherever it moves (a viewed text stored at the collect, a compaction),
// or a caller's buffer reused for another text of the same length reads as the last id.
TEST_CASE("interner: the last id's text follows it when a viewed text is stored or texts are compacted", "[interner]") {
  SECTION("a viewed text kept past the collect, its buffer then holding another owner") {
    interner owners;
    const std::string first(39, 'a'), second(39, 'b');
    owners.id(std::string(39, 'z'));  // left unreferenced: freed, so the next new text is viewed
    owners.collect();
    std::string buffer = first;  // an operation's own bytes
    const std::uint32_t kept = owners.id_of_view(buffer);
    owners.retain(kept);
    owners.collect();  // stored now; the operation's buffer is reused
    buffer = second;
    const std::uint32_t other = owners.id(buffer);
    CHECK(other != kept);
    CHECK(owners.text(other) == second);
    CHECK(owners.text(kept) == first);
    CHECK(owners.id(first) == kept);
  }
  SECTION("random owners of one length, views whose buffers are rewritten, compactions") {
    std::mt19937 random(53);
    interner owners(64);  // compacts whenever 64 dead bytes outweigh the live ones
    std::vector<std::string> pool;
    for (char c : std::string("abcdef")) pool.emplace_back(39, c);
    std::map<std::string, std::pair<std::uint32_t, int>> live;  // text -> (id, references)
    std::vector<std::unique_ptr<std::string>> views;
    for (int step = 0; step < 40'000; ++step) {
      const unsigned op = static_cast<unsigned>(random() % 10);
      const std::string& s = pool[random() % pool.size()];
      if (op < 6) {
        std::uint32_t id = 0;
        if (op < 3) {
          views.push_back(std::make_unique<std::string>(s));
          id = owners.id_of_view(*views.back());
        } else {
          id = owners.id(s);
        }
        REQUIRE(owners.text(id) == s);
        if (const auto it = live.find(s); it != live.end()) REQUIRE(it->second.first == id);
        for (const auto& [text, e] : live) REQUIRE((text == s || e.first != id));
        if (random() % 2 == 0) {
          owners.retain(id);
          auto& e = live[s];
          e.first = id;
          ++e.second;
        }
      } else if (op < 8 && !live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(random() % live.size()));
        owners.release(it->second.first);
        if (--it->second.second == 0) live.erase(it);
      } else {
        owners.collect();
        // The operations' buffers reused: each now holds another owner of the same length.
        for (auto& v : views) *v = pool[random() % pool.size()];
        views.clear();
        for (const auto& [text, e] : live) REQUIRE(owners.text(e.first) == text);
      }
    }
  }
}
