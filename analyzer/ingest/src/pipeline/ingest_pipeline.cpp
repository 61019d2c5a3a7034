#include "lockscope/ingest/ingest_pipeline.hpp"

#include <algorithm>
#include <cstring>

namespace lockscope::ingest {

// One TCP connection: two reassembled directions feeding one RESP session.
struct ingest_pipeline::connection {
  struct side_sink final : stream_sink {
    connection* owner = nullptr;
    int side = 0;
    std::int64_t now_us = 0;
    void on_data(std::string_view bytes, std::uint64_t offset) override {
      owner->session.on_data(side, bytes, offset, now_us);
    }
    void on_gap(std::uint64_t bytes, std::uint64_t offset) override {
      owner->session.on_gap(side, bytes, offset, now_us);
    }
  };

  connection(const ingest_options& options, std::uint64_t id, std::array<endpoint, 2> ends,
             std::optional<int> client_side, side_reason reason, exchange_sink& sink,
             argument_interner& interner)
      : streams{tcp_stream(options.tcp), tcp_stream(options.tcp)},
        session(options.session, id, ends, client_side, sink, reason, &interner) {
    for (int i = 0; i < 2; ++i) {
      sinks[i].owner = this;
      sinks[i].side = i;
    }
  }

  std::array<tcp_stream, 2> streams;
  std::array<side_sink, 2> sinks;
  resp_session session;
  std::int64_t last_seen_us = 0;
  std::uint64_t number = 0;  // the connection id its exchanges carry
  std::size_t held = 0;      // its share of the pipeline's held_bytes_, as last counted
  bool gave_back = false;    // shed at least once for max_buffer_total
  flow_key key{};
  connection* older = nullptr;  // the recency list
  connection* newer = nullptr;
};

namespace {

std::uint64_t address_word(const endpoint& e, std::size_t at) noexcept {
  std::uint64_t w;
  std::memcpy(&w, e.address.data() + at, 8);
  return w;
}

bool same_endpoint(const endpoint& x, const endpoint& y) noexcept {
  return address_word(x, 0) == address_word(y, 0) && address_word(x, 8) == address_word(y, 8) &&
         x.port == y.port && x.family == y.family;
}

// endpoint's operator< (address bytes, then family, then port), without memcmp.
bool endpoint_less(const endpoint& x, const endpoint& y) noexcept {
  for (std::size_t at : {0u, 8u}) {
    const std::uint64_t a = __builtin_bswap64(address_word(x, at));
    const std::uint64_t b = __builtin_bswap64(address_word(y, at));
    if (a != b) return a < b;
  }
  if (x.family != y.family) return x.family < y.family;
  return x.port < y.port;
}

}  // namespace

bool ingest_pipeline::flow_key::operator==(const flow_key& o) const noexcept {
  return same_endpoint(a, o.a) && same_endpoint(b, o.b);
}

std::size_t ingest_pipeline::flow_key_hash::operator()(const flow_key& k) const noexcept {
  // Fold the addresses and ports into 64-bit words and mix them (per packet: keep it cheap).
  auto word = [](const endpoint& e, std::size_t at) {
    std::uint64_t w;
    std::memcpy(&w, e.address.data() + at, 8);
    return w;
  };
  std::uint64_t h = (std::uint64_t{k.a.port} << 16 | k.b.port) * 0x9e3779b97f4a7c15ull;
  h ^= word(k.a, 0) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
  h ^= word(k.b, 0) + 0x85ebca6b27d4eb4full + (h << 6) + (h >> 2);
  if (k.a.family == 6 || k.b.family == 6) {
    h ^= word(k.a, 8) + (h << 6) + (h >> 2);
    h ^= word(k.b, 8) + (h << 6) + (h >> 2);
  }
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

ingest_pipeline::ingest_pipeline(const ingest_options& options, exchange_sink& sink, connection_end_sink* ends)
    : options_(options), ports_(options_.ports), sink_(sink), ends_(ends) {}

ingest_pipeline::~ingest_pipeline() = default;

void ingest_pipeline::on_packet(std::int64_t ts_us, int link_type, std::string_view frame) {
  ++totals_.packets;
  totals_.bytes += frame.size();
  switch (decode_packet(link_type, frame, segment_)) {
    case decode_status::tcp: on_segment(ts_us, segment_); return;
    case decode_status::not_tcp: ++totals_.not_tcp; return;
    case decode_status::fragment: ++totals_.fragments; return;
    case decode_status::unsupported_link: ++totals_.unsupported_link; return;
    case decode_status::malformed: ++totals_.malformed; return;
  }
}

void ingest_pipeline::on_segment(std::int64_t ts_us, const tcp_segment& seg) {
  ++totals_.tcp_segments;
  if (!options_.ports.empty() && !selected_port(seg.source.port) &&
      !selected_port(seg.destination.port)) {
    ++totals_.filtered;
    return;
  }
  if (ts_us - last_sweep_us_ > options_.flow_timeout_us / 8) sweep(ts_us);

  const bool source_is_a = endpoint_less(seg.source, seg.destination);
  const flow_key key{source_is_a ? seg.source : seg.destination,
                     source_is_a ? seg.destination : seg.source};
  const int side = source_is_a ? 0 : 1;
  const bool syn = seg.has(tcp_flags::syn);
  const bool ack = seg.has(tcp_flags::ack);

  connection*& recent = recent_flows_[recent_flow_slot(key)];
  connection* found = recent != nullptr && recent->key == key ? recent : nullptr;
  if (found == nullptr) {
    if (const auto it = flows_.find(key); it != flows_.end()) found = it->second.get();
  }
  if (found != nullptr && syn && !ack) {
    // A new connection on a 4-tuple we still hold (port reuse): end the old one,
    // unless this is a retransmission of the SYN that started it.
    const tcp_stream& s = found->streams[side];
    if (!(s.saw_syn() && s.next_offset() == 0 && !found->streams[1 - side].started())) {
      close(flows_.find(key), ts_us);
      found = nullptr;
    }
  }
  if (found == nullptr) {
    // Nothing to end, or the last ACK of a connection already closed.
    if (seg.has(tcp_flags::rst) || (!syn && seg.payload.empty() && seg.missing == 0)) return;
    // The most certain signal first: the SYN, then --port; else the session reads the content.
    std::optional<int> client_side;
    side_reason reason = side_reason::undecided;
    const std::array<endpoint, 2> ends{key.a, key.b};
    if (syn) {
      client_side = ack ? 1 - side : side;  // SYN comes from the client, SYN-ACK from the server
      reason = side_reason::syn;
    } else if (!options_.ports.empty()) {
      const bool a_server = selected_port(key.a.port);
      const bool b_server = selected_port(key.b.port);
      if (a_server != b_server) {
        client_side = a_server ? 1 : 0;
        reason = side_reason::port;
      }
    }
    if (options_.max_flows > 0 && flows_.size() >= options_.max_flows) end_oldest(ts_us);
    auto conn = std::make_unique<connection>(options_, next_connection_id_, ends, client_side, reason, sink_,
                                             interner_);
    conn->number = next_connection_id_++;
    conn->key = key;
    conn->last_seen_us = ts_us;
    link_newest(*conn);
    found = conn.get();
    flows_.emplace(key, std::move(conn));
    ++totals_.flows;
  }
  recent_flows_[recent_flow_slot(key)] = found;  // (`recent` may have been cleared by a close)
  connection& c = *found;
  c.last_seen_us = ts_us;
  if (newest_ != &c) {
    unlink(c);
    link_newest(c);
  }
  tcp_stream& stream = c.streams[side];
  if (syn && !stream.started()) c.session.set_stream_start_seen(side);
  if (syn) c.session.set_opened(ts_us);
  c.sinks[side].now_us = ts_us;
  c.sinks[1 - side].now_us = ts_us;
  // The ACK first: bytes it gives up waiting for were sent before this segment's data.
  if (ack) c.streams[1 - side].on_peer_ack(seg.ack, c.sinks[1 - side]);
  if (seg.missing != 0) {
    ++totals_.snaplen_cut_segments;
    totals_.snaplen_cut_bytes += seg.missing;
  }
  stream.on_segment(seg.seq, seg.flags, seg.payload, seg.missing, c.sinks[side]);
  account(c);

  if (seg.has(tcp_flags::rst)) {
    close(flows_.find(key), ts_us);
    return;
  }
  if (c.streams[0].finished() && c.streams[1].finished()) close(flows_.find(key), ts_us);
}

void ingest_pipeline::account(connection& c) {
  auto held_by = [](const connection& x) {
    return x.streams[0].held_bytes() + x.streams[1].held_bytes() + x.session.held_bytes();
  };
  std::size_t now = held_by(c);
  held_bytes_ += now - c.held;
  held_bytes_peak_ = std::max(held_bytes_peak_, held_bytes_);  // before it gives back
  if (options_.max_buffer_total > 0 && held_bytes_ > options_.max_buffer_total && now > c.held) {
    // It grew past the budget: it gives back (a connection that only shrank keeps).
    ++buffer_sheds_;
    for (int i = 0; i < 2; ++i) c.streams[i].flush(c.sinks[i]);
    c.session.shed();
    if (!c.gave_back) {  // named in the summary: which connections lost data to the budget
      c.gave_back = true;
      ++shed_flows_;
      if (shed_examples_.size() < ingest_stats::max_shed_examples) {
        const endpoint* e = c.session.ends();
        const int client = c.session.client_side().value_or(0);
        shed_examples_.push_back(e[client].to_string() + " → " + e[1 - client].to_string());
      }
    }
    held_bytes_ -= now;
    now = held_by(c);
    held_bytes_ += now;
  }
  c.held = now;
}

void ingest_pipeline::add_traffic(ingest_stats& to, const connection& c) noexcept {
  const session_stats& s = c.session.stats();
  to.commands += s.commands;
  to.exchanges += s.exchanges;
  to.pushes += s.pushes;
  to.unpaired_replies += s.unpaired_replies;
  to.decode_errors += s.decode_errors;
  to.resyncs += s.resyncs;
  to.skipped_bytes += s.skipped_bytes;
  to.stray_bytes += s.stray_bytes;
  to.pending_overflow += s.pending_overflow;
  to.pending_shed += s.pending_shed;
  to.side_corrections += s.side_corrections;
  for (const tcp_stream& t : c.streams) {
    to.payload_bytes += t.stats().delivered_bytes;
    to.gaps += t.stats().gaps;
    to.gap_bytes += t.stats().gap_bytes;
  }
}

void ingest_pipeline::close(
    std::unordered_map<flow_key, std::unique_ptr<connection>, flow_key_hash>::iterator it,
    std::int64_t now_us) {
  connection& c = *it->second;
  for (int i = 0; i < 2; ++i) {
    c.sinks[i].now_us = now_us;
    c.streams[i].flush(c.sinks[i]);
  }
  c.session.finish(now_us);
  held_bytes_ -= c.held;
  add_traffic(totals_, c);
  if (c.session.ignored() && c.session.carried() != flow_protocol::resp) {
    ++totals_.not_resp_flows;
    other_protocol_flows& o = totals_.other_protocols[static_cast<std::size_t>(c.session.carried()) - 1];
    ++o.flows;
    if (o.examples.size() < other_protocol_flows::max_examples) {
      const endpoint* e = c.session.ends();
      const int client = c.session.client_side().value_or(0);
      o.examples.push_back(e[client].to_string() + " → " + e[1 - client].to_string());
    }
  }
  else if (c.session.client_side()) {
    ++totals_.resp_flows;
    // Counted once per connection, at its end: nothing on the packet path.
    const int client = *c.session.client_side();
    const bool from_client = c.streams[client].stats().delivered_bytes > 0;
    const bool from_server = c.streams[1 - client].stats().delivered_bytes > 0;
    // A subscriber joined mid-run only receives pushes, and a command sent as the
    // capture ends has no reply yet: neither is a capture of one direction.
    const session_stats& ss = c.session.stats();
    if (from_client && from_server) ++totals_.two_way_resp_flows;
    else if (from_client && ss.commands > 0) ++totals_.requests_only_flows;
    else if (from_server && ss.unpaired_replies > 0) ++totals_.replies_only_flows;
  }
  if (connection*& recent = recent_flows_[recent_flow_slot(c.key)]; recent == &c) recent = nullptr;
  const std::uint64_t number = c.number;
  unlink(c);
  flows_.erase(it);
  if (ends_ != nullptr) ends_->on_connection_end(number, now_us);
}

void ingest_pipeline::unlink(connection& c) noexcept {
  (c.older != nullptr ? c.older->newer : oldest_) = c.newer;
  (c.newer != nullptr ? c.newer->older : newest_) = c.older;
  c.older = c.newer = nullptr;
}

void ingest_pipeline::link_newest(connection& c) noexcept {
  c.older = newest_;
  c.newer = nullptr;
  (newest_ != nullptr ? newest_->newer : oldest_) = &c;
  newest_ = &c;
}

void ingest_pipeline::end_oldest(std::int64_t now_us) {
  ++totals_.capped_flows;
  close(flows_.find(oldest_->key), now_us);
}

void ingest_pipeline::sweep(std::int64_t now_us) {
  last_sweep_us_ = now_us;
  for (auto it = flows_.begin(); it != flows_.end();) {
    auto next = std::next(it);
    if (now_us - it->second->last_seen_us > options_.flow_timeout_us) {
      ++totals_.evicted_flows;
      close(it, now_us);
    }
    it = next;
  }
}

void ingest_pipeline::finish() {
  std::int64_t last = last_sweep_us_;
  for (const auto& [key, c] : flows_) last = std::max(last, c->last_seen_us);
  // Close in connection order so that output does not depend on hash order.
  std::vector<flow_key> keys;
  for (auto it = flows_.begin(); it != flows_.end(); ++it) keys.push_back(it->first);
  std::sort(keys.begin(), keys.end(), [this](const flow_key& x, const flow_key& y) {
    return flows_.at(x)->last_seen_us < flows_.at(y)->last_seen_us;
  });
  for (const flow_key& k : keys) close(flows_.find(k), last);
}

ingest_stats ingest_pipeline::stats() const {
  ingest_stats s = totals_;
  for (const auto& [key, c] : flows_) add_traffic(s, *c);
  s.buffer_sheds = buffer_sheds_;
  s.shed_flows = shed_flows_;
  s.shed_examples = shed_examples_;
  s.held_bytes = held_bytes_;
  s.held_bytes_peak = held_bytes_peak_;
  return s;
}

}  // namespace lockscope::ingest

namespace lockscope::ingest {

std::vector<std::string> describe_other_protocols(const ingest_stats& s) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < s.other_protocols.size(); ++i) {
    const other_protocol_flows& o = s.other_protocols[i];
    if (o.flows == 0) continue;
    std::string line(describe(static_cast<flow_protocol>(i + 1)));
    line += " — " + std::to_string(o.flows) + (o.flows == 1 ? " flow: " : " flows: ");
    for (std::size_t k = 0; k < o.examples.size(); ++k) {
      if (k > 0) line += ", ";
      line += o.examples[k];
    }
    if (o.flows > o.examples.size()) line += ", …";
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace lockscope::ingest
