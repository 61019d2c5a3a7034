// The summary's --top N (report_options::top): the N most contended and anomalous locks,
// most first, and a line with what the others counted. The capture is built with a
// known contention, anomaly and activity count per lock: that is the order expected.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "capture_builder.hpp"
#include "helpers.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"

namespace lockscope::timeline_test {

namespace {

constexpr std::string_view top_owner_a = "a1a1a1a1-0000-4000-8000-00000000000a:1";
constexpr std::string_view top_owner_b = "b2b2b2b2-0000-4000-8000-00000000000b:2";
constexpr std::string_view top_owner_c = "c3c3c3c3-0000-4000-8000-00000000000c:3";

std::vector<std::string> top_script_call(lock::script_kind k, std::vector<std::string> keys_and_args, std::size_t keys) {
  std::vector<std::string> v{"EVAL", std::string(lock::script(k).text), std::to_string(keys)};
  v.insert(v.end(), keys_and_args.begin(), keys_and_args.end());
  return v;
}

// What a lock was built to show.
struct built_lock {
  std::string name;
  std::uint64_t acquisitions = 0, contended = 0, refused_unlocks = 0;
  std::uint64_t trouble() const { return contended + refused_unlocks; }
};

// Locks named "jobs:…" in this first-seen order:
//   hot       3 contended acquisitions of 6            trouble 3, activity 6
//   refused   2 holds, each unlocked by another owner   trouble 2, activity 2
//   busy      12 plain acquisitions                     trouble 0, activity 12
//   hot2      3 contended of 8 (two more plain ones)    trouble 3, activity 8
//   also-busy 12 plain acquisitions (ties with busy)    trouble 0, activity 12
//   quiet-0 … quiet-19: one plain acquisition each
std::vector<built_lock> build_ranked_locks(const std::string& path) {
  using lock::script_kind;
  capture_builder b;
  const std::int64_t t0 = 1'717'209'303'000'000;
  const int a = b.connect("192.168.9.21", 51001, "192.168.9.10", 6379, t0);
  const int bc = b.connect("192.168.9.22", 51002, "192.168.9.10", 6379, t0 + 100);
  const int c = b.connect("192.168.9.23", 51003, "192.168.9.10", 6379, t0 + 200);
  const std::string lease = "30000";
  auto acquire = [&](const std::string& name, std::string_view owner) {
    return top_script_call(script_kind::acquire, {name, lease, std::string(owner)}, 1);
  };
  auto unlock = [&](const std::string& name, std::string_view owner) {
    return top_script_call(script_kind::unlock, {name, lock::channel_name(name), "0", lease, std::string(owner)}, 2);
  };
  std::int64_t t = t0 + 1'000'000;
  std::vector<built_lock> built;
  auto plain = [&](built_lock& l) {
    b.command(a, t, acquire(l.name, top_owner_a), resp_nil);
    b.command(a, t + 2000, unlock(l.name, top_owner_a), resp_int(1));
    ++l.acquisitions;
    t += 10'000;
  };
  auto contended = [&](built_lock& l) {  // A holds; B fails, then gets it once A unlocks
    b.command(a, t, acquire(l.name, top_owner_a), resp_nil);
    b.command(bc, t + 1000, acquire(l.name, top_owner_b), resp_int(29999));
    b.command(a, t + 3000, unlock(l.name, top_owner_a), resp_int(1));
    b.command(bc, t + 4000, acquire(l.name, top_owner_b), resp_nil);
    b.command(bc, t + 6000, unlock(l.name, top_owner_b), resp_int(1));
    l.acquisitions += 2;
    ++l.contended;
    t += 10'000;
  };
  auto refused = [&](built_lock& l) {  // C's unlock of A's hold is refused
    b.command(a, t, acquire(l.name, top_owner_a), resp_nil);
    b.command(c, t + 1000, unlock(l.name, top_owner_c), resp_nil);
    b.command(a, t + 2000, unlock(l.name, top_owner_a), resp_int(1));
    ++l.acquisitions;
    ++l.refused_unlocks;
    t += 10'000;
  };
  built.push_back({"jobs:hot"});
  built.push_back({"jobs:refused"});
  built.push_back({"jobs:busy"});
  built.push_back({"jobs:hot2"});
  built.push_back({"jobs:also-busy"});
  for (int i = 0; i < 20; ++i) built.push_back({"jobs:quiet-" + std::to_string(i)});
  for (int i = 0; i < 3; ++i) contended(built[0]);
  for (int i = 0; i < 2; ++i) refused(built[1]);
  for (int i = 0; i < 12; ++i) plain(built[2]);
  for (int i = 0; i < 3; ++i) contended(built[3]);
  for (int i = 0; i < 2; ++i) plain(built[3]);
  for (int i = 0; i < 12; ++i) plain(built[4]);
  for (std::size_t i = 5; i < built.size(); ++i) plain(built[i]);
  for (const int conn : {a, bc, c}) b.close(conn, t + 1'000'000);
  b.write(path);
  return built;
}

struct summary_table {
  std::vector<std::string> rows;  // whole lines, table order
  std::vector<std::string> names;
  std::string others;             // the "(not in the rows above: the other …)" line
};

summary_table parse_summary(const std::string& out) {
  summary_table t;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("jobs:", 0) == 0) {
      t.rows.push_back(line);
      t.names.push_back(line.substr(0, line.find(' ')));
    } else if (line.rfind("(not in the rows above: the other ", 0) == 0) {
      t.others = line;
    }
  }
  return t;
}

std::filesystem::path top_capture_path() {
  return std::filesystem::temp_directory_path() / ("lockscope-top-" + std::to_string(::getpid()) + ".pcap");
}

}  // namespace

TEST_CASE("summary --top: the most contended and anomalous locks first, and what the others counted",
          "[timeline][report][cli]") {
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built");
    return;
  }
  const std::filesystem::path pcap = top_capture_path();
  const std::vector<built_lock> built = build_ranked_locks(pcap.string());
  int status = -1;
  auto summary = [&](const std::string& args) {
    const std::string out = command_output(cli + " analyze --summary " + args + " " + pcap.string() + " 2>/dev/null", status);
    CHECK(status == 0);
    return out;
  };
  const std::string full = summary("");
  const summary_table all = parse_summary(full);
  const summary_table top4 = parse_summary(summary("--top 4"));
  const summary_table top0 = parse_summary(summary("--top 0"));
  const summary_table top100 = parse_summary(summary("--top 100"));
  const summary_table quiet = parse_summary(summary("--top 2 --lock 'jobs:quiet-*'"));
  // The live code path prints the same table at its end (to stderr with JSONL).
  const std::string live = command_output(cli + " analyze --replay " + pcap.string() +
                                              " --replay-speed 0 --format jsonl --top 4 2>&1 >/dev/null",
                                          status);
  CHECK(status == 0);
  std::filesystem::remove(pcap);

  // Without --top (or with 0): every lock, first seen first, as built.
  REQUIRE(all.names.size() == built.size());
  for (std::size_t i = 0; i < built.size(); ++i) CHECK(all.names[i] == built[i].name);
  CHECK(all.others.empty());
  CHECK(top0.rows == all.rows);
  // The table shows what was built (so that the ranking below is the built one).
  for (std::size_t i = 0; i < built.size(); ++i) {
    INFO(all.rows[i]);
    std::istringstream row(all.rows[i]);
    std::string name;
    std::uint64_t acquisitions = 0;
    row >> name >> acquisitions;
    CHECK(acquisitions == built[i].acquisitions);
    CHECK((built[i].refused_unlocks > 0) == (all.rows[i].find("unlock_by_non_owner") != std::string::npos));
  }

  // --top 4: contention plus anomalies, then activity, then first seen.
  REQUIRE(top4.names == std::vector<std::string>{"jobs:hot2", "jobs:hot", "jobs:refused", "jobs:busy"});
  for (std::size_t i = 0; i < top4.rows.size(); ++i) {  // each row as the full table has it
    const auto at = std::find(all.names.begin(), all.names.end(), top4.names[i]) - all.names.begin();
    CHECK(top4.rows[i] == all.rows[static_cast<std::size_t>(at)]);
  }
  // The others: also-busy and the 20 quiet ones.
  std::uint64_t other_acquisitions = 0, other_contended = 0, other_refused = 0;
  for (const built_lock& l : built) {
    if (std::find(top4.names.begin(), top4.names.end(), l.name) != top4.names.end()) continue;
    other_acquisitions += l.acquisitions;
    other_contended += l.contended;
    other_refused += l.refused_unlocks;
  }
  CHECK(top4.others == "(not in the rows above: the other 21 of 25 locks (--top 4 shows the most contended and "
                       "anomalous), with " + std::to_string(other_acquisitions) + " acquisitions (" +
                           std::to_string(other_contended) + " contended), 0 waits given up, 0 renewals, 0 expiries and " +
                           std::to_string(other_refused) + " anomalies)");
  // The live path's table: the same rows and line.
  const summary_table live_top = parse_summary(live);
  CHECK(live_top.rows == top4.rows);
  CHECK(live_top.others == top4.others);

  // More than there are: every lock, ranked, and no line on others.
  REQUIRE(top100.names.size() == built.size());
  CHECK(std::vector<std::string>(top100.names.begin(), top100.names.begin() + 5) ==
        std::vector<std::string>{"jobs:hot2", "jobs:hot", "jobs:refused", "jobs:busy", "jobs:also-busy"});
  CHECK(top100.names[5] == "jobs:quiet-0");
  CHECK(top100.names.back() == "jobs:quiet-19");
  CHECK(top100.others.empty());

  // With --lock: ranked among the selected, the others being the other selected ones.
  CHECK(quiet.names == std::vector<std::string>{"jobs:quiet-0", "jobs:quiet-1"});
  CHECK(quiet.others == "(not in the rows above: the other 18 of 20 locks (--top 2 shows the most contended and "
                        "anomalous), with 18 acquisitions (0 contended), 0 waits given up, 0 renewals, 0 expiries and 0 anomalies)");
}

}  // namespace lockscope::timeline_test
