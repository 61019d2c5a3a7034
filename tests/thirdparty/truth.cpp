#include "truth.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <map>
#include <sstream>

#include <catch2/catch.hpp>

namespace lockscope::thirdparty_test {

namespace {

std::vector<json::object> parse_lines(const std::string& text, const std::string& origin) {
  std::vector<json::object> out;
  std::istringstream in(text);
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    INFO(origin << " line " << number << ": " << line.substr(0, 200));
    REQUIRE(!ec);
    REQUIRE(v.is_object());
    out.push_back(std::move(v.as_object()));
  }
  return out;
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::int64_t analyzer_ts(const json::object& e) {
  const auto* ts = e.if_contains("ts");
  return ts != nullptr && ts->is_number() ? std::llround(ts->to_number<double>() * 1e6) : 0;
}

// Clock offset: the median, over the first truth acquisitions the analyzer also
// reports (same lock and owner, within 100 ms), of the analyzer's time minus the middle
// of the client's request round trip. The clients and tcpdump share the host's clock,
// so this is expected to be well under a millisecond; one odd match cannot skew it.
std::int64_t median_match_offset(const recording& r) {
  std::vector<std::int64_t> offsets;
  for (const auto& t : r.truth) {
    if (offsets.size() >= 25) break;
    if (text(t, "event") != "acquired" || t_us(t) < r.start_us || t_us(t) > r.stop_us) continue;
    const std::int64_t sent = has(t, "sent_us") ? static_cast<std::int64_t>(number(t, "sent_us")) : t_us(t);
    const std::int64_t middle = (sent + t_us(t)) / 2;
    std::int64_t best = INT64_MAX;
    for (const auto& e : r.events) {
      if (text(e, "event") != "acquired" || text(e, "lock") != text(t, "lock") || text(e, "owner") != text(t, "owner")) continue;
      const std::int64_t d = analyzer_ts(e) - middle;
      if (std::llabs(d) < std::llabs(best)) best = d;
    }
    if (std::llabs(best) <= 100'000) offsets.push_back(best);
  }
  if (offsets.empty()) return 0;
  std::nth_element(offsets.begin(), offsets.begin() + static_cast<std::ptrdiff_t>(offsets.size() / 2), offsets.end());
  return offsets[offsets.size() / 2];
}

}  // namespace

std::string text(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) return {};
  if (v->is_string()) return std::string(v->as_string());
  return json::serialize(*v);
}

double number(const json::object& o, std::string_view key, double absent) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_number() ? v->to_number<double>() : absent;
}

double count_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) return -1;
  if (v->is_array()) return static_cast<double>(v->as_array().size());
  return v->is_number() ? v->to_number<double>() : -1;
}

bool flag(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->as_bool();
}

bool has(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && !v->is_null();
}

std::int64_t t_us(const json::object& truth_line) { return static_cast<std::int64_t>(number(truth_line, "t_us", 0)); }

std::int64_t sent_of(const json::object& truth_line) {
  return static_cast<std::int64_t>(number(truth_line, "sent_us", static_cast<double>(t_us(truth_line))));
}

const json::object* matching(const recording& r, std::string_view event, const json::object& truth_line) {
  const auto found = r.find(event, sent_of(truth_line) - tolerance, t_us(truth_line) + tolerance,
                            [&](const json::object& e) {
                              return text(e, "lock") == text(truth_line, "lock") &&
                                     text(e, "owner") == text(truth_line, "owner");
                            });
  return found.empty() ? nullptr : found.front();
}

std::string brief(const json::object& o) {
  std::string s = json::serialize(o);
  return s.size() > 320 ? s.substr(0, 317) + "..." : s;
}

void tally::add(bool hit, const std::string& example) {
  ++total;
  if (hit) {
    ++hits;
  } else {
    misses.push_back(example);
  }
}

std::string tally::report(std::size_t examples) const {
  char head[256];
  std::snprintf(head, sizeof head, "%s: %zu of %zu (%.1f%%)", what.c_str(), hits, total, percent());
  std::string s = head;
  if (!misses.empty()) s += "; misses (" + std::to_string(misses.size()) + "), for example:";
  for (std::size_t i = 0; i < misses.size() && i < examples; ++i) s += "\n  - " + misses[i];
  return s;
}

std::int64_t recording::time_of(const json::object& event) const { return analyzer_ts(event) - offset_us; }

std::vector<const json::object*> recording::find(std::string_view event, std::int64_t from_us, std::int64_t to_us,
                                                 const std::function<bool(const json::object&)>& also) const {
  std::vector<const json::object*> out;
  for (const auto& e : events) {
    if (!event.empty() && text(e, "event") != event) continue;
    const std::int64_t at = time_of(e);
    if (at < from_us || at > to_us) continue;
    if (also && !also(e)) continue;
    out.push_back(&e);
  }
  return out;
}

std::vector<const json::object*> recording::truth_of(std::string_view event, std::int64_t from_us, std::int64_t to_us) const {
  std::vector<const json::object*> out;
  for (const auto& t : truth) {
    if (text(t, "event") == event && t_us(t) >= from_us && t_us(t) <= to_us) out.push_back(&t);
  }
  return out;
}

std::vector<idle_gap> idle_gaps(const recording& r, std::int64_t min_free_us) {
  std::vector<idle_gap> out;
  for (const auto* a : r.truth_of("acquired", r.start_us, r.stop_us)) {
    if (!flag(*a, "contended")) continue;
    const std::int64_t first_failed = t_us(*a) - static_cast<std::int64_t>(number(*a, "waited_ms") * 1000);
    const std::int64_t attempt = has(*a, "sent_us") ? static_cast<std::int64_t>(number(*a, "sent_us")) : t_us(*a);
    if (first_failed < r.start_us) continue;
    std::int64_t last_release = -1;
    for (const auto* rel : r.truth_of("released", first_failed, attempt)) {
      if (text(*rel, "lock") == text(*a, "lock")) last_release = t_us(*rel);
    }
    if (last_release >= 0 && attempt - last_release >= min_free_us) out.push_back({a, last_release, attempt - last_release});
  }
  return out;
}

tally idle_gaps_flagged(const recording& r, std::int64_t min_free_us) {
  tally flagged("waits during which the lock sat free >= " + std::to_string(min_free_us / 1000) +
                " ms (released, the waiter asleep), flagged idle_with_waiters");
  for (const idle_gap& gap : idle_gaps(r, min_free_us)) {
    const auto found = r.find("anomaly", gap.released_us - 20 * ms, t_us(*gap.acquired) + 500 * ms, [&](const json::object& e) {
      return text(e, "lock") == text(*gap.acquired, "lock") && text(e, "kind") == "idle_with_waiters";
    });
    flagged.add(!found.empty(), "free " + std::to_string(gap.free_us / 1000) + " ms before: " + brief(*gap.acquired));
  }
  return flagged;
}

namespace {

// "183.8ms", "1.548s", "850µs" -> ms; "-" -> -1. A lower bound ("≥1.6s": a wait begun
// before the capture) reads as its bound.
double duration_ms(std::string text) {
  if (text.rfind("≥", 0) == 0) text.erase(0, std::string_view("≥").size());
  if (text == "-" || text.empty()) return -1;
  const double value = std::strtod(text.c_str(), nullptr);
  if (text.size() > 2 && text.compare(text.size() - 2, 2, "ms") == 0) return value;
  if (text.find("µs") != std::string::npos) return value / 1000;
  return value * 1000;  // "s"
}

}  // namespace

std::map<std::string, summary_row> summary_of(const std::string& name) {
  std::map<std::string, summary_row> rows;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  const auto pcap = std::filesystem::path(LOCKSCOPE_SOURCE_DIR) / "captures" / "thirdparty" / (name + ".pcap");
  const std::string command = cli + " analyze --summary " + pcap.string() + " 2>/dev/null";
  std::FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buffer[65536];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, p)) > 0;) out.append(buffer, n);
  INFO(command << "\n" << out);
  REQUIRE(::pclose(p) == 0);
  std::istringstream lines(out);
  std::string line;
  REQUIRE(std::getline(lines, line));  // the header
  REQUIRE(line.find("contended") != std::string::npos);
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string lock, acquisitions, contended, hold, wait;
    if (!(fields >> lock >> acquisitions >> contended >> hold >> wait)) continue;
    summary_row row;
    row.acquisitions = std::strtol(acquisitions.c_str(), nullptr, 10);
    row.contended_percent = std::strtod(contended.c_str(), nullptr);
    const auto first = wait.find('/'), last = wait.rfind('/');
    if (first != std::string::npos) {
      row.wait_p50_ms = duration_ms(wait.substr(0, first));
      row.wait_max_ms = duration_ms(wait.substr(last + 1));
    }
    rows[lock] = row;
  }
  return rows;
}

double visible_wait_ms(const recording& r, const json::object& acquired) {
  const std::int64_t first_failed = t_us(acquired) - static_cast<std::int64_t>(number(acquired, "waited_ms") * 1000);
  for (const auto* f : r.truth_of("attempt_failed", std::max(r.start_us, first_failed - 1000), t_us(acquired))) {
    if (text(*f, "lock") == text(acquired, "lock") && text(*f, "owner") == text(acquired, "owner"))
      return static_cast<double>(t_us(acquired) - t_us(*f)) / 1000;
  }
  return -1;
}

tally summary_matches(const recording& r) {
  const auto rows = summary_of(r.name);
  std::map<std::string, std::vector<double>> waits;
  std::map<std::string, int> acquisitions;
  for (const auto* a : r.truth_of("acquired", r.start_us, r.stop_us)) {
    ++acquisitions[text(*a, "lock")];
    if (!flag(*a, "contended")) continue;
    const double wait = visible_wait_ms(r, *a);
    if (wait >= 0) waits[text(*a, "lock")].push_back(wait);
  }
  tally matches("locks whose summary row agrees with the clients (contended share, wait p50 and max)");
  auto near = [](double measured, double truth) { return std::abs(measured - truth) <= std::max(10.0, 0.15 * truth); };
  for (const auto& [lock, count] : acquisitions) {
    auto& w = waits[lock];
    std::sort(w.begin(), w.end());
    const double percent = 100.0 * static_cast<double>(w.size()) / count;
    const double p50 = w.empty() ? -1 : w[(w.size() - 1) / 2], max = w.empty() ? -1 : w.back();
    const auto it = rows.find(lock);
    const summary_row row = it == rows.end() ? summary_row{} : it->second;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s: the clients %d acquisitions, %.1f%% contended, wait p50 %.1f ms max %.1f ms; the summary %ld, %.1f%%, "
                  "p50 %.1f ms max %.1f ms",
                  lock.c_str(), count, percent, p50, max, row.acquisitions, row.contended_percent, row.wait_p50_ms, row.wait_max_ms);
    matches.add(it != rows.end() && std::abs(row.contended_percent - percent) <= 5.0 && near(row.wait_p50_ms, p50) &&
                    near(row.wait_max_ms, max),
                line);
  }
  return matches;
}

const recording* load(const std::string& name) {
  static std::map<std::string, recording> cache;
  if (auto it = cache.find(name); it != cache.end()) return &it->second;
  const std::string cli = LOCKSCOPE_CLI_PATH;
  if (cli.empty() || !std::filesystem::exists(cli)) {
    WARN("the lockscope CLI is not built: skipping");
    return nullptr;
  }
  const std::filesystem::path dir = std::filesystem::path(LOCKSCOPE_SOURCE_DIR) / "captures" / "thirdparty";
  const std::filesystem::path pcap = dir / (name + ".pcap");
  const std::filesystem::path truth = dir / (name + ".truth.jsonl");
  REQUIRE(std::filesystem::exists(pcap));
  REQUIRE(std::filesystem::exists(truth));

  recording r;
  r.name = name;
  auto lines = parse_lines(read_all(truth), truth.string());
  REQUIRE(!lines.empty());
  REQUIRE(text(lines.front(), "event") == "recording");
  r.header = std::move(lines.front());
  r.truth.assign(std::make_move_iterator(lines.begin() + 1), std::make_move_iterator(lines.end()));
  r.start_us = static_cast<std::int64_t>(number(r.header, "capture_start_us"));
  r.stop_us = static_cast<std::int64_t>(number(r.header, "capture_stop_us"));
  REQUIRE(r.start_us > 0);
  REQUIRE(r.stop_us > r.start_us);

  const std::string command = cli + " analyze --format jsonl " + pcap.string() + " 2>/dev/null";
  std::FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buffer[65536];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, p)) > 0;) out.append(buffer, n);
  const int status = ::pclose(p);
  INFO(command);
  REQUIRE(status == 0);
  r.events = parse_lines(out, command);
  REQUIRE(!r.events.empty());
  r.offset_us = median_match_offset(r);
  return &cache.emplace(name, std::move(r)).first->second;
}

}  // namespace lockscope::thirdparty_test
