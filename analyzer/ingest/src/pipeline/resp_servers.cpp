#include "lockscope/ingest/resp_servers.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/exchange.hpp"

namespace lockscope::ingest {

namespace {

class server_counter final : public exchange_sink {
 public:
  void on_exchange(const exchange& e) override {
    if (e.server == nullptr) return;
    resp_server& s = servers_[*e.server];
    s.server = *e.server;
    ++s.exchanges;
    if (connections_.insert(e.connection).second) ++s.connections;
  }
  std::vector<resp_server> take() {
    std::vector<resp_server> out;
    out.reserve(servers_.size());
    for (auto& [key, s] : servers_) out.push_back(s);
    std::stable_sort(out.begin(), out.end(),
                     [](const resp_server& a, const resp_server& b) { return a.exchanges > b.exchanges; });
    return out;
  }

 private:
  std::map<endpoint, resp_server> servers_;
  std::set<std::uint64_t> connections_;
};

// 1204 -> "1,204".
std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::vector<resp_server> find_resp_servers(const std::vector<std::string>& files, ingest_options options) {
  options.ports.clear();
  options.session.observer = nullptr;
  server_counter counter;
  offline_capture capture(files, {}, {});
  ingest_pipeline pipeline(options, counter);
  captured_packet p;
  while (capture.next(p)) pipeline.on_packet(p.ts_us, p.link_type, p.data);
  pipeline.finish();
  return counter.take();
}

std::string describe_port_miss(const std::vector<std::uint16_t>& ports, const std::vector<resp_server>& seen,
                               std::size_t max_named) {
  std::string text = fmt::format("no Redis traffic on {} {}", ports.size() == 1 ? "port" : "ports",
                                 fmt::join(ports, ", "));
  if (seen.empty()) return text + ", nor on any other port";
  text += "; RESP seen on ";
  std::vector<std::uint16_t> try_ports;
  for (std::size_t i = 0; i < seen.size() && i < max_named; ++i) {
    if (i > 0) text += ", ";
    text += fmt::format("{} ({} {}, {} {})", seen[i].server.to_string(), grouped(seen[i].exchanges),
                        seen[i].exchanges == 1 ? "exchange" : "exchanges", grouped(seen[i].connections),
                        seen[i].connections == 1 ? "connection" : "connections");
    if (std::find(try_ports.begin(), try_ports.end(), seen[i].server.port) == try_ports.end()) {
      try_ports.push_back(seen[i].server.port);
    }
  }
  if (seen.size() > max_named) text += fmt::format(" and {} more", seen.size() - max_named);
  return text + fmt::format(": try --port {}", fmt::join(try_ports, ","));
}

}  // namespace lockscope::ingest
