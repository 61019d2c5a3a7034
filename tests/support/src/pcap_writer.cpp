#include "lockscope/test/pcap_writer.hpp"

#include <cerrno>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace lockscope::ingest {

namespace {

// 128-bit products for time units (GCC and clang; __extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

void put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}
void put32(std::string& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v >> 16));
  put16(out, static_cast<std::uint16_t>(v & 0xffff));
}
template <class T>
void put_host(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

// The Internet checksum over `data`, continuing from `sum`.
std::uint32_t checksum_add(std::uint32_t sum, std::string_view data) {
  for (std::size_t i = 0; i + 1 < data.size(); i += 2) {
    sum += (static_cast<std::uint32_t>(static_cast<unsigned char>(data[i])) << 8) |
           static_cast<unsigned char>(data[i + 1]);
  }
  if (data.size() % 2 != 0) sum += static_cast<std::uint32_t>(static_cast<unsigned char>(data.back())) << 8;
  return sum;
}
std::uint16_t checksum_finish(std::uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum & 0xffff);
}

std::string address_bytes(const endpoint& e) {
  return std::string(reinterpret_cast<const char*>(e.address.data()), e.family == 6 ? 16 : 4);
}

std::string ip_packet(const tcp_segment_spec& s) {
  if (s.source.family != s.destination.family) throw std::invalid_argument("mixed address families");
  std::string tcp;
  put16(tcp, s.source.port);
  put16(tcp, s.destination.port);
  put32(tcp, s.seq);
  put32(tcp, s.ack);
  tcp.push_back(static_cast<char>(5 << 4));
  tcp.push_back(static_cast<char>(s.flags));
  put16(tcp, s.window);
  put16(tcp, 0);  // checksum, below
  put16(tcp, 0);
  tcp += s.payload;

  std::string pseudo = address_bytes(s.source) + address_bytes(s.destination);
  if (s.source.family == 6) {
    put32(pseudo, static_cast<std::uint32_t>(tcp.size()));
    put32(pseudo, 6);
  } else {
    pseudo.push_back(0);
    pseudo.push_back(6);
    put16(pseudo, static_cast<std::uint16_t>(tcp.size()));
  }
  const std::uint16_t tcp_sum = checksum_finish(checksum_add(checksum_add(0, pseudo), tcp));
  tcp[16] = static_cast<char>(tcp_sum >> 8);
  tcp[17] = static_cast<char>(tcp_sum & 0xff);

  std::string ip;
  if (s.source.family == 6) {
    put32(ip, 0x60000000u);
    put16(ip, static_cast<std::uint16_t>(tcp.size()));
    ip.push_back(6);   // next header: TCP
    ip.push_back(64);  // hop limit
    ip += address_bytes(s.source) + address_bytes(s.destination);
  } else {
    ip.push_back(0x45);
    ip.push_back(0);
    put16(ip, static_cast<std::uint16_t>(20 + tcp.size()));
    put16(ip, 0);
    put16(ip, 0x4000);  // don't fragment
    ip.push_back(64);
    ip.push_back(6);
    put16(ip, 0);
    ip += address_bytes(s.source) + address_bytes(s.destination);
    const std::uint16_t sum = checksum_finish(checksum_add(0, ip));
    ip[10] = static_cast<char>(sum >> 8);
    ip[11] = static_cast<char>(sum & 0xff);
  }
  return ip + tcp;
}

}  // namespace

endpoint make_endpoint(std::string_view ip, std::uint16_t port) {
  endpoint e;
  if (!endpoint::parse(ip, port, e)) throw std::invalid_argument("not an IP address: " + std::string(ip));
  return e;
}

std::string make_frame(int link_type, const tcp_segment_spec& s, const frame_options& options) {
  const std::string ip = ip_packet(s);
  const bool v6 = s.source.family == 6;
  const std::uint16_t ethertype = v6 ? 0x86dd : 0x0800;
  std::string out;
  switch (link_type) {
    case link_type::en10mb: {
      out.append("\x02\x00\x00\x00\x00\x02", 6);  // destination MAC
      out.append("\x02\x00\x00\x00\x00\x01", 6);  // source MAC
      for (std::size_t i = 0; i < options.vlan_ids.size(); ++i) {
        const bool inner = i + 1 == options.vlan_ids.size();
        put16(out, inner ? 0x8100 : 0x88a8);
        put16(out, static_cast<std::uint16_t>(options.vlan_ids[i] & 0x0fff));
      }
      put16(out, ethertype);
      break;
    }
    case link_type::linux_sll:
      put16(out, 0);    // packet type: to us
      put16(out, 772);  // ARPHRD_LOOPBACK
      put16(out, 6);
      out.append(8, '\0');
      put16(out, ethertype);
      break;
    case link_type::linux_sll2:
      put16(out, ethertype);
      put16(out, 0);
      put32(out, 1);    // interface index
      put16(out, 772);
      out.push_back(0);  // packet type
      out.push_back(6);  // address length
      out.append(8, '\0');
      break;
    case link_type::null:
      put_host<std::uint32_t>(out, v6 ? 30u : 2u);
      break;
    case link_type::loop:
      put32(out, v6 ? 24u : 2u);
      break;
    case link_type::raw:
    case link_type::raw_bsd:
    case link_type::raw_linktype:
      break;
    case link_type::ipv4:
      if (v6) throw std::invalid_argument("an IPv6 segment on LINKTYPE_IPV4");
      break;
    case link_type::ipv6:
      if (!v6) throw std::invalid_argument("an IPv4 segment on LINKTYPE_IPV6");
      break;
    default:
      throw std::invalid_argument("make_frame: unsupported link type " + std::to_string(link_type));
  }
  return out + ip;
}

// Classic pcap.

pcap_file_writer::pcap_file_writer(const std::string& path, int link_type, std::uint32_t snaplen)
    : snaplen_(snaplen) {
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) throw pcap_write_error(path + ": " + std::strerror(errno));
  std::string header;
  put_host<std::uint32_t>(header, 0xa1b2c3d4u);
  put_host<std::uint16_t>(header, 2);
  put_host<std::uint16_t>(header, 4);
  put_host<std::int32_t>(header, 0);
  put_host<std::uint32_t>(header, 0);
  put_host<std::uint32_t>(header, snaplen);
  // Files carry LINKTYPE_RAW (101) where pcap_datalink() reports DLT_RAW.
  const int file_link_type = (link_type == link_type::raw || link_type == link_type::raw_bsd) ? link_type::raw_linktype : link_type;
  put_host<std::uint32_t>(header, static_cast<std::uint32_t>(file_link_type));
  std::fwrite(header.data(), 1, header.size(), file_);
}

pcap_file_writer::~pcap_file_writer() { close(); }

void pcap_file_writer::write(std::int64_t ts_us, std::string_view frame) {
  if (file_ == nullptr) throw pcap_write_error("write after close");
  const std::uint32_t caplen = frame.size() > snaplen_ ? snaplen_ : static_cast<std::uint32_t>(frame.size());
  std::string record;
  put_host<std::uint32_t>(record, static_cast<std::uint32_t>(ts_us / 1'000'000));
  put_host<std::uint32_t>(record, static_cast<std::uint32_t>(ts_us % 1'000'000));
  put_host<std::uint32_t>(record, caplen);
  put_host<std::uint32_t>(record, static_cast<std::uint32_t>(frame.size()));
  record.append(frame.substr(0, caplen));
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    throw pcap_write_error(std::string("write failed: ") + std::strerror(errno));
  }
}

void pcap_file_writer::close() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
}

// pcapng.

pcapng_file_writer::pcapng_file_writer(const std::string& path, bool big_endian)
    : swap_(big_endian == (std::endian::native == std::endian::little)) {
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) throw pcap_write_error(path + ": " + std::strerror(errno));
  new_section();
}

pcapng_file_writer::~pcapng_file_writer() { close(); }

void pcapng_file_writer::put16(std::string& out, std::uint16_t v) const {
  put_host<std::uint16_t>(out, swap_ ? __builtin_bswap16(v) : v);
}
void pcapng_file_writer::put32(std::string& out, std::uint32_t v) const {
  put_host<std::uint32_t>(out, swap_ ? __builtin_bswap32(v) : v);
}
void pcapng_file_writer::put64(std::string& out, std::uint64_t v) const {
  put_host<std::uint64_t>(out, swap_ ? __builtin_bswap64(v) : v);
}

void pcapng_file_writer::new_section() {
  std::string body;
  put32(body, 0x1a2b3c4du);
  put16(body, 1);
  put16(body, 0);
  put64(body, ~std::uint64_t{0});  // section length unknown (-1)
  block(0x0a0d0d0au, body);
  interfaces_.clear();
}

void pcapng_file_writer::block(std::uint32_t type, std::string_view body) {
  if (file_ == nullptr) throw pcap_write_error("write after close");
  std::string b;
  const std::size_t padded = (body.size() + 3) & ~std::size_t{3};
  const auto total = static_cast<std::uint32_t>(12 + padded);
  put32(b, type);
  put32(b, total);
  b.append(body);
  b.append(padded - body.size(), '\0');
  put32(b, total);
  if (std::fwrite(b.data(), 1, b.size(), file_) != b.size()) {
    throw pcap_write_error(std::string("write failed: ") + std::strerror(errno));
  }
}

void pcapng_file_writer::write_block(std::uint32_t type, std::string_view body) { block(type, body); }

void pcapng_file_writer::write_statistics(std::uint32_t interface_id, std::uint64_t ifdrop,
                                          std::optional<std::uint64_t> osdrop) {
  std::string body;
  put32(body, interface_id);
  put32(body, 0);  // time: not read
  put32(body, 0);
  put16(body, 5);  // isb_ifdrop
  put16(body, 8);
  put64(body, ifdrop);
  if (osdrop) {
    put16(body, 7);  // isb_osdrop
    put16(body, 8);
    put64(body, *osdrop);
  }
  put16(body, 0);
  put16(body, 0);
  block(5, body);
}

std::uint32_t pcapng_file_writer::add_interface(int link_type, std::uint32_t snaplen) {
  return add_interface(link_type, interface_options{.snaplen = snaplen});
}

std::uint32_t pcapng_file_writer::add_interface(int link_type, const interface_options& options) {
  std::string body;
  const int file_link_type = (link_type == link_type::raw || link_type == link_type::raw_bsd) ? link_type::raw_linktype : link_type;
  put16(body, static_cast<std::uint16_t>(file_link_type));
  put16(body, 0);
  put32(body, options.snaplen);
  if (options.resolution != 6) {
    put16(body, 9);  // if_tsresol
    put16(body, 1);
    body.push_back(static_cast<char>(options.resolution));
    body.append(3, '\0');
  }
  if (options.offset_s != 0) {
    put16(body, 14);  // if_tsoffset
    put16(body, 8);
    put64(body, static_cast<std::uint64_t>(options.offset_s));
  }
  if (!options.name.empty()) {
    put16(body, 2);  // if_name
    put16(body, static_cast<std::uint16_t>(options.name.size()));
    body.append(options.name);
    body.append((4 - options.name.size() % 4) % 4, '\0');
  }
  if (options.resolution != 6 || options.offset_s != 0 || !options.name.empty()) {
    put16(body, 0);  // opt_endofopt
    put16(body, 0);
  }
  block(1, body);
  interfaces_.push_back({options.snaplen, options});
  return static_cast<std::uint32_t>(interfaces_.size() - 1);
}

std::uint64_t pcapng_file_writer::units(const interface& i, std::int64_t ts_us) const {
  const auto us = static_cast<uint128>(ts_us - i.options.offset_s * 1'000'000);
  const unsigned exponent = i.options.resolution & 0x7fu;
  if ((i.options.resolution & 0x80u) != 0) {
    // Rounded up, so that truncating back to microseconds gives ts_us again.
    return static_cast<std::uint64_t>(((us << exponent) + 999'999) / 1'000'000);
  }
  uint128 scale = 1;
  for (unsigned k = 6; k < exponent; ++k) scale *= 10;
  if (exponent >= 6) return static_cast<std::uint64_t>(us * scale);
  for (unsigned k = exponent; k < 6; ++k) scale *= 10;
  return static_cast<std::uint64_t>(us / scale);
}

void pcapng_file_writer::write(std::uint32_t interface_id, std::int64_t ts_us, std::string_view frame) {
  if (interface_id >= interfaces_.size()) throw pcap_write_error("unknown interface");
  const interface& i = interfaces_[interface_id];
  const std::uint32_t caplen = frame.size() > i.snaplen ? i.snaplen : static_cast<std::uint32_t>(frame.size());
  std::string body;
  const std::uint64_t ts = units(i, ts_us);
  put32(body, interface_id);
  put32(body, static_cast<std::uint32_t>(ts >> 32));
  put32(body, static_cast<std::uint32_t>(ts & 0xffffffffu));
  put32(body, caplen);
  put32(body, static_cast<std::uint32_t>(frame.size()));
  body.append(frame.substr(0, caplen));
  block(6, body);
}

void pcapng_file_writer::write_obsolete(std::uint32_t interface_id, std::int64_t ts_us, std::string_view frame) {
  if (interface_id >= interfaces_.size()) throw pcap_write_error("unknown interface");
  const interface& i = interfaces_[interface_id];
  const std::uint32_t caplen = frame.size() > i.snaplen ? i.snaplen : static_cast<std::uint32_t>(frame.size());
  std::string body;
  const std::uint64_t ts = units(i, ts_us);
  put16(body, static_cast<std::uint16_t>(interface_id));
  put16(body, 0);  // drops
  put32(body, static_cast<std::uint32_t>(ts >> 32));
  put32(body, static_cast<std::uint32_t>(ts & 0xffffffffu));
  put32(body, caplen);
  put32(body, static_cast<std::uint32_t>(frame.size()));
  body.append(frame.substr(0, caplen));
  block(2, body);
}

void pcapng_file_writer::write_simple(std::string_view frame) {
  if (interfaces_.empty()) throw pcap_write_error("a simple packet block needs interface 0");
  const std::uint32_t snaplen = interfaces_[0].snaplen;
  const std::uint32_t caplen = frame.size() > snaplen ? snaplen : static_cast<std::uint32_t>(frame.size());
  std::string body;
  put32(body, static_cast<std::uint32_t>(frame.size()));
  body.append(frame.substr(0, caplen));
  block(3, body);
}

void pcapng_file_writer::close() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
}

// Synthetic connections.

tcp_conversation::tcp_conversation(endpoint client, endpoint server, std::uint32_t client_isn,
                                   std::uint32_t server_isn)
    : client_(client), server_(server), client_seq_(client_isn), server_seq_(server_isn) {}

tcp_segment_spec tcp_conversation::segment(endpoint source, endpoint destination, std::uint32_t& seq,
                                           std::uint32_t peer_seq, std::uint8_t flags, std::string_view payload) {
  tcp_segment_spec s;
  s.source = source;
  s.destination = destination;
  s.seq = seq;
  s.ack = (flags & tcp_flags::ack) != 0 ? peer_seq : 0;
  s.flags = flags;
  s.payload.assign(payload);
  seq += static_cast<std::uint32_t>(payload.size());
  if ((flags & (tcp_flags::syn | tcp_flags::fin)) != 0) ++seq;  // SYN and FIN take a sequence number
  return s;
}

tcp_segment_spec tcp_conversation::from_client(std::uint8_t flags, std::string_view payload) {
  return segment(client_, server_, client_seq_, server_seq_, flags, payload);
}

tcp_segment_spec tcp_conversation::from_server(std::uint8_t flags, std::string_view payload) {
  return segment(server_, client_, server_seq_, client_seq_, flags, payload);
}

std::vector<tcp_segment_spec> tcp_conversation::handshake() {
  std::vector<tcp_segment_spec> out;
  out.push_back(from_client(tcp_flags::syn, {}));
  out.push_back(from_server(tcp_flags::syn | tcp_flags::ack, {}));
  out.push_back(from_client(tcp_flags::ack, {}));
  return out;
}

tcp_segment_spec tcp_conversation::client_sends(std::string_view payload) {
  return from_client(tcp_flags::ack | tcp_flags::psh, payload);
}
tcp_segment_spec tcp_conversation::server_sends(std::string_view payload) {
  return from_server(tcp_flags::ack | tcp_flags::psh, payload);
}
tcp_segment_spec tcp_conversation::client_acks() { return from_client(tcp_flags::ack, {}); }
tcp_segment_spec tcp_conversation::server_acks() { return from_server(tcp_flags::ack, {}); }
tcp_segment_spec tcp_conversation::client_fin() { return from_client(tcp_flags::fin | tcp_flags::ack, {}); }
tcp_segment_spec tcp_conversation::server_fin() { return from_server(tcp_flags::fin | tcp_flags::ack, {}); }
tcp_segment_spec tcp_conversation::client_rst() { return from_client(tcp_flags::rst | tcp_flags::ack, {}); }

}  // namespace lockscope::ingest
