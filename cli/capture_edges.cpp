#include "capture_edges.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/counted.hpp"
#include "lockscope/ingest/resp_servers.hpp"
#include "lockscope/live/diagnostics.hpp"

namespace lockscope::cli {

int report_port_miss(const char* command, const std::vector<std::string>& files, const ingest::ingest_options& options,
                     const ingest::ingest_stats& s) {
  const std::vector<std::uint16_t>& ports = options.ports;
  if (ports.empty() || s.resp_flows > 0) return 0;
  if (std::find(files.begin(), files.end(), "-") != files.end()) {
    live::print_diagnostic("lockscope {}: no Redis traffic on {} {} (standard input cannot be read again to find "
                           "where it is: run without --port to have every TCP flow examined)\n",
                           command, ports.size() == 1 ? "port" : "ports", fmt::join(ports, ", "));
    return 2;
  }
  std::vector<ingest::resp_server> seen;
  try {
    seen = ingest::find_resp_servers(files, options);
  } catch (const ingest::capture_error&) {
    // Read once already: a file that cannot be read again is named by nothing more here.
  }
  live::print_diagnostic("lockscope {}: {}\n", command, ingest::describe_port_miss(ports, seen));
  return 2;
}

bool one_direction_only(const ingest::ingest_stats& s) noexcept {
  return s.requests_only_flows + s.replies_only_flows > 0 && s.two_way_resp_flows == 0;
}

void report_one_direction(const char* command, const ingest::ingest_stats& s) {
  const std::uint64_t requests = s.requests_only_flows, replies = s.replies_only_flows;
  if (requests + replies == 0) return;
  // A few among many (a command sent as the capture ended, a client that went away) are
  // no capture problem: said from two connections and a tenth of them.
  if (!one_direction_only(s) && (requests + replies < 2 || (requests + replies) * 10 < s.resp_flows)) return;
  constexpr const char* advice = "capture both directions (tcpdump 'port 6379', not 'dst port 6379')";
  if (one_direction_only(s) && replies == 0) {
    live::print_diagnostic("lockscope {}: warning: only requests were captured (client → server on {}, none both ways): replies "
                           "are missing, so no acquisition or release can be decided; {}\n",
                           command, ingest::counted(requests, "RESP connection"), advice);
  } else if (one_direction_only(s) && requests == 0) {
    live::print_diagnostic("lockscope {}: warning: only replies were captured (server → client on {}, none both ways): the "
                           "commands are missing, so no lock operation can be read; {}\n",
                           command, ingest::counted(replies, "RESP connection"), advice);
  } else {
    live::print_diagnostic("lockscope {}: warning: {} of {} hold one direction only ({} requests only, {} replies "
                           "only): their lock operations cannot be decided; {}\n",
                           command, requests + replies, ingest::counted(s.resp_flows, "RESP connection"), requests,
                           replies, advice);
  }
}

}  // namespace lockscope::cli
