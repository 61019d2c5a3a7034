// The RESP conversation of one TCP connection: both byte streams decoded, replies
// paired with their commands, pushes told apart from replies.
//
//   resp_session s(options, connection, ends, client_or_unknown, sink);
//   s.on_data(side, bytes, offset, now_us);   // side 0/1: the connection's two ends
//   s.on_gap(side, bytes, offset, now_us);
//   s.finish(now_us);                         // unanswered commands are emitted
//
// Which end is the client comes from the caller when it knows (the SYN, then --port).
// Otherwise both directions are held (at most session_options::decide_window bytes)
// until the content tells: a client only sends arrays of bulk strings or inline
// lines, so any other frame, an array holding anything but bulk strings, or a
// lower-case `message`/`pmessage`/`smessage`/`pong` frame comes from the server. When
// the window fills (or decide_after_us passes, or the flow ends) without such a frame,
// a well-known Redis port decides, then which end sent arrays, then the lower port.
// The held bytes are then replayed, so nothing is paired under a guess. A guess that
// later bytes contradict is corrected (the roles swap, both streams resynchronise)
// and reported, never kept.
//
// A stream whose start was not captured (or that lost bytes) is resynchronised: a
// candidate frame start (`*N\r\n$` or an inline line from a client, a reply type byte
// from a server) at a line start is accepted only once the bytes that follow it
// decode cleanly. Flows that are not RESP are named (TLS, HTTP, unknown) and ignored.
//
// Connection states that change pairing: RESP2 subscribed mode, RESP3 pushes, HELLO,
// RESET, CLIENT REPLY OFF/SKIP/ON, MONITOR, PSYNC/SYNC (the RDB payload and the
// replication stream are skipped), an inline line with unbalanced quotes (answered
// with a protocol error, then the server closes). Secrets (redaction.hpp) are
// replaced by "****" unless show_secrets, in the commands and in the replies that
// may show them (a reply quoting a masked argument, CONFIG GET, ACL LIST/GETUSER).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/ingest/argument_interner.hpp"
#include "lockscope/ingest/exchange.hpp"
#include "lockscope/ingest/message.hpp"
#include "lockscope/ingest/packet.hpp"
#include "lockscope/resp/decoder.hpp"

namespace lockscope::ingest {

// How the session knows which end is the client.
enum class side_reason : std::uint8_t {
  undecided,
  syn,              // the SYN / SYN-ACK was captured
  port,             // --port names one end
  content,          // a frame only a server sends (see the header comment)
  well_known_port,  // content could not tell; one end is on a usual Redis port
  content_weak,     // only one end sent arrays of bulk strings or inline lines
  lower_port,       // nothing else: servers listen on the lower port
};
std::string_view to_string(side_reason r) noexcept;

// What a flow carries.
enum class flow_protocol : std::uint8_t { resp, tls, http, unknown };
// "TLS: cannot decode; capture before the TLS terminator or on the server", ...
std::string_view describe(flow_protocol p) noexcept;

// 6379, 6380, 16379, 26379, 7000-7005 and the ports of the bundled captures.
bool is_well_known_redis_port(std::uint16_t port) noexcept;

enum class flow_note_kind : std::uint8_t { sides_decided, sides_corrected, other_protocol };

// A per-flow decision, for verbose output. Views are valid during the call only.
struct flow_note {
  flow_note_kind kind{};
  std::uint64_t connection = 0;
  const endpoint* client = nullptr;  // other_protocol: the end that connected, if known
  const endpoint* server = nullptr;
  side_reason reason = side_reason::undecided;
  std::string_view detail;  // what in the content decided, e.g. "an integer in an array"
  flow_protocol protocol = flow_protocol::resp;
};

class flow_observer {
 public:
  virtual ~flow_observer() = default;
  virtual void on_flow_note(const flow_note& note) = 0;
};

struct session_options {
  bool show_secrets = false;
  // Text kept per message; longer values are cut (and counted), never buffered whole.
  std::size_t max_message_bytes = 1u << 20;
  // Commands awaiting a reply, by count and by bytes kept; beyond either the oldest is
  // emitted unanswered (counted in session_stats::pending_overflow). The newest is
  // always kept. Bounds a capture of only the client side.
  std::size_t max_pending = 4096;
  std::size_t max_pending_bytes = 1u << 20;
  // Bytes of both directions held while the sides are uncertain, and for how long.
  std::size_t decide_window = 64u << 10;
  std::int64_t decide_after_us = 1'000'000;
  // Told about each flow's sides and other protocols (nullptr: nobody).
  flow_observer* observer = nullptr;
  // Bytes examined while looking for a frame boundary before older ones are dropped.
  std::size_t resync_window = 64u << 10;
  // A stream that never resynchronises within this many bytes is not RESP.
  std::uint64_t give_up_after = 1u << 20;
  // A command array that arrives whole in one segment is taken in one step
  // (resp::handler::on_bulk_array) instead of node by node. The result is the same;
  // false is for tests that compare the two.
  bool whole_arrays = true;
  // A whole array's long argument that the session's interner already holds (a script
  // every EVAL repeats) is viewed there rather than copied (argument_interner.hpp), and
  // the exchange names it (exchange::interned_identity). The exchanges' text is the
  // same; false is for tests that compare the two. No effect without an interner.
  bool intern_arguments = true;
};


struct session_stats {
  std::uint64_t commands = 0;
  std::uint64_t exchanges = 0;
  std::uint64_t pushes = 0;
  std::uint64_t unpaired_replies = 0;   // replies to commands sent before the capture
  std::uint64_t decode_errors = 0;
  std::uint64_t resyncs = 0;
  std::uint64_t skipped_bytes = 0;      // dropped while resynchronising
  std::uint64_t stray_bytes = 0;        // CR/LF between two messages, skipped in step
  std::uint64_t replication_bytes = 0;  // RDB payload and replication stream
  std::uint64_t pending_overflow = 0;   // commands emitted unanswered: too many waiting
  std::uint64_t pending_shed = 0;       // emitted unanswered by shed(): all connections held too much
  std::uint64_t side_corrections = 0;   // guessed sides that later bytes contradicted
};

class resp_session {
 public:
  // `ends` are the connection's two endpoints (side 0 and side 1). `client_side` is 0
  // or 1 when known (`reason` says how: syn or port), nullopt to decide from the content.
  // `interner` (nullptr: none) holds long repeated arguments for the sessions of one
  // thread; it must outlive the session.
  resp_session(const session_options& options, std::uint64_t connection,
               std::array<endpoint, 2> ends, std::optional<int> client_side, exchange_sink& sink,
               side_reason reason = side_reason::port, argument_interner* interner = nullptr);

  // Whether a side's stream starts at its first byte (its SYN was seen).
  void set_stream_start_seen(int side) noexcept { sides_[side].at_stream_start = true; }
  // When the connection's first SYN was captured (exchange::opened_us).
  void set_opened(std::int64_t at_us) noexcept {
    if (opened_us_ < 0) opened_us_ = at_us;
  }

  void on_data(int side, std::string_view bytes, std::uint64_t offset, std::int64_t now_us);
  void on_gap(int side, std::uint64_t bytes, std::uint64_t offset, std::int64_t now_us);
  // The connection is over: commands still waiting are emitted without a reply.
  void finish(std::int64_t now_us);

  // The bytes this session holds: its ring of commands awaiting replies (slots and the
  // buffers they keep), the reply being built, and what the sides hold while undecided
  // or resynchronising. Cheap: the pipeline asks after every segment.
  std::size_t held_bytes() const noexcept;
  // Gives most of it back (the connections together hold too much): the commands
  // waiting for an ordinary reply, from the oldest up to the first that changes the
  // connection's state (HELLO, SUBSCRIBE, ...), are emitted unanswered (counted in
  // pending_shed) and their replies, when they come, are skipped, so that later replies
  // still pair with their own commands; the ring shrinks to what is left, freeing the
  // buffers its slots kept.
  void shed();

  bool ignored() const noexcept { return ignored_; }
  // The two endpoints, side 0 then side 1.
  const endpoint* ends() const noexcept { return ends_.data(); }
  std::optional<int> client_side() const noexcept {
    return client_side_ < 0 ? std::nullopt : std::optional<int>(client_side_);
  }
  side_reason sides_reason() const noexcept { return reason_; }
  // What the flow carries: resp, or why it is ignored.
  flow_protocol carried() const noexcept { return carried_; }
  int protocol() const noexcept { return protocol_; }
  bool subscribed() const noexcept { return subscribed_; }
  const session_stats& stats() const noexcept { return stats_; }

 private:
  enum class reply_mode : std::uint8_t { on, off, skip_next };
  enum class replication : std::uint8_t { none, preamble, rdb_body, rdb_eof, stream };

  // A command taken whole from the decoder (on_client_array): the frame's bytes copied
  // once, and its arguments viewing them. The bytes have a heap block of their own, so
  // the views stay valid when the ring moves its slots. With an interner, one long
  // argument the interner holds is viewed in its entry (referenced until clear() or
  // the next assign()) and left out of the copy.
  class whole_command {
   public:
    // The heap bytes it grew by (capacity_bytes() before and after).
    std::size_t assign(std::string_view frame, std::span<const std::string_view> elements, argument_interner* interner);
    void clear() noexcept {
      count_ = 0;
      interned_.reset();
    }
    // clear(), and each heap block released when it exceeds `keep` bytes; the bytes freed.
    std::size_t clear_and_trim(std::size_t keep) noexcept;
    // No heap block exceeds `keep` bytes: clear_and_trim(keep) would free nothing.
    bool holds_at_most(std::size_t keep) const noexcept {
      return capacity_ <= keep && arguments_.capacity() * sizeof(std::string_view) <= keep;
    }
    bool empty() const noexcept { return count_ == 0; }
    // Heap bytes held (in use or kept for the next command).
    std::size_t capacity_bytes() const noexcept { return capacity_ + arguments_.capacity() * sizeof(std::string_view); }
    std::span<const std::string_view> arguments() const noexcept { return {arguments_.data(), count_}; }
    // What message::footprint() counts for the same command built node by node (an
    // interned argument included: the limits do not depend on interning).
    std::size_t footprint() const noexcept { return footprint_; }
    // The interned argument's position and identity (0: none).
    std::uint32_t interned_argument() const noexcept { return interned_argument_; }
    std::uint64_t interned_identity() const noexcept { return interned_ != nullptr ? interned_->identity() : 0; }
    // Starts loading its argument views and the first `max_bytes` of its bytes.
    void prefetch(std::size_t max_bytes = 512) const noexcept {
      prefetch_lines(arguments_.data(), count_ * sizeof(std::string_view));
      // The bytes this command copied (an interned argument is in its entry, already hot).
      prefetch_lines(bytes_.get(), std::min(size_, max_bytes));
    }

   private:
    std::unique_ptr<char[]> bytes_;
    std::size_t capacity_ = 0;
    std::size_t size_ = 0;  // bytes_ in use
    std::vector<std::string_view> arguments_;  // only grows: the first count_ are this command's
    std::size_t count_ = 0;
    std::size_t footprint_ = 0;
    argument_interner::reference interned_;  // viewed by arguments_[interned_argument_]
    std::uint32_t interned_argument_ = 0;
  };

  struct pending_command {
    message command;        // built node by node
    whole_command whole;    // or taken whole: then `command` is empty
    std::int64_t at_us = 0;
    std::vector<std::uint32_t> secrets;  // positions of arguments to redact (redaction.hpp)
    std::uint8_t expect = 0;         // what the reply looks like (expect_* below)
    std::uint8_t hello_protocol = 0;
    std::uint8_t reply_checks = 0;   // what its reply may show that is secret (redaction.hpp)
    std::size_t footprint = 0;       // bytes counted against max_pending_bytes

    void clear_command() noexcept {
      command.clear();
      whole.clear();
    }
    // Starts loading what pairing and recognizing it read (see message::prefetch).
    void prefetch() const noexcept {
      if (whole.empty()) command.prefetch();
      else whole.prefetch();
    }
    // The arguments, before redaction.
    void arguments(std::vector<std::string_view>& out) const {
      if (whole.empty()) command.arguments(out);
      else out.assign(whole.arguments().begin(), whole.arguments().end());
    }
  };
  // Bytes received while the sides are undecided, in arrival order.
  struct held_chunk {
    std::int64_t now_us = 0;
    std::uint64_t offset = 0;
    std::uint32_t size = 0;
    std::uint8_t side = 0;
  };

  class side_handler final : public resp::handler {
   public:
    resp_session* session = nullptr;
    int side = 0;
    void on_node(const resp::node& n) override;
    bool on_bulk_array(std::string_view frame, std::span<const std::string_view> elements) override;
  };

  struct side_state {
    std::optional<resp::decoder> decoder;
    side_handler handler;
    bool at_stream_start = false;
    bool synced = false;
    bool synced_once = false;
    bool seen_data = false;
    std::uint64_t decoder_base = 0;   // stream offset of the decoder's offset 0
    std::uint64_t next_offset = 0;    // stream offset of the next byte we expect
    std::string resync_buffer;
    std::uint64_t resync_start = 0;   // stream offset of resync_buffer[0]
    std::uint64_t unsynced_bytes = 0;
    std::uint64_t trailing_line_ends = 0;  // CR/LF bytes that ended the bytes fed so far
    std::string held;                 // undecided sides: this direction's bytes so far
    std::uint8_t evidence = 0;        // what `held` shows (session_sides.cpp)
    std::string_view evidence_detail;
    std::array<char, 8> first{};      // the first bytes, to name other protocols
    std::uint8_t first_size = 0;
  };

  void make_decoders();
  void process(int side, std::string_view bytes, std::uint64_t offset, std::int64_t now_us);
  // Undecided sides: hold, look for evidence, decide when it is certain or the window is full.
  void hold(int side, std::string_view bytes, std::uint64_t offset, std::int64_t now_us);
  void decide(bool forced);
  void commit_sides(int client, side_reason reason, std::string_view detail);
  // The client sent something only a server sends: swap the guessed roles.
  bool contradicts_client(const resp::node& n) noexcept;
  // The first word of a client's array or inline line names a reply or a push frame.
  static bool first_word_contradicts(std::string_view word, bool partial) noexcept;
  void correct_sides(int side, std::string_view rest);
  void note(flow_note_kind kind, std::string_view detail = {});
  // First bytes of a side: another protocol ends the session here.
  bool other_protocol_at_start(int side, std::string_view bytes);
  void give_up(int side, std::uint64_t offset);
  void feed(int side, std::string_view bytes, std::int64_t now_us);
  void feed_synced(int side, std::string_view bytes);
  // The decoder stopped at CR/LF bytes where a message should start: skips them
  // (`rest` becomes what follows them) and keeps the stream in step. False otherwise.
  bool skip_stray_line_ends(int side, std::string_view fed, std::uint64_t fed_at, std::uint64_t line_ends_before,
                            std::string_view& rest);
  void resync(int side, std::string_view bytes);
  bool validate(int side, std::string_view candidate, bool& need_more);
  std::size_t consume_replication(std::string_view bytes);
  void lose_sync(int side);

  void on_client_node(const resp::node& n);
  // A whole command array in one call (the client decoder's fast path); false leaves it
  // to on_client_node, node by node.
  bool on_client_array(std::string_view frame, std::span<const std::string_view> elements);
  void on_server_node(const resp::node& n);
  void command_complete(pending_command& c);
  void reply_complete();
  void emit(pending_command& c, const message* reply);
  void emit_push(const message& m);
  // An exchange of `kind` with this connection's endpoints filled in.
  exchange make_exchange(exchange_kind kind) const noexcept;
  pending_command& tail_slot();
  void commit_tail();
  pending_command& front() { return ring_[head_]; }
  // ring_ has ring_mask_ + 1 slots, a power of 2 (kept apart from ring_.size(): per
  // node of every command, and the vector's size is a division by the slot size).
  std::size_t ring_index(std::size_t i) const noexcept { return i & ring_mask_; }
  void grow_ring();
  void pop_front();
  void drop_pending(bool emit_unanswered);
  void report(session_event_kind kind, int side, std::uint64_t offset, std::uint64_t bytes,
              std::error_code error = {});

  session_options options_;
  std::uint64_t connection_;
  std::array<endpoint, 2> ends_;
  std::array<std::string, 2> end_texts_;
  exchange_sink& sink_;
  argument_interner* interner_ = nullptr;  // nullptr: interning off
  int client_side_ = -1;
  std::int64_t opened_us_ = -1;
  std::array<side_state, 2> sides_;
  bool ignored_ = false;
  std::int64_t now_us_ = 0;
  side_reason reason_ = side_reason::undecided;
  bool sides_certain_ = false;     // syn, port or content: never corrected
  bool correct_pending_ = false;   // set inside a client node, acted on after feed()
  flow_protocol carried_ = flow_protocol::resp;
  std::vector<held_chunk> held_chunks_;
  std::size_t held_bytes_ = 0;
  std::int64_t held_since_us_ = 0;
  bool inline_seen_ = false;       // the client has sent inline commands
  bool first_word_next_ = false;   // contradicts_client: the next node is a command's name
  bool server_closing_ = false;    // an unbalanced quote: the server answers, then closes
  std::size_t pending_bytes_ = 0;
  std::size_t retained_ = 0;  // heap bytes the ring's slots hold (capacity_bytes of each)

  // Pairing state.
  std::vector<pending_command> ring_;   // FIFO of commands awaiting replies, reused
  std::size_t ring_mask_ = 0;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  message reply_;
  reply_mode reply_mode_ = reply_mode::on;
  int protocol_ = 2;
  bool subscribed_ = false;  // RESP2 subscribed mode
  bool monitor_ = false;
  bool server_lost_replies_ = false;  // a server gap or error: some replies are gone
  std::uint64_t replies_to_skip_ = 0;  // the replies of commands shed() emitted
  bool replica_link_ = false;  // the client sent PSYNC/SYNC: this is a replication link
  replication replication_ = replication::none;
  std::uint64_t rdb_remaining_ = 0;
  std::string rdb_line_;       // a preamble line split across segments
  std::string rdb_eof_mark_;   // `$EOF:<mark>` transfers end with the 40-byte mark
  std::string rdb_tail_;       // the last bytes seen, to find a mark split across feeds
  std::vector<std::string_view> arguments_;
  // MULTI ... EXEC: a queued command's reply comes in EXEC's, so EXEC's is checked for
  // what the queued ones may show (their secrets kept here, at most max_transaction_secrets).
  void note_transaction(pending_command& c, std::string_view name, std::span<const std::string_view> args);
  static constexpr std::uint8_t reply_in_transaction = 0x80;  // with reply_checks: the secrets are these
  static constexpr std::size_t max_transaction_secrets = 64;
  bool in_transaction_ = false;
  std::uint8_t transaction_checks_ = 0;
  std::vector<std::string> transaction_secrets_;
  message redacted_reply_;  // a reply with its secrets masked (reply_checks)
  std::vector<std::string_view> secret_values_;
  std::string monitor_scratch_;
  session_stats stats_;
};

}  // namespace lockscope::ingest
