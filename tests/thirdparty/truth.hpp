// The third-party recordings (captures/thirdparty) and their clients' own truth logs,
// and `lockscope analyze --format jsonl` run on them: loading, time alignment and the
// small matching helpers the comparisons share.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json.hpp>

namespace lockscope::thirdparty_test {

namespace json = boost::json;

struct recording {
  std::string name;
  json::object header;                   // the truth's first line: the capture's window, the servers
  std::vector<json::object> truth;       // what the clients logged, by time
  std::vector<json::object> events;      // what `lockscope analyze --format jsonl` printed
  std::int64_t start_us = 0, stop_us = 0;  // the capture certainly ran in between
  std::int64_t offset_us = 0;            // analyzer time - client time, from matched acquisitions

  // Analyzer events named `event` (any when empty), `ts` in client time, in [from, to].
  std::vector<const json::object*> find(std::string_view event, std::int64_t from_us, std::int64_t to_us,
                                        const std::function<bool(const json::object&)>& also = {}) const;
  // Truth lines named `event` with t_us in [from, to].
  std::vector<const json::object*> truth_of(std::string_view event, std::int64_t from_us = INT64_MIN,
                                            std::int64_t to_us = INT64_MAX) const;
  // An analyzer event's time in the clients' clock.
  std::int64_t time_of(const json::object& event) const;
};

// The recording NAME (captures/thirdparty/NAME.pcap + NAME.truth.jsonl) analyzed once per
// process; nullptr (with a Catch2 warning) when the lockscope CLI is not built.
const recording* load(const std::string& name);

// Waits during which the lock sat free: a contended acquisition (truth "acquired" with
// "contended" and "waited_ms") whose lock was released (truth "released", by anyone)
// after the waiter's first failed attempt, at least `min_free_us` before the waiter's
// successful attempt went out. Only waits wholly inside the capture.
struct idle_gap {
  const json::object* acquired = nullptr;
  std::int64_t released_us = 0;
  std::int64_t free_us = 0;
};
std::vector<idle_gap> idle_gaps(const recording& r, std::int64_t min_free_us);

// Checks that each idle gap has an `idle_with_waiters` (or, with `also_timeout`,
// `woken_by_timeout` / `subscription_lost`) anomaly on its lock between the release and
// shortly after the acquisition; the tally of those flagged.
struct tally;
tally idle_gaps_flagged(const recording& r, std::int64_t min_free_us);

// One row of `lockscope analyze --summary` (text): per lock, acquisitions, the share
// contended (%), and the wait p50/max in ms (-1 when "-").
struct summary_row {
  long acquisitions = 0;
  double contended_percent = -1, wait_p50_ms = -1, wait_max_ms = -1;
};
std::map<std::string, summary_row> summary_of(const std::string& name);

// Per lock, whether `lockscope analyze --summary` agrees with the clients: the share of
// acquisitions contended (whose failed attempt the capture holds) within 5 points, the
// wait p50 and max within max(10 ms, 15%).
struct tally;
tally summary_matches(const recording& r);

// The wait each contended acquisition of the truth shows in the capture: from the first
// failed attempt the capture holds (the owner's, on that lock) to the acquisition; -1
// when the capture holds none of its failed attempts.
double visible_wait_ms(const recording& r, const json::object& acquired);

// Field access that tolerates absent or differently typed fields.
std::string text(const json::object& o, std::string_view key);
double number(const json::object& o, std::string_view key, double absent = -1.0);
bool flag(const json::object& o, std::string_view key);
// A count given as a number or as a list of what is counted (e.g. "acquired_on": 2 or
// ["127.0.0.1:6379", ...]); -1 when absent.
double count_of(const json::object& o, std::string_view key);
bool has(const json::object& o, std::string_view key);
std::int64_t t_us(const json::object& truth_line);
std::string brief(const json::object& o);  // one line, for failure messages

// A measured share with the examples that missed, printed when a check fails.
struct tally {
  explicit tally(std::string what_it_counts) : what(std::move(what_it_counts)) {}
  std::string what;
  std::size_t hits = 0, total = 0;
  std::vector<std::string> misses;
  void add(bool hit, const std::string& example);
  double percent() const { return total == 0 ? 100.0 : 100.0 * static_cast<double>(hits) / static_cast<double>(total); }
  std::string report(std::size_t examples = 6) const;
};

inline constexpr std::int64_t ms = 1000;
// How far the wire's time may be from the time a client logged for the same call.
inline constexpr std::int64_t tolerance = 5 * ms;

// When the client sent the call a truth line records: its "sent_us", else its "t_us".
std::int64_t sent_of(const json::object& truth_line);
// The analyzer's first `event` of the truth line's lock and owner, from when the call
// was sent to when it returned (within the tolerance); nullptr when there is none.
const json::object* matching(const recording& r, std::string_view event, const json::object& truth_line);

}  // namespace lockscope::thirdparty_test
