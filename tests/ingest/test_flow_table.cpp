// The ingest pipeline's flow table under many connections that take turns (a pool, or
// redis-benchmark's clients: each segment's flow differs from the last), more than its
// cache of recent flows has slots, with connections closed by FIN or RST mid-run and
// their 4-tuples reused by new connections: every exchange goes to the connection it was
// sent on (its own id, in order), and none of an ended connection's to its successor.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;

TEST_CASE("flow table: 300 connections taking turns, ended and reused mid-run, keep their own exchanges", "[flows]") {
  constexpr int connections = 300;
  std::vector<tcp_segment_spec> segments;
  std::vector<std::unique_ptr<tcp_conversation>> live(connections);
  std::map<std::uint64_t, std::vector<std::string>> expected;  // by connection id, in creation order
  std::vector<std::uint64_t> id_of(connections);
  std::uint64_t next_id = 1;
  std::uint32_t isn = 1000;
  const auto open = [&](int i) {
    // Ports 40000.. and 10.1.x.y clients: many share a slot of the recent-flow cache.
    live[i] = std::make_unique<tcp_conversation>(ep("10.1.0.1", static_cast<std::uint16_t>(40000 + i)),
                                                  ep("10.0.0.1", 6379), isn, isn + 7);
    isn += 100'000;
    for (auto& s : live[i]->handshake()) segments.push_back(s);
    id_of[i] = next_id++;
  };
  for (int i = 0; i < connections; ++i) open(i);
  for (int round = 0; round < 12; ++round) {
    for (int i = 0; i < connections; ++i) {
      const std::string key = "k" + std::to_string(i) + "_" + std::to_string(round);
      segments.push_back(live[i]->client_sends(cmd({"GET", key})));
      segments.push_back(live[i]->server_sends("$1\r\nv\r\n"));
      expected[id_of[i]].push_back("GET " + key + " => v");
    }
    // Every 7th connection of this round's set ends (FIN both ways, or an RST) and its
    // 4-tuple starts again: a new connection, a new id.
    for (int i = round % 7; i < connections; i += 7) {
      if (round % 2 == 0) {
        segments.push_back(live[i]->client_fin());
        segments.push_back(live[i]->server_fin());
        segments.push_back(live[i]->client_acks());
      } else {
        segments.push_back(live[i]->client_rst());
      }
      open(i);
    }
  }
  recording_sink sink;
  ingest_pipeline a({}, sink);
  std::int64_t now = 1'700'000'000'000'000;
  for (const tcp_segment_spec& s : segments) {
    const std::string f = make_frame(link_type::en10mb, s);
    a.on_packet(now += 10, link_type::en10mb, f);
  }
  a.finish();
  const ingest_stats stats = a.stats();
  CHECK(stats.flows == next_id - 1);
  for (std::uint64_t id = 1; id < next_id; ++id) {
    CAPTURE(id);
    REQUIRE(sink.summaries_of(id) == expected[id]);
  }
  CHECK(sink.items.size() == static_cast<std::size_t>(connections) * 12);
}
