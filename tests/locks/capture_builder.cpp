#include "capture_builder.hpp"

#include <algorithm>


namespace lockscope::timeline_test {

int capture_builder::connect(std::string_view client_ip, std::uint16_t client_port, std::string_view server_ip,
                             std::uint16_t server_port, std::int64_t at_us) {
  const auto isn = static_cast<std::uint32_t>(1000 + 7919 * conversations_.size());
  conversations_.emplace_back(ingest::make_endpoint(client_ip, client_port),
                              ingest::make_endpoint(server_ip, server_port), isn, isn + 50000);
  auto& c = conversations_.back();
  std::int64_t t = at_us;
  for (const auto& s : c.handshake()) add(t++, s);
  return static_cast<int>(conversations_.size() - 1);
}

void capture_builder::command(int conn, std::int64_t at_us, const std::vector<std::string>& args,
                              std::string_view reply, std::int64_t latency_us) {
  auto& c = conversations_.at(static_cast<std::size_t>(conn));
  add(at_us, c.client_sends(resp_array(args)));
  if (!reply.empty()) add(at_us + latency_us, c.server_sends(reply));
  add(at_us + latency_us + 20, c.client_acks());
}

void capture_builder::server_push(int conn, std::int64_t at_us, std::string_view resp) {
  auto& c = conversations_.at(static_cast<std::size_t>(conn));
  add(at_us, c.server_sends(resp));
  add(at_us + 20, c.client_acks());
}

void capture_builder::close(int conn, std::int64_t at_us) {
  auto& c = conversations_.at(static_cast<std::size_t>(conn));
  add(at_us, c.client_fin());
  add(at_us + 30, c.server_fin());
  add(at_us + 60, c.client_acks());
}

void capture_builder::add(std::int64_t ts, const ingest::tcp_segment_spec& s) {
  frames_.push_back(frame{ts, frames_.size(), ingest::make_frame(ingest::link_type::en10mb, s)});
}

void capture_builder::write(const std::string& path) const {
  std::vector<const frame*> order;
  for (const frame& f : frames_) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const frame* a, const frame* b) { return a->ts_us < b->ts_us; });
  ingest::pcap_file_writer out(path, ingest::link_type::en10mb);
  for (const frame* f : order) out.write(f->ts_us, f->bytes);
  out.close();
}

std::string resp_array(const std::vector<std::string>& items) {
  std::string out = "*" + std::to_string(items.size()) + "\r\n";
  for (const std::string& s : items) {
    out += "$" + std::to_string(s.size()) + "\r\n";
    out += s;
    out += "\r\n";
  }
  return out;
}

std::string resp_int(std::int64_t v) { return ":" + std::to_string(v) + "\r\n"; }

}  // namespace lockscope::timeline_test
