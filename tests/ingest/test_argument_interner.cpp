// argument_interner, and the session's interned path (a whole array's long repeated
// argument viewed in an interner entry) against its copying path
// (session_options::intern_arguments off): the same exchanges, events and stats.
#include <catch2/catch.hpp>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "lockscope/ingest/argument_interner.hpp"
#include "lockscope/ingest/resp_session.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

namespace {

using entry = argument_interner::entry;

// `base` with the byte at `at` changed.
std::string mutated(std::string base, std::size_t at) {
  base[at] = static_cast<char>(base[at] ^ 0x20);
  return base;
}

// Acquired twice (the second sighting makes the entry), the first reference given back.
entry* intern(argument_interner& in, const std::string& value) {
  entry* first = in.acquire(value);
  if (first != nullptr) return first;
  return in.acquire(value);
}

}  // namespace

TEST_CASE("argument_interner: an entry on the second sighting, equal to the bytes and only to them", "[interner]") {
  argument_interner in;
  const std::string script = seed_acquire_script;
  CHECK(in.acquire(script) == nullptr);  // the first sighting
  entry* e = in.acquire(script);
  REQUIRE(e != nullptr);
  CHECK(e->text() == script);
  CHECK(e->text().data() != script.data());
  CHECK(e->identity() != 0);
  entry* again = in.acquire(std::string(script));  // other memory, same bytes
  CHECK(again == e);
  CHECK(in.stats().hits == 1);
  // Near misses: one byte changed at the start, in the middle (where the fingerprint
  // may not look), at the end; the same length with other bytes; a prefix.
  for (const std::string& other : {mutated(script, 0), mutated(script, 37), mutated(script, script.size() / 2 + 9),
                                   mutated(script, script.size() - 1), std::string(script.size(), 'x'),
                                   script.substr(0, script.size() - 1)}) {
    for (int sighting = 0; sighting < 3; ++sighting) {
      entry* o = in.acquire(other);
      if (o == nullptr) continue;
      CHECK(o != e);
      CHECK(o->text() == other);
      CHECK(o->identity() != e->identity());
      argument_interner::release(o);
    }
  }
  CHECK(in.acquire(script.substr(0, 63)) == nullptr);  // shorter than min_bytes: never held
  CHECK(in.acquire(script.substr(0, 63)) == nullptr);
  argument_interner::release(e);
  argument_interner::release(again);
}

TEST_CASE("argument_interner: bounded, evicts only unreferenced entries, never reuses an identity", "[interner]") {
  argument_interner::limits l;
  l.max_entries = 2;
  l.max_total_bytes = 1000;
  argument_interner in(l);
  const std::string a(100, 'a'), b(100, 'b'), c(100, 'c');
  entry* ea = intern(in, a);
  entry* eb = intern(in, b);
  REQUIRE(ea != nullptr);
  REQUIRE(eb != nullptr);
  const std::uint64_t id_a = ea->identity();
  // Both referenced: no room for c, which is copied by the caller instead.
  CHECK(intern(in, c) == nullptr);
  CHECK(in.stats().refused >= 1);
  CHECK(ea->text() == a);
  CHECK(eb->text() == b);
  argument_interner::release(ea);
  entry* ec = intern(in, c);  // evicts a, the only unreferenced one
  REQUIRE(ec != nullptr);
  CHECK(eb->text() == b);
  CHECK(in.stats().evicted == 1);
  std::set<std::uint64_t> identities{id_a, eb->identity(), ec->identity()};
  CHECK(identities.size() == 3);
  argument_interner::release(eb);
  argument_interner::release(ec);
  // Many distinct long values, each repeated: the bounds hold, and every entry made has
  // an identity of its own, a's bytes again included.
  for (int i = 0; i < 300; ++i) {
    const std::string v = i % 3 == 0 ? a : std::string(64 + i % 400, static_cast<char>('A' + i % 50)) + std::to_string(i);
    const std::uint64_t created = in.stats().created;
    entry* e = intern(in, v);
    CHECK(in.entries() <= 2);
    CHECK(in.bytes() <= 1000);
    if (e == nullptr) continue;
    CHECK(e->text() == v);
    if (in.stats().created > created) CHECK(identities.insert(e->identity()).second);  // a new identity
    argument_interner::release(e);
  }
  CHECK(identities.size() == in.stats().created);
  CHECK(in.stats().evicted > 50);
  // An argument from another interner (another thread) never shares an identity.
  argument_interner other;
  entry* oa = intern(other, a);
  REQUIRE(oa != nullptr);
  CHECK(identities.count(oa->identity()) == 0);
  argument_interner::release(oa);
}

namespace {

struct interner_run {
  std::vector<std::string> lines;
  std::string stats;
  std::size_t interned = 0;  // exchanges that named an interned argument
};

class interning_sink final : public exchange_sink {
 public:
  void on_exchange(const exchange& e) override {
    std::string line = e.kind == exchange_kind::push ? "push" : "exchange";
    line += " at " + std::to_string(e.request_us) + "/" + std::to_string(e.reply_us);
    for (std::string_view a : e.command) line += " [" + std::string(a) + "]";
    if (e.reply != nullptr) line += " => " + lockscope::resp::to_parsed(e.reply->to_value());
    lines.push_back(std::move(line));
    if (e.interned_identity != 0) {
      ++interned;
      // The identity names the argument's bytes: the same identity, the same bytes.
      REQUIRE(e.interned_argument < e.command.size());
      const auto [it, added] = texts.try_emplace(e.interned_identity, e.command[e.interned_argument]);
      CHECK(it->second == e.command[e.interned_argument]);
      CHECK(e.command[e.interned_argument] != "****");
    }
  }
  void on_session_event(const session_event& ev) override {
    lines.push_back("event " + std::to_string(static_cast<int>(ev.kind)) + " at " + std::to_string(ev.offset));
  }
  std::vector<std::string> lines;
  std::size_t interned = 0;
  std::map<std::uint64_t, std::string> texts;
};

std::string stats_text(const session_stats& s) {
  return std::to_string(s.commands) + " " + std::to_string(s.exchanges) + " " + std::to_string(s.pushes) + " " +
         std::to_string(s.unpaired_replies) + " " + std::to_string(s.decode_errors) + " " +
         std::to_string(s.pending_overflow);
}

// The client's bytes in pieces of `piece` bytes (0: whole), then the replies, then the
// end; `interner` shared by two sessions (one ingest thread's connections).
interner_run run_interned(const std::string& client, const std::string& server, std::size_t piece, session_options options,
               argument_interner* interner) {
  interning_sink sink;
  interner_run r;
  for (int connection = 1; connection <= 2; ++connection) {
    resp_session s(options, connection, {make_endpoint("10.0.0.1", 52000), make_endpoint("10.0.0.2", 6379)}, 0, sink,
                   side_reason::syn, interner);
    s.set_stream_start_seen(0);
    s.set_stream_start_seen(1);
    const std::size_t step = piece == 0 ? client.size() : piece;
    for (std::size_t at = 0; at < client.size(); at += step) {
      const std::string bytes = client.substr(at, step);  // a copy: views kept past the feed would fail ASan
      s.on_data(0, bytes, at, 1000);
    }
    // The second connection ends with its commands unanswered.
    if (connection == 1) s.on_data(1, server, 0, 2000);
    s.finish(3000);
    r.stats += stats_text(s.stats()) + ";";
  }
  r.lines = std::move(sink.lines);
  r.interned = sink.interned;
  return r;
}

// Interning on (with `limits`) and off, fed whole, in a few cuts and byte by byte.
std::size_t check_same(const std::string& client, const std::string& server, session_options options = {},
                       argument_interner::limits limits = {}) {
  std::size_t interned = 0;
  for (std::size_t piece : {std::size_t{0}, std::size_t{97}, std::size_t{1}}) {
    INFO("pieces of " << piece << " bytes (0: whole)");
    argument_interner interner(limits);
    options.intern_arguments = true;
    const interner_run on = run_interned(client, server, piece, options, &interner);
    options.intern_arguments = false;
    const interner_run off = run_interned(client, server, piece, options, &interner);
    CHECK(on.lines == off.lines);
    CHECK(on.stats == off.stats);
    CHECK(off.interned == 0);
    CHECK(interner.entries() <= limits.max_entries);
    if (piece == 0) interned = on.interned;
  }
  return interned;
}

std::string eval(const std::string& script, int key) {
  return cmd({"EVAL", script, "1", "myLock:" + std::to_string(key), "30000", seed_owner});
}

}  // namespace

TEST_CASE("session: interned arguments give the same exchanges as copies", "[session][interner]") {
  const std::string script = seed_acquire_script;
  std::string client, server;
  auto add = [&](const std::string& command, const std::string& reply) {
    client += command;
    server += reply;
  };
  for (int k = 0; k < 6; ++k) add(eval(script, k), "$-1\r\n");
  add(eval(mutated(script, script.size() / 2), 7), "$-1\r\n");  // one byte off the entry
  add(eval(std::string(script.size(), 'z'), 8), "$-1\r\n");      // same length, other bytes
  add(eval(script, 9), ":1500\r\n");
  // A long argument after the script, and before it.
  add(cmd({"EVAL", script, "1", std::string(120, 'k'), "30000", std::string(90, 'o')}), "$-1\r\n");
  add(cmd({"SET", std::string(80, 'q'), std::string(200, 'v')}), "+OK\r\n");
  add(cmd({"SET", std::string(80, 'q'), std::string(200, 'v')}), "+OK\r\n");
  add(cmd({"SET", std::string(80, 'q'), std::string(200, 'v')}), "+OK\r\n");
  // A long password, repeated: redacted, never named by identity.
  const std::string password(100, 'p');
  add(cmd({"AUTH", "default", password}), "+OK\r\n");
  add(cmd({"AUTH", "default", password}), "+OK\r\n");
  add(cmd({"AUTH", "default", password}), "+OK\r\n");
  add(cmd({"CLIENT", "REPLY", "SKIP"}), "");
  add(eval(script, 10), "");
  add(cmd({"CLIENT", "REPLY", "ON"}), "+OK\r\n");
  for (int k = 0; k < 4; ++k) add(eval(script, 20 + k), "$-1\r\n");
  client += eval(script, 30) + eval(script, 31);  // unanswered: emitted at the end
  CHECK(check_same(client, server) > 8);
  session_options shown;
  shown.show_secrets = true;
  CHECK(check_same(client, server, shown) > 8);
  // Small bounds: eviction while commands refer to entries, and refusals.
  argument_interner::limits small;
  small.max_entries = 1;
  small.max_total_bytes = 300;
  check_same(client, server, {}, small);
  session_options few;
  few.max_pending = 3;
  few.max_pending_bytes = 2000;  // the limits count an interned argument as a copy
  check_same(client, server, few, small);
}

TEST_CASE("session: an interned argument at any position, among any others, gives the same arguments as copies",
          "[session][interner]") {
  // Whole commands of 1 to 9 arguments, the first long one (interned from its second
  // sighting) at any position, the others short or long, empty or not: the arguments
  // before it and after it (which the copy moves back by its length) come out as sent.
  std::mt19937_64 random(43);
  std::string client, server;
  const std::array<std::string, 3> long_ones = {std::string(64, 'L'), std::string(300, 'M') + "x", seed_acquire_script};
  for (int k = 0; k < 400; ++k) {
    const std::size_t count = 1 + random() % 9;
    const std::size_t at = random() % count;
    std::vector<std::string> args;
    for (std::size_t i = 0; i < count; ++i) {
      if (i == at) {
        args.push_back(long_ones[random() % long_ones.size()]);
      } else if (i > at && random() % 4 == 0) {
        args.push_back(std::string(64 + random() % 100, static_cast<char>('a' + i)));  // long too: copied
      } else {
        args.push_back(std::string(random() % 20, static_cast<char>('A' + i)) + std::to_string(k));
      }
    }
    if (at != 0) args[0] = "GET" + std::to_string(k % 3);  // a name (not one that carries secrets)
    client += "*" + std::to_string(count) + "\r\n";
    for (const std::string& a : args) client += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    server += "$-1\r\n";
  }
  CHECK(check_same(client, server) > 300);
}

TEST_CASE("session: many distinct long arguments, pipelined, keep the interner bounded", "[session][interner]") {
  std::string client, server;
  for (int k = 0; k < 120; ++k) {
    const std::string value = std::string(64 + k % 7, static_cast<char>('a' + k % 26)) + std::to_string(k % 40);
    client += cmd({"SET", "key", value});
    server += "+OK\r\n";
  }
  argument_interner::limits l;
  l.max_entries = 4;
  l.max_total_bytes = 4 * 80;
  CHECK(check_same(client, server, {}, l) > 0);
}

TEST_CASE("session: destroyed with pending interned commands, then its interner", "[session][interner]") {
  const std::string script = seed_acquire_script;
  std::string client;
  for (int k = 0; k < 10; ++k) client += eval(script, k);
  argument_interner::limits one;
  one.max_entries = 1;
  auto interner = std::make_unique<argument_interner>(one);
  interning_sink sink;
  {
    auto s = std::make_unique<resp_session>(session_options{}, 1,
                                            std::array<endpoint, 2>{make_endpoint("10.0.0.1", 52000),
                                                                    make_endpoint("10.0.0.2", 6379)},
                                            0, sink, side_reason::syn, interner.get());
    s->on_data(0, client, 0, 1000);
    CHECK(interner->entries() == 1);
    s.reset();  // no finish(): the pending commands give their references back
  }
  // Every reference was given back: the entry can be evicted for a new one.
  const std::string other(script.size(), 'x');
  entry* e = intern(*interner, other);
  REQUIRE(e != nullptr);
  CHECK(interner->stats().evicted == 1);
  argument_interner::release(e);
  interner.reset();  // ASan: nothing refers to it any more
  CHECK(sink.lines.empty());
}
