// Writing captures: classic pcap and pcapng files, and synthetic TCP/IP frames.
//
//   pcap_file_writer out("x.pcap", link_type::en10mb);       // snaplen 262144
//   tcp_conversation c(client, server);                      // picks sequence numbers
//   for (const auto& s : c.handshake()) out.write(t += 10, make_frame(link_type::en10mb, s));
//   out.write(t, make_frame(link_type::en10mb, c.client_sends("*1\r\n$4\r\nPING\r\n")));
//
// Tests use it to build captures no real network would give on demand (reordering,
// loss, wraparound, every link type); captures/ uses it for the seed reconstruction.
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/ingest/packet.hpp"

namespace lockscope::ingest {

struct pcap_write_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One TCP segment to synthesise.
struct tcp_segment_spec {
  endpoint source;
  endpoint destination;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
  std::uint8_t flags = tcp_flags::ack;
  std::string payload;
  std::uint16_t window = 65535;
};

struct frame_options {
  // EN10MB only: 802.1Q/802.1ad tags, outermost first. A tag's TPID is 0x88a8 for
  // the outer tags of a stack and 0x8100 for the innermost.
  std::vector<std::uint16_t> vlan_ids;
};

// The frame for a segment on `link_type` (any type decode_packet supports), with
// valid IPv4 and TCP checksums. The address family comes from the endpoints.
std::string make_frame(int link_type, const tcp_segment_spec& segment, const frame_options& options = {});

// Classic pcap (microsecond timestamps, host byte order).
class pcap_file_writer {
 public:
  // Throws pcap_write_error when the file cannot be created.
  pcap_file_writer(const std::string& path, int link_type, std::uint32_t snaplen = 262144);
  ~pcap_file_writer();
  pcap_file_writer(const pcap_file_writer&) = delete;
  pcap_file_writer& operator=(const pcap_file_writer&) = delete;

  // Frames longer than the snaplen are cut, keeping their original length.
  void write(std::int64_t ts_us, std::string_view frame);
  void close();

 private:
  std::FILE* file_ = nullptr;
  std::uint32_t snaplen_;
};

// pcapng with any number of interfaces (each its own link type, time resolution and
// offset), in either byte order, with more sections and the rarer block kinds on demand.
class pcapng_file_writer {
 public:
  struct interface_options {
    std::uint32_t snaplen = 262144;
    std::uint8_t resolution = 6;  // if_tsresol: 10^-n s, or 2^-n s with the high bit set
    std::int64_t offset_s = 0;    // if_tsoffset (written only when not 0)
    std::string name{};           // if_name (written only when not empty)
  };

  // `big_endian`: the sections are written in big-endian byte order (as on SPARC or
  // s390x) whatever the host's.
  explicit pcapng_file_writer(const std::string& path, bool big_endian = false);
  ~pcapng_file_writer();
  pcapng_file_writer(const pcapng_file_writer&) = delete;
  pcapng_file_writer& operator=(const pcapng_file_writer&) = delete;

  // Returns the interface id for write().
  std::uint32_t add_interface(int link_type, std::uint32_t snaplen = 262144);
  std::uint32_t add_interface(int link_type, const interface_options& options);
  // An enhanced packet block; `ts_us` is written in the interface's resolution, less its
  // offset.
  void write(std::uint32_t interface_id, std::int64_t ts_us, std::string_view frame);
  // The obsolete packet block (16-bit interface id), and the simple packet block
  // (interface 0, no time).
  void write_obsolete(std::uint32_t interface_id, std::int64_t ts_us, std::string_view frame);
  void write_simple(std::string_view frame);
  // An interface statistics block with isb_ifdrop (all ones: "unknown", as dumpcap writes
  // when it has no statistics) and, when given, isb_osdrop.
  void write_statistics(std::uint32_t interface_id, std::uint64_t ifdrop, std::optional<std::uint64_t> osdrop = {});
  // Any other block, as is (name resolution, statistics, decryption secrets, custom).
  void write_block(std::uint32_t type, std::string_view body);
  // Starts a new section: interface ids start again from 0.
  void new_section();
  void close();

 private:
  struct interface {
    std::uint32_t snaplen;
    interface_options options;
  };
  void block(std::uint32_t type, std::string_view body);
  void put16(std::string& out, std::uint16_t v) const;
  void put32(std::string& out, std::uint32_t v) const;
  void put64(std::string& out, std::uint64_t v) const;
  std::uint64_t units(const interface& i, std::int64_t ts_us) const;
  std::FILE* file_ = nullptr;
  bool swap_ = false;
  std::vector<interface> interfaces_;
};

// Sequence-number bookkeeping for one synthetic connection. Each call returns the
// next segment and advances the sender's sequence number; tests may reorder, drop or
// duplicate the returned segments before writing them.
class tcp_conversation {
 public:
  tcp_conversation(endpoint client, endpoint server, std::uint32_t client_isn = 1000,
                   std::uint32_t server_isn = 5000);

  // SYN, SYN-ACK, ACK.
  std::vector<tcp_segment_spec> handshake();
  tcp_segment_spec client_sends(std::string_view payload);
  tcp_segment_spec server_sends(std::string_view payload);
  // A pure ACK from the other side, acknowledging everything sent so far.
  tcp_segment_spec client_acks();
  tcp_segment_spec server_acks();
  tcp_segment_spec client_fin();
  tcp_segment_spec server_fin();
  tcp_segment_spec client_rst();

  std::uint32_t client_seq() const noexcept { return client_seq_; }
  std::uint32_t server_seq() const noexcept { return server_seq_; }
  const endpoint& client() const noexcept { return client_; }
  const endpoint& server() const noexcept { return server_; }

 private:
  tcp_segment_spec from_client(std::uint8_t flags, std::string_view payload);
  tcp_segment_spec from_server(std::uint8_t flags, std::string_view payload);
  // A segment from `source` at `seq` (then advanced), acknowledging `peer_seq`.
  static tcp_segment_spec segment(endpoint source, endpoint destination, std::uint32_t& seq,
                                  std::uint32_t peer_seq, std::uint8_t flags, std::string_view payload);

  endpoint client_;
  endpoint server_;
  std::uint32_t client_seq_;
  std::uint32_t server_seq_;
};

// An endpoint from text; throws std::invalid_argument for a bad address.
endpoint make_endpoint(std::string_view ip, std::uint16_t port);

}  // namespace lockscope::ingest
