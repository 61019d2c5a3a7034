// timeline_options::max_locks (--max-locks): a capture with ever-new lock names keeps a
// bounded number of rows, and forgetting the idle ones changes no event.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <set>
#include <unistd.h>

#include "capture_builder.hpp"
#include "helpers.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"

namespace lockscope::timeline_test {

namespace {

constexpr std::int64_t forget_ms = 1000;
constexpr std::string_view forget_owner_a = "a1a1a1a1-0000-4000-8000-000000000001:1";
constexpr std::string_view forget_owner_b = "b2b2b2b2-0000-4000-8000-000000000002:2";
constexpr std::string_view forget_owner_c = "c3c3c3c3-0000-4000-8000-000000000003:3";

std::vector<std::string> script_call(lock::script_kind k, std::vector<std::string> keys_and_args, std::size_t keys) {
  std::vector<std::string> v{"EVAL", std::string(lock::script(k).text), std::to_string(keys)};
  v.insert(v.end(), keys_and_args.begin(), keys_and_args.end());
  return v;
}

// What the built traffic did, counted as it was built (the truth the totals must match).
struct built_truth {
  std::uint64_t names = 0;           // distinct lock names
  std::uint64_t acquisitions = 0;    // first acquisitions (not reentries)
  std::uint64_t contended = 0;       // acquisitions after a failed attempt
  std::uint64_t expiries = 0;
  std::uint64_t renewals = 0;        // successful ones
  std::uint64_t late_renewals = 0;   // renewals after the lease ran out: expired_while_held
  std::uint64_t non_owner_unlocks = 0;
};

// `cycles` locks "order:<i>" every 20 ms, each through one Redisson life (plain,
// contended with pub/sub wake-up, expired then renewed late, reentrant, unlocked by
// another owner); every 25th cycle reuses the name of the one 400 cycles before.
built_truth build_order_locks(const std::string& path, int cycles) {
  using lock::script_kind;
  capture_builder b;
  const std::int64_t t0 = 1'717'209'303'000'000;
  const int a = b.connect("192.168.7.21", 50001, "192.168.7.10", 6379, t0);
  const int bc = b.connect("192.168.7.22", 50002, "192.168.7.10", 6379, t0 + 100);
  const int bs = b.connect("192.168.7.22", 50003, "192.168.7.10", 6379, t0 + 200);
  const int c = b.connect("192.168.7.23", 50004, "192.168.7.10", 6379, t0 + 300);
  const int watchdog = b.connect("192.168.7.21", 50005, "192.168.7.10", 6379, t0 + 400);  // A's late renewals
  // A long hold every 2 s, with B subscribed for its 1.5 s: waits that span passes.
  const int long_a = b.connect("192.168.7.21", 50006, "192.168.7.10", 6379, t0 + 500);
  const int long_b = b.connect("192.168.7.22", 50007, "192.168.7.10", 6379, t0 + 600);
  const int long_bs = b.connect("192.168.7.22", 50008, "192.168.7.10", 6379, t0 + 700);
  built_truth truth;
  std::set<std::string> names;
  const std::string lease = "100";
  auto acquire = [&](const std::string& name, std::string_view owner, const std::string& lease_ms) {
    return script_call(script_kind::acquire, {name, lease_ms, std::string(owner)}, 1);
  };
  auto unlock = [&](const std::string& name, std::string_view owner) {
    return script_call(script_kind::unlock, {name, lock::channel_name(name), "0", lease, std::string(owner)}, 2);
  };
  auto renew = [&](const std::string& name, std::string_view owner) {
    return script_call(script_kind::renew, {name, lease, std::string(owner)}, 1);
  };
  for (int i = 0; i < cycles; ++i) {
    const std::int64_t t = t0 + forget_ms + i * 20 * forget_ms;
    const std::string name = "order:" + std::to_string(i % 25 == 24 && i >= 500 ? i - 400 : i);
    names.insert(name);
    // B waits on pub/sub while A holds it, `held_us`, on connections of their own.
    auto contend = [&](int holder, int waiter, int subscriber, std::int64_t held_us) {
      const std::string channel = lock::channel_name(name);
      b.command(holder, t, acquire(name, forget_owner_a, "30000"), resp_nil);
      b.command(waiter, t + 1000, acquire(name, forget_owner_b, lease), resp_int(29999));
      b.command(subscriber, t + 2000, {"SUBSCRIBE", channel},
                resp_array({"subscribe", channel}).replace(0, 2, "*3") + resp_int(1));
      b.command(holder, t + held_us, unlock(name, forget_owner_a), resp_int(1));
      b.server_push(subscriber, t + held_us + 130, resp_array({"message", channel, "0"}));
      b.command(waiter, t + held_us + 400, acquire(name, forget_owner_b, lease), resp_nil);
      b.command(subscriber, t + held_us + 700, {"UNSUBSCRIBE", channel},
                resp_array({"unsubscribe", channel}).replace(0, 2, "*3") + resp_int(0));
      b.command(waiter, t + held_us + 3000, unlock(name, forget_owner_b), resp_int(1));
      truth.acquisitions += 2;
      ++truth.contended;
    };
    if (i % 100 == 56) {
      contend(long_a, long_b, long_bs, 1500 * forget_ms);
      continue;
    }
    switch (i % 10) {
      case 6:
        contend(a, bc, bs, 5 * forget_ms);
        break;
      case 7:  // A's 30 ms lease runs out; its watchdog renews 120 ms later
        b.command(a, t, acquire(name, forget_owner_a, "30"), resp_nil);
        b.command(watchdog, t + 150 * forget_ms, renew(name, forget_owner_a), resp_int(0));
        ++truth.acquisitions;
        ++truth.expiries;
        ++truth.late_renewals;
        break;
      case 8:  // reentered, renewed, released in two steps
        b.command(a, t, acquire(name, forget_owner_a, lease), resp_nil);
        b.command(a, t + 1000, acquire(name, forget_owner_a, lease), resp_nil);
        b.command(a, t + 2000, renew(name, forget_owner_a), resp_int(1));
        b.command(a, t + 3000, unlock(name, forget_owner_a), resp_int(0));
        b.command(a, t + 4000, unlock(name, forget_owner_a), resp_int(1));
        ++truth.acquisitions;
        ++truth.renewals;
        break;
      case 9:  // C unlocks A's lock: refused
        b.command(a, t, acquire(name, forget_owner_a, lease), resp_nil);
        b.command(c, t + 2000, unlock(name, forget_owner_c), resp_nil);
        b.command(a, t + 4000, unlock(name, forget_owner_a), resp_int(1));
        ++truth.acquisitions;
        ++truth.non_owner_unlocks;
        break;
      default:
        b.command(a, t, acquire(name, forget_owner_a, lease), resp_nil);
        b.command(a, t + 3000, unlock(name, forget_owner_a), resp_int(1));
        ++truth.acquisitions;
    }
  }
  const std::int64_t end = t0 + forget_ms + cycles * 20 * forget_ms + 3000 * forget_ms;
  for (const int conn : {a, bc, bs, c, watchdog, long_a, long_b, long_bs}) b.close(conn, end);
  b.write(path);
  truth.names = names.size();
  return truth;
}

struct forgetting_run {
  event_recorder events;
  locks::forgotten_locks forgotten;
  std::size_t rows = 0;
  std::uint64_t acquisitions = 0, contended = 0, renewals = 0, expiries = 0;
  std::uint64_t anomalies[locks::anomaly_kind_count] = {};
};

// The full pipeline, with the timeline's rows and totals kept.
forgetting_run run_forgetting(const std::string& pcap, std::size_t max_locks, std::size_t& most_rows) {
  forgetting_run r;
  locks::timeline_options o;
  o.max_locks = max_locks;
  most_rows = 0;
  run_pipeline(
      pcap, o, r.events,
      [&](const locks::lock_timeline& timeline) { most_rows = std::max(most_rows, timeline.lock_count()); },
      [&](const locks::lock_timeline& timeline) {
        r.forgotten = timeline.forgotten();
        r.rows = timeline.lock_count();
        timeline.for_each_lock([&](std::string_view, const locks::lock_stats& s) {
          r.acquisitions += s.acquisitions;
          r.contended += s.contended_acquisitions;
          r.renewals += s.renewals;
          r.expiries += s.expiries;
          for (std::size_t k = 0; k < locks::anomaly_kind_count; ++k) r.anomalies[k] += s.anomalies[k];
        });
      });
  return r;
}

std::filesystem::path forgetting_capture_path() {
  return std::filesystem::temp_directory_path() / ("lockscope-forget-" + std::to_string(::getpid()) + ".pcap");
}

}  // namespace

TEST_CASE("forgetting: ever-new lock names keep a bounded number of rows, and every event is the same",
          "[timeline][memory][forget]") {
  const std::filesystem::path pcap = forgetting_capture_path();
  const built_truth truth = build_order_locks(pcap.string(), 3000);
  std::size_t rows_unbounded = 0, rows_bounded = 0;
  const forgetting_run all = run_forgetting(pcap.string(), 0, rows_unbounded);
  const forgetting_run few = run_forgetting(pcap.string(), 64, rows_bounded);
  std::filesystem::remove(pcap);

  // Without a limit: a row per name, and the built truth.
  CHECK(all.rows == truth.names);
  CHECK(all.forgotten.locks == 0);
  CHECK(all.acquisitions == truth.acquisitions);
  CHECK(all.contended == truth.contended);
  CHECK(all.expiries == truth.expiries);
  CHECK(all.renewals == truth.renewals);
  const auto kind = [](locks::anomaly_kind k) { return static_cast<std::size_t>(k); };
  CHECK(all.anomalies[kind(locks::anomaly_kind::expired_while_held)] == truth.late_renewals);
  CHECK(all.anomalies[kind(locks::anomaly_kind::unlock_by_non_owner)] == truth.non_owner_unlocks);

  // With 64: the same events, in the same order, with the same fields.
  REQUIRE(few.events.events.size() == all.events.events.size());
  for (std::size_t i = 0; i < all.events.events.size(); ++i) {
    INFO("event " << i << ": " << all.events.events[i].event << " " << all.events.events[i].lock);
    REQUIRE(few.events.events[i] == all.events.events[i]);
  }
  // Bounded: the locks busy at a pass (a lease not yet passed, a wait, an expired owner
  // not yet heard from) are few here, so the rows never pass the limit.
  CHECK(few.forgotten.passes > 1);
  CHECK(few.forgotten.locks > truth.names / 2);
  CHECK(rows_bounded <= 64);
  // Contended locks too: their subscriber connection, open all along, remembers only
  // the last channels it left, not one per lock.
  CHECK(few.forgotten.contended_acquisitions > truth.contended / 2);
  CHECK(rows_unbounded == truth.names);
  // Every count is in a row or in the forgotten totals.
  CHECK(few.acquisitions + few.forgotten.acquisitions == truth.acquisitions);
  CHECK(few.contended + few.forgotten.contended_acquisitions == truth.contended);
  CHECK(few.expiries + few.forgotten.expiries == truth.expiries);
  CHECK(few.renewals + few.forgotten.renewals == truth.renewals);
  for (std::size_t k = 0; k < locks::anomaly_kind_count; ++k) {
    INFO("anomaly kind " << to_string(static_cast<locks::anomaly_kind>(k)));
    CHECK(few.anomalies[k] + few.forgotten.anomalies[k] == all.anomalies[k]);
  }
  // A name forgotten and seen again is a row again (it started fresh).
  CHECK(few.rows + few.forgotten.locks > truth.names);
}

TEST_CASE("forgetting: lockscope analyze --max-locks prints what the forgotten rows counted",
          "[timeline][memory][forget][cli]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  const std::filesystem::path pcap = forgetting_capture_path();
  const built_truth truth = build_order_locks(pcap.string(), 1000);
  int status = -1;
  const std::string unbounded = command_output(cli + " analyze --format jsonl --no-summary " + pcap.string() + " 2>/dev/null", status);
  CHECK(status == 0);
  const std::string bounded =
      command_output(cli + " analyze --format jsonl --no-summary --max-locks 32 " + pcap.string() + " 2>/dev/null", status);
  CHECK(status == 0);
  CHECK(bounded == unbounded);
  CHECK(occurrences(unbounded, "\n") > 3000);
  const std::string summary = command_output(cli + " analyze --summary --max-locks 32 " + pcap.string() + " 2>&1", status);
  CHECK(status == 0);
  // With --lock, the forgotten totals are of every lock: the line says so.
  const std::string selected =
      command_output(cli + " analyze --summary --max-locks 32 --lock 'order:1*' " + pcap.string() + " 2>/dev/null", status);
  CHECK(status == 0);  // locks matched, whether kept or forgotten
  // The HTML report ranks the locks it kept: it says so.
  const std::filesystem::path page = pcap.string() + ".html";
  const std::string html =
      command_output(cli + " analyze --format html --max-locks 32 -o " + page.string() + " " + pcap.string() + " 2>&1", status);
  CHECK(status == 0);
  CHECK(std::filesystem::file_size(page) > 1000);
  std::filesystem::remove(page);
  CHECK(html.find(" idle locks were forgotten at --max-locks 32: the html ranks, counts and draws only the others") !=
        std::string::npos);
  std::filesystem::remove(pcap);
  CHECK(status == 0);
  CHECK(selected.find("idle locks forgotten at --max-locks (selected by --lock or not), with ") != std::string::npos);
  CHECK(selected.find("\norder:2") == std::string::npos);
  INFO(summary);
  // The rows' acquisitions plus the forgotten ones: what was built.
  std::uint64_t row_acquisitions = 0, rows = 0;
  const std::regex row(R"(^order:\d+\s+(\d+)\s)");
  std::istringstream lines(summary);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      row_acquisitions += std::stoull(m[1]);
      ++rows;
    }
  }
  std::smatch m;
  const std::regex forgotten(R"(\(not in the rows above: (\d+) idle locks forgotten at --max-locks, with (\d+) acquisitions \((\d+) contended\), \d+ waits given up, (\d+) renewals, (\d+) expiries and (\d+) anomalies\))");
  REQUIRE(std::regex_search(summary, m, forgotten));
  CHECK(std::stoull(m[1]) + rows >= truth.names);
  CHECK(std::stoull(m[1]) > truth.names / 2);
  CHECK(row_acquisitions + std::stoull(m[2]) == truth.acquisitions);
  // The totals line counts the rows kept.
  CHECK(summary.find(" " + std::to_string(rows) + " locks, ") != std::string::npos);
}

}  // namespace lockscope::timeline_test
