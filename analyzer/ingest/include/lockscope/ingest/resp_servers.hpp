// Where a capture's Redis traffic is: the servers whose connections carried RESP, with
// their exchanges. A second look at capture files, made only when `--port` selected
// nothing (so a wrong port is answered with the right one), never on the normal path.
//
//   for (const resp_server& s : find_resp_servers({"x.pcap"}, options)) ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/ingest/packet.hpp"

namespace lockscope::ingest {

struct resp_server {
  endpoint server;
  std::uint64_t exchanges = 0;  // commands with their replies, and pushes
  std::uint64_t connections = 0;
};

// Reads `files` again with every TCP flow examined (options.ports is ignored) and returns
// the servers seen carrying RESP, most exchanges first. Throws capture_error as
// offline_capture does; damage in a file ends its reading quietly (it was reported on
// the first pass).
std::vector<resp_server> find_resp_servers(const std::vector<std::string>& files, ingest_options options);

// "no Redis traffic on port 6380; RESP seen on 127.0.0.1:6379 (1,204 exchanges): try
// --port 6379" (at most `max_named` servers named, the busiest first); without any
// server: "no Redis traffic on port 6380, nor on any other port".
std::string describe_port_miss(const std::vector<std::uint16_t>& ports, const std::vector<resp_server>& seen,
                               std::size_t max_named = 3);

}  // namespace lockscope::ingest
