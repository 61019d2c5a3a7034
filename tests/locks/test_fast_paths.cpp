// Fast paths agree with the general ones: the recognizer's identify_command with
// resp::iequals against every name and parse_wire_int with std::from_chars (on the names
// and numbers clients send and on near misses); lock_groups with and without its lookup
// shortcuts; the summary's rows with the table's fmt specification.
#include <array>
#include <bit>
#include <cstring>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "helpers.hpp"
#include "lockscope/ingest/message.hpp"
#include "lockscope/locks/command_words.hpp"
#include "lockscope/locks/display_text.hpp"
#include "lockscope/locks/lock_report.hpp"
#include "lockscope/ingest/short_bytes.hpp"
#include "lockscope/lock/scripts.hpp"
#include "timeline/lock_store.hpp"
#include "timeline/text_interner.hpp"
#include "timeline/timer_queue.hpp"

using namespace lockscope;
using locks::command_word;

namespace {

constexpr std::array<std::pair<std::string_view, command_word>, 33> words{{
    {"ASKING", command_word::asking},
    {"CLUSTER", command_word::cluster},
    {"SELECT", command_word::select},
    {"RESET", command_word::reset},
    {"SET", command_word::set},
    {"SETNX", command_word::setnx},
    {"EXPIRE", command_word::expire},
    {"PEXPIRE", command_word::pexpire},
    {"DEL", command_word::del},
    {"UNLINK", command_word::unlink},
    {"SUBSCRIBE", command_word::subscribe},
    {"SSUBSCRIBE", command_word::ssubscribe},
    {"UNSUBSCRIBE", command_word::unsubscribe},
    {"SUNSUBSCRIBE", command_word::sunsubscribe},
    {"PSUBSCRIBE", command_word::psubscribe},
    {"PUNSUBSCRIBE", command_word::punsubscribe},
    {"SCRIPT", command_word::script},
    {"EVAL", command_word::eval},
    {"EVAL_RO", command_word::eval_ro},
    {"EVALSHA", command_word::evalsha},
    {"EVALSHA_RO", command_word::evalsha_ro},
    {"GET", command_word::get},
    {"ZREM", command_word::zrem},
    {"PUBSUB", command_word::pubsub},
    {"RPOPLPUSH", command_word::list_move},
    {"BRPOPLPUSH", command_word::list_move},
    {"LMOVE", command_word::list_move},
    {"BLMOVE", command_word::list_move},
    {"DELEX", command_word::delex},
    {"DELIFEQ", command_word::delifeq},
    {"FUNCTION", command_word::function},
    {"FCALL", command_word::fcall},
    {"FCALL_RO", command_word::fcall_ro},
}};

// The general path: the name compared with each word in turn.
command_word by_iequals(std::string_view name) {
  command_word found = command_word::other;
  for (const auto& [word, id] : words) {
    if (resp::iequals(name, word)) found = id;
  }
  CHECK(locks::identify_command_general(name) == found);
  return found;
}

}  // namespace

TEST_CASE("identify_command names what resp::iequals names, case folded, and nothing else", "[recognizer][fast]") {
  for (const auto& [word, id] : words) {
    std::string upper(word), lower(word), mixed(word);
    for (std::size_t i = 0; i < word.size(); ++i) {
      lower[i] = resp::ascii_lower(word[i]);
      if (i % 2 == 1) mixed[i] = lower[i];
    }
    CHECK(locks::identify_command(upper) == id);
    CHECK(locks::identify_command(lower) == id);
    CHECK(locks::identify_command(mixed) == id);
  }
  // Every one-byte change, every prefix and every one-byte extension of every word (in
  // both cases), over all 256 byte values: near misses stay `other`, exactly as iequals says.
  std::size_t compared = 0;
  for (const auto& [word, id] : words) {
    for (const bool lower_case : {false, true}) {
      std::string w(word);
      if (lower_case) {
        for (char& c : w) c = resp::ascii_lower(c);
      }
      for (std::size_t n = 0; n <= w.size(); ++n) {
        const std::string prefix = w.substr(0, n);
        CHECK(locks::identify_command(prefix) == by_iequals(prefix));
        ++compared;
      }
      for (std::size_t i = 0; i <= w.size(); ++i) {
        for (int b = 0; b < 256; ++b) {
          std::string changed = w, extended = w;
          if (i < w.size()) changed[i] = static_cast<char>(b);
          extended.insert(i, 1, static_cast<char>(b));
          CHECK(locks::identify_command(changed) == by_iequals(changed));
          CHECK(locks::identify_command(extended) == by_iequals(extended));
          compared += 2;
        }
      }
    }
  }
  CHECK(compared > 100'000);
  for (std::string_view other : {"", "GETSET", "HSET", "PTTL", "PUBLISH", "EVALX", "EVAL RO", "EVALSHA-RO", "MULTI",
                                 "PSUBSCRIBEX", "PUNSUBSCRIBED", "SPUBLISH", "HELLO", "AUTH", "CLIENT"}) {
    CHECK(locks::identify_command(other) == command_word::other);
    CHECK(by_iequals(other) == command_word::other);
  }
}

TEST_CASE("parse_wire_int reads what std::from_chars reads, and refuses what it refuses", "[recognizer][fast]") {
  auto same = [](std::string_view s) {
    std::int64_t fast = 11, general = 11;
    const bool fast_ok = locks::parse_wire_int(s, fast);
    const bool general_ok = locks::parse_wire_int_general(s, general);
    INFO("input \"" << std::string(s) << "\"");
    REQUIRE(fast_ok == general_ok);
    if (fast_ok) REQUIRE(fast == general);
    return fast_ok;
  };
  // The lease and numkeys Redisson sends, and the edges of the digit loop (18 digits)
  // and of int64.
  CHECK(same("30000"));
  CHECK(same("99999999"));
  CHECK(same("00000000"));
  CHECK(same("1234"));
  CHECK(same("12345678"));
  CHECK(same("1"));
  CHECK(same("0"));
  CHECK(same("000000000000000000"));
  CHECK(same("999999999999999999"));
  CHECK(same("1000000000000000000"));
  CHECK(same("9223372036854775807"));
  CHECK(same("-9223372036854775808"));
  CHECK(same("-5"));
  CHECK(same("-0"));
  CHECK_FALSE(same(""));
  CHECK_FALSE(same("-"));
  CHECK_FALSE(same("+5"));
  CHECK_FALSE(same(" 5"));
  CHECK_FALSE(same("5 "));
  CHECK_FALSE(same("5x"));
  CHECK_FALSE(same("x5"));
  CHECK_FALSE(same("1.5"));
  CHECK_FALSE(same("9223372036854775808"));
  CHECK_FALSE(same("-9223372036854775809"));
  CHECK_FALSE(same("99999999999999999999"));
  CHECK_FALSE(same(std::string_view("1\0" "2", 3)));
  CHECK_FALSE(same("\xb0"));  // '0' + 128: no digit once unsigned
  CHECK_FALSE(same("/"));     // '0' - 1
  CHECK_FALSE(same(":"));     // '9' + 1
  // Every byte value at every position of digit strings of 1 to 19 bytes (the digit
  // loop takes up to 18): accepted exactly when that byte is a digit, or a leading '-'.
  for (std::size_t n = 1; n <= 19; ++n) {
    for (std::size_t i = 0; i < n; ++i) {
      for (int b = 0; b < 256; ++b) {
        std::string s;
        for (std::size_t k = 0; k < n; ++k) s += static_cast<char>('1' + (k * 7 + n) % 9);
        s[i] = static_cast<char>(b);
        const bool digit = b >= '0' && b <= '9';
        const bool accepted = same(s);
        if (n <= 18) CHECK(accepted == (digit || (b == '-' && i == 0 && n > 1)));  // 19 digits may overflow
      }
    }
  }
  // Random strings of digits and near-digits, every length up to 22.
  std::mt19937_64 rng(14);
  constexpr std::string_view alphabet = "0123456789012345678901234567890123456789-+ /:x\xb0";
  std::size_t accepted = 0;
  for (int i = 0; i < 200'000; ++i) {
    std::string s(rng() % 23, '0');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    if (rng() % 2 == 0) {
      for (char& c : s) {
        if (c < '0' || c > '9') c = static_cast<char>('0' + rng() % 10);  // all digits: mostly accepted
      }
    }
    accepted += same(s) ? 1 : 0;
  }
  CHECK(accepted > 50'000);
}

TEST_CASE("the recognizer reads an EVAL's integers alike on its fast path and off it", "[recognizer][fast]") {
  const std::string acquire(lock::script(lock::script_kind::acquire).text);
  // Leases the digit loop reads and ones it hands to from_chars: lease_ms is what
  // from_chars reads, -1 when it refuses.
  for (std::string lease : {"30000", "0", "-1", "-30000", "999999999999999999", "1000000000000000000",
                            "9223372036854775807", "9223372036854775808", "+30000", "30000 ", "3e4", ""}) {
    std::int64_t expected = -1;
    if (!locks::parse_wire_int_general(lease, expected)) expected = -1;
    timeline_test::op_recorder rec;
    locks::lock_recognizer r(rec);
    // The same script three times: the first is classified, the rest found as the last one.
    for (int i = 0; i < 3; ++i) {
      timeline_test::feed(r, {"EVAL", acquire, "1", "myLock", lease, "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"}, "$-1\r\n");
    }
    INFO("lease \"" << lease << "\"");
    REQUIRE(rec.ops.size() == 3);
    for (const auto& op : rec.ops) {
      CHECK(op.kind == locks::lock_op_kind::acquire);
      CHECK(op.lease_ms == expected);
      CHECK(op.lock == "myLock");
    }
  }
  // numkeys: a sign, spaces, or a count beyond the arguments are not an EVAL of a lock.
  for (std::string numkeys : {"+1", " 1", "1 ", "-1", "01", "2", "18446744073709551617"}) {
    timeline_test::op_recorder rec;
    locks::lock_recognizer r(rec);
    timeline_test::feed(r, {"EVAL", acquire, numkeys, "myLock", "30000", "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"},
                        "$-1\r\n");
    INFO("numkeys \"" << numkeys << "\"");
    if (numkeys == "01") {
      REQUIRE(rec.ops.size() == 1);  // from_chars reads a leading zero
      CHECK(rec.ops[0].lease_ms == 30000);
    } else if (numkeys == "2") {
      REQUIRE(rec.ops.size() == 1);  // KEYS = [myLock, 30000], ARGV = [owner]: no lease
      CHECK(rec.ops[0].lease_ms == -1);
    } else {
      CHECK(rec.ops.empty());
    }
  }
}

namespace {

std::string describe(const timeline_test::recorded_event& e) {
  std::string out = fmt::format("{} {} {} {} {} {} {} db{} {}", e.ts_us, e.event, e.lock, e.owner, e.client, e.server,
                                e.lock_server, e.db, e.detail);
  if (e.total > 0) {
    out += fmt::format(" {}/{}/{} {} {} [{}] [{}] [{}]", e.acquired, e.total, e.needed, e.succeeded, e.released,
                       fmt::join(e.acquired_on, ","), fmt::join(e.owners, ","), fmt::join(e.tried, ","));
  }
  return out;
}

// Random lock events in runs from one client and owner (as pipelined calls arrive), on
// one server first, then on three (the first tries are replayed then): what lock_groups
// reports, one line an event. `lone_tries`: every other run's events each by an owner
// of its own (an anomaly storm's random owners: sets of one key). `owner_hashes`: the tries
// carry their owner's hash as the timeline gives it (1), or a wrong one left behind by a
// stage that replaced the text (2: it must be ignored); 0: none. `dense`: events 100
// times closer (hundreds of tries within a window, as in a storm).
// `reopen_retried`: group_options::reopen_retried_sets.
std::vector<std::string> group_events(std::uint64_t seed, bool shortcuts, std::size_t max_open, bool compact_single_sets = true,
                                      bool lone_tries = false, int owner_hashes = 0, bool dense = false,
                                      bool reopen_retried = true) {
  timeline_test::event_recorder rec;
  locks::group_options o;
  o.lookup_shortcuts = shortcuts;
  o.compact_single_sets = compact_single_sets;
  o.reopen_retried_sets = reopen_retried;
  o.max_open = max_open;
  o.max_set_keys = 4;
  locks::lock_groups groups(o, rec);
  std::mt19937_64 rng(seed);
  const locks::lock_event_kind kinds[] = {
      locks::lock_event_kind::acquired,       locks::lock_event_kind::acquired,
      locks::lock_event_kind::contended,      locks::lock_event_kind::released,
      locks::lock_event_kind::unlock_rejected, locks::lock_event_kind::expired,
      locks::lock_event_kind::renewed,        locks::lock_event_kind::renew_failed,
      locks::lock_event_kind::reentered,      locks::lock_event_kind::force_released};
  const char* servers[] = {"10.0.0.9:6379", "10.0.0.9:6380", "10.0.0.9:6381"};
  // "R1\0x" + "10.0.0.1:50000" and "R1" + "x\010.0.0.1:50000" join to one set key.
  using namespace std::string_view_literals;
  const std::string_view owners[] = {"R1"sv, "R1\0x"sv, "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"sv,
                                     "5f1c3a9e-7d2b-4e8a-9c61-2b7e4d9a0f35:7"sv};
  const std::string_view clients[] = {"10.0.0.1:50000"sv, "10.0.0.1:50001"sv, "x\0" "10.0.0.1:50000"sv, "10.0.0.2:50000"sv};
  std::int64_t t = 1'000'000;
  std::uint64_t fresh = 0;
  const std::string stale_owner = "an owner text replaced since";
  std::mt19937 stale_hashes(static_cast<std::uint32_t>(seed));  // (apart: the events stay as without)
  for (int run = 0; run < 500; ++run) {
    std::string owner(owners[rng() % 4]);
    const std::string client(clients[rng() % 4]);
    const std::size_t server_count = run < 100 ? 1 : 3;
    for (std::uint64_t n = 1 + rng() % 40; n > 0; --n) {
      // Every third run in whole 20 ms steps, often none: calls answered at one time.
      t += static_cast<std::int64_t>(run % 3 == 2 ? rng() % 3 * 20'000 : rng() % 40'000) / (dense ? 100 : 1);
      const std::string lock = "k" + std::to_string(rng() % (run % 2 == 0 ? 5 : 400));
      const std::string server = servers[rng() % server_count];
      if (lone_tries && run % 2 == 1) owner = "lone-" + std::to_string(++fresh);
      locks::lock_event e = timeline_test::lock_event_of(kinds[rng() % 10], t, lock, owner, client, server);
      if (owner_hashes == 1) {
        e.owner_hashed = e.owner.data();
        e.owner_hash = locks::timeline_detail::hash_text(e.owner);
      } else if (owner_hashes == 2) {
        e.owner_hashed = stale_owner.data();
        e.owner_hash = static_cast<std::uint32_t>(stale_hashes());  // nothing like the owner's
      }
      groups.on_event(e);
    }
    if (rng() % 50 == 0) groups.advance_to(t + 2'000'000);
  }
  groups.finish(t + 10'000'000);
  std::vector<std::string> out;
  for (const auto& e : rec.events) out.push_back(describe(e));
  return out;
}

}  // namespace

TEST_CASE("lock_groups reports the same with its lookup shortcuts as with a hash per lookup", "[groups][fast]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    for (std::size_t max_open : {std::size_t{16}, std::size_t{8192}}) {
      INFO("seed " << seed << ", max_open " << max_open);
      const std::vector<std::string> general = group_events(seed, false, max_open);
      const std::vector<std::string> fast = group_events(seed, true, max_open);
      REQUIRE(general.size() == fast.size());
      for (std::size_t i = 0; i < general.size(); ++i) REQUIRE(fast[i] == general[i]);
      // Not vacuous: groups of both kinds formed, and streams overflowed.
      const auto has = [&](std::string_view what) {
        return std::any_of(general.begin(), general.end(),
                           [&](const std::string& line) { return line.find(what) != std::string::npos; });
      };
      CHECK(has(" quorum "));
      CHECK(has(" multilock "));
    }
  }
}

namespace {

// The summary row as the table's specification says, by fmt:
// "{:<{}}  {:>6}  {:>8.1f}%  {:<28}  {:<28}  {:>8}  {:>8}  {}\n" (names plain ASCII).
std::string row_by_fmt(std::string_view lock, const locks::lock_stats& s, std::size_t width) {
  auto triple = [](const locks::duration_stats& d) {
    return d.max < 0 ? std::string("-")
                     : locks::format_duration(d.p50) + "/" + locks::format_duration(d.p99) + "/" +
                           locks::format_duration(d.max);
  };
  auto columns = [](const std::string& t) {  // µ is two bytes, one column
    std::size_t n = 0;
    for (unsigned char c : t) n += (c & 0xC0) != 0x80 ? 1 : 0;
    return n;
  };
  auto padded = [&](const std::string& t) { return t + std::string(columns(t) < 28 ? 28 - columns(t) : 0, ' '); };
  std::string anomalies;
  for (std::size_t k = 1; k < locks::anomaly_kind_count; ++k) {
    if (s.anomalies[k] == 0) continue;
    if (!anomalies.empty()) anomalies += ' ';
    anomalies += fmt::format("{}={}", to_string(static_cast<locks::anomaly_kind>(k)), s.anomalies[k]);
  }
  if (s.anomaly_total() == 0) anomalies = "-";
  const double contended = s.acquisitions == 0 ? 0.0
                                               : 100.0 * static_cast<double>(s.contended_acquisitions) /
                                                     static_cast<double>(s.acquisitions);
  // Control bytes (C1 controls, U+0080 to U+009F, too: both their bytes), and bytes that
  // are not UTF-8, shown as '?'.
  std::string name(lock);
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x80) {
      const std::size_t n = ingest::utf8_sequence(name, i);
      if (n == 2 && c == 0xc2 && static_cast<unsigned char>(name[i + 1]) < 0xa0) {
        name[i] = '?';
        name[i + 1] = '?';
        ++i;
      } else if (n > 0) i += n - 1;
      else name[i] = '?';
    } else if (c < 0x20 || c == 0x7f) {
      name[i] = '?';
    }
  }
  return fmt::format("{:<{}}  {:>6}  {:>8.1f}%  {}  {}  {:>7}  {:>8}  {:>8}  {}\n", name, width, s.acquisitions, contended,
                     padded(triple(s.hold)), padded(triple(s.wait)), s.gave_up, s.renewals, s.expiries, anomalies);
}

}  // namespace

TEST_CASE("summary rows that repeat the previous row's figures, or have plain names, are the rows fmt writes",
          "[report][fast]") {
  // Runs of locks with the same figures (acquired once, never released; released after
  // the same hold; contended the same way) between locks whose figures differ; then
  // names with one byte of every value at every position up to 22 (plain ASCII or not).
  std::string out;
  locks::report_options ro;
  ro.format = locks::report_format::summary_only;
  ro.threads = 1;
  locks::lock_report report(ro, [&](std::string_view s) { out += s; });
  locks::lock_timeline timeline({}, report);
  std::mt19937_64 rng(7);
  std::int64_t t = 1'000'000;
  constexpr int named = 3000, odd = 1024, pairs = 256;
  for (int i = 0; i < named + odd + pairs; ++i) {
    std::string name = "job:" + std::to_string(100000 + i);
    if (i >= named + odd) {  // 0xc2 and every byte: C1 controls, other UTF-8, not UTF-8
      const int k = i - named - odd;
      name = std::string(static_cast<std::size_t>(k % 7), 'b') + "\xc2" + static_cast<char>(k) + ":" + std::to_string(k);
    } else if (i >= named) {
      const int k = i - named;
      name = std::string(static_cast<std::size_t>(k % 23), 'a') + static_cast<char>(k % 256) + ":" + std::to_string(k);
    }
    const int pattern = (i / 25) % 5;  // runs of 25 alike
    locks::lock_operation op;
    op.kind = locks::lock_op_kind::acquire;
    op.outcome = pattern == 2 ? locks::op_outcome::contended : locks::op_outcome::ok;
    op.ttl_ms = 5;
    op.lock = name;
    op.owner = "a:1";
    op.request_us = t;
    op.reply_us = t + 5;
    op.lease_ms = 30'000;
    timeline.on_operation(op);
    if (pattern == 2) {
      op.outcome = locks::op_outcome::ok;
      op.request_us = op.reply_us = t + 700 + (i % 3 == 0 ? 1 : 0);
      timeline.on_operation(op);
    }
    if (pattern == 1 || pattern == 2 || (pattern == 3 && rng() % 2 == 0)) {
      op.kind = locks::lock_op_kind::unlock;
      op.outcome = locks::op_outcome::ok;
      op.request_us = t + 900;
      op.reply_us = t + 1000 + (pattern == 3 ? static_cast<std::int64_t>(rng() % 3) * 1000 : 0);
      timeline.on_operation(op);
    }
    if (pattern == 3) {  // a second hold: the same p50, a max that varies
      op.kind = locks::lock_op_kind::acquire;
      op.outcome = locks::op_outcome::ok;
      op.request_us = op.reply_us = t + 4000;
      timeline.on_operation(op);
      op.kind = locks::lock_op_kind::unlock;
      op.request_us = t + 4100;
      op.reply_us = t + 4000 + 1000 + static_cast<std::int64_t>(rng() % 2) * 500;
      timeline.on_operation(op);
    }
    if (pattern == 4) {
      op.kind = locks::lock_op_kind::renew;
      op.outcome = locks::op_outcome::ok;
      op.request_us = op.reply_us = t + 2000;
      timeline.on_operation(op);
    }
    t += 10'000;
  }
  timeline.finish(t + 1'000'000);
  report.finish(timeline);
  std::size_t width = 4;
  timeline.for_each_lock([&](std::string_view lock, const locks::lock_stats&) {
    width = std::max(width, std::min<std::size_t>(lock.size(), 48));
  });
  std::vector<std::string> expected;
  timeline.for_each_lock([&](std::string_view lock, const locks::lock_stats& s) {
    expected.push_back(row_by_fmt(lock, s, width));
  });
  REQUIRE(expected.size() == named + odd + pairs);
  std::size_t at = out.find('\n') + 1;  // after the header
  std::size_t repeated = 0;
  std::string previous_tail;
  for (const std::string& row : expected) {
    REQUIRE(at < out.size());
    CHECK(out.compare(at, row.size(), row) == 0);
    const std::size_t name_end = row.find("  ", std::min(width, row.size()) - 1);
    const std::string tail = row.substr(name_end);
    repeated += tail == previous_tail ? 1 : 0;
    previous_tail = tail;
    at += row.size();
  }
  CHECK(at == out.size());
  CHECK(repeated > 1000);  // the shortcut was taken
  CHECK(repeated < expected.size() - 100);  // and not always
}

TEST_CASE("same_bytes is ==, and copy_bytes is memcpy, at every length and every differing byte", "[fast]") {
  std::mt19937_64 rng(3);
  for (std::size_t n = 0; n <= 140; ++n) {  // every step of copy_bytes' inline copies, and past them
    // Texts inside larger buffers with guard bytes, so reading or writing outside shows.
    std::string a(n + 16, '#'), b(n + 16, '#');
    for (std::size_t i = 0; i < n; ++i) a[8 + i] = b[8 + i] = static_cast<char>(rng());
    const std::string_view va(a.data() + 8, n), vb(b.data() + 8, n);
    CHECK(ingest::same_bytes(va, vb));
    for (std::size_t i = 0; i < n; ++i) {
      for (int flip : {1, 0x80, 0xff}) {
        b[8 + i] = static_cast<char>(b[8 + i] ^ flip);
        CHECK_FALSE(ingest::same_bytes(va, vb));
        CHECK_FALSE(ingest::same_bytes(vb, va));
        b[8 + i] = static_cast<char>(b[8 + i] ^ flip);
      }
    }
    b[7] = 'x';  // a guard byte that differs does not count
    b[8 + n] = 'y';
    CHECK(ingest::same_bytes(va, vb));
    if (n > 0) {
      CHECK_FALSE(ingest::same_bytes(va.substr(1), vb));
      CHECK_FALSE(ingest::same_bytes(va, vb.substr(0, n - 1)));
    }
    std::string to(n + 16, '-'), expected(n + 16, '-');
    std::memcpy(expected.data() + 8, va.data(), n);
    CHECK(ingest::copy_bytes(to.data() + 8, va) == to.data() + 8 + n);
    CHECK(to == expected);
  }
  // Around the length where copy_bytes hands over to memcpy, and well past it.
  for (std::size_t n : {120u, 127u, 128u, 129u, 136u, 300u, 4099u}) {
    std::string from(n + 16, '#');
    for (std::size_t i = 0; i < n; ++i) from[8 + i] = static_cast<char>(rng());
    const std::string_view text(from.data() + 8, n);
    std::string to(n + 16, '-'), expected(n + 16, '-');
    std::memcpy(expected.data() + 8, text.data(), n);
    CHECK(ingest::copy_bytes(to.data() + 8, text) == to.data() + 8 + n);
    CHECK(to == expected);
  }
}

TEST_CASE("hash_text reads a text's last bytes in one load: the hash of reading them byte by byte", "[fast]") {
  // The general path: the tail's bytes one at a time (hash_text before its one-load tail).
  auto by_bytes = [](std::string_view s) {
    std::uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t v = 0;
      for (std::size_t k = 0; k < 8; ++k) v |= std::uint64_t{static_cast<unsigned char>(s[i + k])} << (8 * k);
      h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
      h ^= h >> 31;
    }
    if (i < s.size()) {
      std::uint64_t v = 0;
      for (std::size_t k = 0; i + k < s.size(); ++k) v |= std::uint64_t{static_cast<unsigned char>(s[i + k])} << (8 * k);
      h = (h ^ v) * 0x94d049bb133111ebull;
      h ^= h >> 29;
    }
    h *= 0xff51afd7ed558ccdull;
    return static_cast<std::uint32_t>(h ^ (h >> 32));
  };
  if constexpr (std::endian::native != std::endian::little) {
    SUCCEED("the word loads give other (equally valid) hashes on a big-endian machine");
    return;
  }
  std::mt19937_64 rng(5);
  for (std::size_t n = 0; n <= 70; ++n) {
    // Inside a larger buffer whose guard bytes change: only the text's bytes may count.
    std::string buffer(n + 16, '#');
    for (int round = 0; round < 4; ++round) {
      for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<char>(rng());
      const std::string_view text(buffer.data() + 8, n);
      const std::uint32_t h = locks::timeline_detail::hash_text(text);
      CHECK(h == by_bytes(text));
      buffer[7] = static_cast<char>(buffer[7] ^ 0x5a);
      buffer[8 + n] = static_cast<char>(buffer[8 + n] ^ 0xa5);
      CHECK(locks::timeline_detail::hash_text(text) == h);
    }
  }
  CHECK(locks::timeline_detail::hash_text("myLock:000000012345") != locks::timeline_detail::hash_text("myLock:000000012346"));
}

TEST_CASE("timer_queue pops what a sorted map pops: its 'nothing due' bound never hides an entry", "[fast]") {
  // Entries arrive as the timeline queues them: mostly in time order per lease (runs),
  // some earlier than everything queued (the heap), asked for between pushes at times
  // before, at and after the earliest. Distinct times: the order is the times' order.
  using locks::timeline_detail::timer;
  locks::timeline_detail::timer_queue queue;
  std::map<std::int64_t, std::uint32_t> model;
  std::mt19937_64 rng(11);
  std::int64_t clock = 1'700'000'000'000'000;
  std::int64_t unique = 0;
  std::size_t popped = 0, refused = 0, earlier = 0;
  for (int step = 0; step < 200'000; ++step) {
    const unsigned what = static_cast<unsigned>(rng() % 8);
    if (what < 4) {
      const std::int64_t lease = what == 3 ? 1000 : (what + 1) * 30'000;
      std::int64_t at = clock + lease * 1000 + (++unique % 997);
      if (rng() % 16 == 0 && !model.empty()) {  // before everything queued
        at = model.begin()->first - 1 - static_cast<std::int64_t>(rng() % 1000);
        ++earlier;
      }
      if (model.count(at) != 0) continue;
      const auto lock = static_cast<std::uint32_t>(rng() % 100'000);
      queue.push(timer{at, lock});
      model.emplace(at, lock);
    } else {
      std::int64_t to = clock;
      if (!model.empty() && rng() % 2 == 0) {  // right at, just before, or just after the earliest
        to = model.begin()->first + static_cast<std::int64_t>(rng() % 3) - 1;
      }
      timer due;
      const bool got = queue.pop_due(to, due);
      const bool expected = !model.empty() && model.begin()->first <= to;
      REQUIRE(got == expected);
      if (got) {
        CHECK(due.at_us.get() == model.begin()->first);
        CHECK(due.lock == model.begin()->second);
        model.erase(model.begin());
        ++popped;
      } else {
        ++refused;
      }
      clock += static_cast<std::int64_t>(rng() % 50'000);
    }
  }
  for (timer due; queue.pop_due(std::numeric_limits<std::int64_t>::max(), due);) {
    REQUIRE(!model.empty());
    CHECK(due.at_us.get() == model.begin()->first);
    model.erase(model.begin());
  }
  CHECK(model.empty());
  CHECK(popped > 10'000);
  CHECK(refused > 10'000);
  CHECK(earlier > 1'000);
}

// One-key sets (a lock taken alone, nearly every try on one server) are kept as a copy
// beside their timer until something finds them: the same events as a record each, on
// one server and then three, with sets evicted early (max_open 16) or not.
TEST_CASE("lock_groups reports the same with its one-key sets kept compact as with a record each", "[groups][fast]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    for (std::size_t max_open : {std::size_t{16}, std::size_t{8192}}) {
      for (bool lone_tries : {false, true}) {
        INFO("seed " << seed << ", max_open " << max_open << ", lone tries " << lone_tries);
        const std::vector<std::string> records = group_events(seed, true, max_open, false, lone_tries);
        const std::vector<std::string> compact = group_events(seed, true, max_open, true, lone_tries);
        REQUIRE(records.size() == compact.size());
        for (std::size_t i = 0; i < records.size(); ++i) REQUIRE(compact[i] == records[i]);
        CHECK(std::any_of(records.begin(), records.end(),
                          [](const std::string& line) { return line.find(" multilock ") != std::string::npos; }));
      }
    }
  }
}

// While the capture has one server, its last tries wait in a ring for a second server
// to show up (then they are replayed); a try that opened a one-key set is read from that
// set's copy instead, until the set goes. With hundreds of tries a window, the ring comes
// round while the sets it names are still open: the same events as with a record each
// (every try copied into the ring), on one server and then three.
TEST_CASE("lock_groups replays the same tries when the ring reads them from one-key sets", "[groups][fast]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    for (std::size_t max_open : {std::size_t{16}, std::size_t{300}, std::size_t{8192}}) {
      INFO("seed " << seed << ", max_open " << max_open);
      const std::vector<std::string> records = group_events(seed, true, max_open, false, true, 0, true);
      const std::vector<std::string> compact = group_events(seed, true, max_open, true, true, 0, true);
      REQUIRE(records == compact);
      CHECK(std::any_of(records.begin(), records.end(),
                        [](const std::string& line) { return line.find(" quorum ") != std::string::npos; }));
    }
  }
}

// A set of one key tried again by its owner over its connection is opened again in place
// (a herd's waiter retrying its lock): the same events as closing it and opening it again
// (a record reused, or freed and opened anew), on one server and then three (where a
// quorum attempt is kept between the two: closed then, as before), sparse and dense,
// compact one-key sets or records, sets evicted early or not.
TEST_CASE("lock_groups reports the same with a retried one-key set opened again in place", "[groups][fast]") {
  // Two seeds: its 24 variants a seed already cover the paths (each run is long at -O0).
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    for (std::size_t max_open : {std::size_t{16}, std::size_t{300}, std::size_t{8192}}) {
      for (const int variant : {0, 1, 2, 3, 4, 5, 6, 7}) {
        const bool compact = (variant & 1) != 0, lone_tries = (variant & 2) != 0, dense = (variant & 4) != 0;
        INFO("seed " << seed << ", max_open " << max_open << ", compact " << compact << ", lone tries " << lone_tries
                     << ", dense " << dense);
        const std::vector<std::string> closed =
            group_events(seed, true, max_open, compact, lone_tries, 0, dense, false);
        const std::vector<std::string> in_place =
            group_events(seed, true, max_open, compact, lone_tries, 0, dense, true);
        REQUIRE(closed.size() == in_place.size());
        for (std::size_t i = 0; i < closed.size(); ++i) REQUIRE(in_place[i] == closed[i]);
        CHECK(std::any_of(closed.begin(), closed.end(),
                          [](const std::string& line) { return line.find(" multilock ") != std::string::npos; }));
      }
    }
  }
}

// A try's set is keyed by its owner and connection: the owner's hash the timeline gives
// with the event stands for hashing the owner text again, when it is the text's (a hash
// left behind by a stage that replaced the text is not used). The same events either way.
TEST_CASE("lock_groups reports the same with its tries' owner hashes given as without", "[groups][fast]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    for (std::size_t max_open : {std::size_t{16}, std::size_t{8192}}) {
      for (bool lone_tries : {false, true}) {
        INFO("seed " << seed << ", max_open " << max_open << ", lone tries " << lone_tries);
        const std::vector<std::string> hashed_here = group_events(seed, true, max_open, true, lone_tries, 0);
        const std::vector<std::string> given = group_events(seed, true, max_open, true, lone_tries, 1);
        const std::vector<std::string> left_behind = group_events(seed, true, max_open, true, lone_tries, 2);
        REQUIRE(given == hashed_here);
        REQUIRE(left_behind == hashed_here);
        CHECK(std::any_of(hashed_here.begin(), hashed_here.end(),
                          [](const std::string& line) { return line.find(" multilock ") != std::string::npos; }));
      }
    }
  }
}

// A set closed (its owner's next round on its key, or the key released) and opened again
// at the same time is its first timer's too (the record it pins is the one opened again):
// that timer, coming due, ends the set opened again, so the owner's next key starts a set
// of its own, compact or not.
TEST_CASE("lock_groups: a one-key set opened again at its closed record's time ends with that record's timer",
          "[groups][fast]") {
  for (const int variant : {0, 1, 2, 3}) {
    const bool compact = (variant & 1) != 0, released = (variant & 2) != 0;
    INFO("compact " << compact << ", released " << released);
    timeline_test::event_recorder rec;
    locks::group_options o;
    o.max_open = 16;
    o.compact_single_sets = compact;
    locks::lock_groups groups(o, rec);
    const auto acquired = locks::lock_event_kind::acquired;
    const std::string client = "10.0.0.1:50000", server = "10.0.0.9:6379";
    groups.on_event(timeline_test::lock_event_of(acquired, 1'000, "a", "owner", client, server));
    if (released) {  // its key given up: the set closes
      groups.on_event(timeline_test::lock_event_of(locks::lock_event_kind::released, 1'000, "a", "owner", client, server));
    }
    groups.on_event(timeline_test::lock_event_of(acquired, 1'000, "a", "owner", client, server));  // its next round
    for (int i = 0; i < 15; ++i) {  // other owners' sets: the first timer comes due (max_open), not the second
      groups.on_event(timeline_test::lock_event_of(acquired, 2'000, "k" + std::to_string(i), "other" + std::to_string(i),
                                                   "10.0.0.2:" + std::to_string(50000 + i), server));
    }
    groups.on_event(timeline_test::lock_event_of(acquired, 3'000, "b", "owner", client, server));
    groups.finish(10'000'000);
    CHECK(std::none_of(rec.events.begin(), rec.events.end(), [](const timeline_test::recorded_event& e) {
      return e.event == "multilock";
    }));
  }
}

TEST_CASE("lock_store: every lock's scope and name read back as added, whatever their sizes", "[fast]") {
  // A row's varints and name are written inline (no memcpy call): names of every length
  // around the copy's steps (4, 8, 128 bytes) and beyond, scopes of one to three varint bytes.
  locks::timeline_detail::lock_store store;
  std::mt19937 rng(29);
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::string>> added;
  for (std::size_t size = 0; size <= 300; ++size) {
    for (const std::uint32_t scope : {0u, 127u, 128u, 16383u, 16384u, 70000u}) {
      std::string name(size, '\0');
      for (char& c : name) c = static_cast<char>('a' + rng() % 26);
      const std::uint32_t id = store.add(scope, name);
      REQUIRE(id != locks::timeline_detail::no_id);
      added.emplace_back(id, scope, std::move(name));
    }
  }
  for (const auto& [id, scope, name] : added) {
    const auto row = locks::timeline_detail::lock_store::identity_of(store[id]);
    REQUIRE(row.scope == scope);
    REQUIRE(row.name == name);
  }
  CHECK(store.size() == added.size());
  CHECK(store.longest_name() == 300);
}
