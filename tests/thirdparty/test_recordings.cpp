// The recordings themselves: each holds what captures/thirdparty/README.md says it
// holds (wire protocol, link type, servers, the lost wake-ups and split quorums the
// Done-when checks measure), and each truth log is consistent with itself. These guard
// a re-recording (record.sh) against a run that happened not to produce the scenario.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "truth.hpp"

namespace lockscope::thirdparty_test {
namespace {

struct pcap_facts {
  std::uint32_t link_type = 0;
  std::int64_t first_us = 0, last_us = 0;
  std::size_t packets = 0, bytes = 0;
  std::string payload;  // every packet's bytes, for looking for commands
};

std::uint32_t le32(const unsigned char* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<std::uint32_t>(p[3]) << 24); }

// A classic little-endian pcap as tcpdump writes it (µs or ns timestamps).
pcap_facts read_pcap(const std::string& name) {
  const auto path = std::filesystem::path(LOCKSCOPE_SOURCE_DIR) / "captures" / "thirdparty" / (name + ".pcap");
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(data.size() >= 24);
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const std::uint32_t magic = le32(bytes);
  REQUIRE((magic == 0xa1b2c3d4u || magic == 0xa1b23c4du));
  const std::int64_t fraction_per_us = magic == 0xa1b23c4du ? 1000 : 1;
  pcap_facts f;
  f.bytes = data.size();
  f.link_type = le32(bytes + 20);
  for (std::size_t at = 24; at + 16 <= data.size();) {
    const std::int64_t ts = static_cast<std::int64_t>(le32(bytes + at)) * 1'000'000 + le32(bytes + at + 4) / fraction_per_us;
    const std::uint32_t captured = le32(bytes + at + 8);
    REQUIRE(at + 16 + captured <= data.size());
    if (f.packets == 0) f.first_us = ts;
    f.last_us = ts;
    ++f.packets;
    f.payload.append(data, at + 16, captured);
    at += 16 + captured;
  }
  return f;
}

bool contains_nocase(const std::string& haystack, std::string needle) {
  std::string h = haystack;
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::transform(needle.begin(), needle.end(), needle.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return h.find(needle) != std::string::npos;
}

// Per lock, the client-logged holds never overlap, except after a holder whose lease
// ran out (it later failed to extend or release: another client may then acquire). A
// hold certainly began by its acquisition's log time and certainly lasted until its
// release was sent, so those are the times compared (a process may log late).
std::string overlapping_holds(const recording& r) {
  std::set<std::string> lapsed;
  std::vector<std::pair<std::int64_t, const json::object*>> edges;
  for (const auto& t : r.truth) {
    const std::string event = text(t, "event");
    if (event == "release_failed" || event == "extend_failed") lapsed.insert(text(t, "owner"));
    if (event == "acquired") edges.emplace_back(t_us(t), &t);
    if (event == "released") edges.emplace_back(static_cast<std::int64_t>(number(t, "sent_us", static_cast<double>(t_us(t)))), &t);
  }
  std::stable_sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<std::string, std::string> holder;  // lock -> owner holding it
  for (const auto& [at, t] : edges) {
    const std::string lock = text(*t, "lock");
    if (text(*t, "event") == "acquired") {
      if (!holder[lock].empty() && lapsed.count(holder[lock]) == 0) return "acquired while " + holder[lock] + " held it: " + brief(*t);
      holder[lock] = text(*t, "owner");
    } else if (holder[lock] == text(*t, "owner")) {
      holder[lock].clear();
    }
  }
  return "";
}

constexpr std::uint32_t linktype_ethernet = 1, linktype_linux_sll2 = 276;

}  // namespace

TEST_CASE("thirdparty recordings: redisson is RESP3, joined mid-run (EVALSHA only), with lost wake-ups",
          "[thirdparty][recordings]") {
  const recording* r = load("redisson");
  if (r == nullptr) return;
  const pcap_facts f = read_pcap("redisson");
  CHECK(f.bytes <= 300 * 1024);
  CHECK(f.link_type == linktype_ethernet);
  CHECK(f.first_us <= r->start_us);
  CHECK(f.last_us >= r->stop_us - 1'000'000);
  CHECK(contains_nocase(f.payload, "\r\nevalsha\r\n"));
  CHECK_FALSE(contains_nocase(f.payload, "\r\neval\r\n"));
  CHECK_FALSE(contains_nocase(f.payload, "\r\nhello\r\n"));            // negotiated before the capture
  CHECK(f.payload.find(">3\r\n$7\r\nmessage\r\n") != std::string::npos);  // RESP3 pushes
  CHECK(r->truth_of("connections").size() == 3);
  std::size_t contended = 0, lost = 0;
  for (const auto* a : r->truth_of("acquired", r->start_us, r->stop_us)) contended += flag(*a, "contended") ? 1 : 0;
  for (const auto* w : r->truth_of("woken", r->start_us, r->stop_us)) {
    const std::int64_t from = t_us(*w) - static_cast<std::int64_t>(number(*w, "slept_ms") * 1000);
    if (text(*w, "by") != "timer" || from < r->start_us) continue;
    for (const auto* rel : r->truth_of("released", from, t_us(*w))) {
      if (text(*rel, "lock") == text(*w, "lock")) {
        ++lost;
        break;
      }
    }
  }
  INFO("contended acquisitions " << contended << ", lost wake-ups " << lost);
  CHECK(contended >= 30);
  CHECK(lost >= 3);
  CHECK(overlapping_holds(*r) == "");
}

TEST_CASE("thirdparty recordings: redlock spans three servers, EVALSHA only, with split votes and stalled holders",
          "[thirdparty][recordings]") {
  const recording* r = load("redlock");
  if (r == nullptr) return;
  const pcap_facts f = read_pcap("redlock");
  CHECK(f.bytes <= 300 * 1024);
  CHECK(f.first_us <= r->start_us);
  CHECK(contains_nocase(f.payload, "\r\nevalsha\r\n"));
  CHECK_FALSE(contains_nocase(f.payload, "\r\neval\r\n"));
  const auto* servers = r->header.if_contains("servers");
  REQUIRE(servers != nullptr);
  CHECK(servers->as_array().size() == 3);
  std::size_t split = 0, stalled = 0;
  for (const char* kind : {"acquired", "gave_up"}) {
    for (const auto* t : r->truth_of(kind, r->start_us, r->stop_us)) {
      for (const auto& round : t->at("rounds").as_array()) {
        const std::size_t votes = round.as_object().at("for").as_array().size();
        split += votes == 1 || votes == 2 ? 1 : 0;
      }
    }
  }
  for (const auto* t : r->truth_of("extend_failed", r->start_us, r->stop_us)) stalled += flag(*t, "stalled") ? 1 : 0;
  INFO("split attempts " << split << ", stalled holders " << stalled);
  CHECK(split >= 1);
  CHECK(stalled >= 1);
  // Per server, a release answered 1 comes from the value that server last granted.
  std::map<std::string, std::string> holder;  // server + lock -> value
  for (const auto* t : r->truth_of("server_reply")) {
    const std::string key = text(*t, "server") + " " + text(*t, "lock");
    if (text(*t, "script") == "acquire" && number(*t, "reply", -1) == 1) holder[key] = text(*t, "owner");
    if (text(*t, "script") == "release" && number(*t, "reply", -1) == 1 && holder.count(key) > 0) {
      INFO(brief(*t));
      CHECK(holder[key] == text(*t, "owner"));
    }
  }
}

TEST_CASE("thirdparty recordings: del_other deletes another owner's lock once: pylock is IPv6 over LINUX_SLL2",
          "[thirdparty][recordings]") {
  const recording* d = load("del_other");
  if (d == nullptr) return;
  std::size_t other = 0;
  for (const auto* t : d->truth_of("released")) other += flag(*t, "released_other_owner") ? 1 : 0;
  CHECK(other == 1);
  CHECK(idle_gaps(*d, 80 * ms).size() == 2);

  const recording* p = load("pylock");
  REQUIRE(p != nullptr);
  const pcap_facts f = read_pcap("pylock");
  CHECK(f.link_type == linktype_linux_sll2);
  CHECK(text(p->header, "servers").find("[::1]:") != std::string::npos);
  CHECK(idle_gaps(*p, 80 * ms).size() >= 1);
  CHECK(p->truth_of("release_failed").size() >= 1);
  CHECK(overlapping_holds(*p) == "");
}

}  // namespace lockscope::thirdparty_test
