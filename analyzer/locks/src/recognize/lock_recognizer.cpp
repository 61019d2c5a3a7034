// The recognizer's public class, the reading every exchange gets (its database, its
// reply's shape, a cluster redirect), and the dispatch table from the command's word to
// the handler of its job (recognizer_state.hpp lists the files).
#include "lockscope/locks/lock_recognizer.hpp"

#include <fmt/format.h>

#include "lockscope/locks/display_text.hpp"
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

using resp::iequals;

// A reply that is a string: OK, a number (RESP2 clients' integers as bulk strings), or other.
[[gnu::noinline]] void read_string_reply(reply_view& r, const message_node& n) {
  const message& m = *r.m;
  if (n.type == resp::type::simple_string) {
    r.kind = iequals(m.text(n), "OK") ? reply_view::shape::ok : reply_view::shape::other;
    return;
  }
  if ((n.flags & resp::node_flags::null_bulk) != 0) {
    r.kind = reply_view::shape::null;
    return;
  }
  r.kind = iequals(m.text(n), "OK") ? reply_view::shape::ok : reply_view::shape::other;
  std::int64_t v = 0;
  if (parse_int(m.text(n), v)) {
    r.kind = reply_view::shape::integer;
    r.integer = v;
  }
}

// The reply `m`'s node `index` (its root, or an element of EXEC's array) as a handler reads it.
[[gnu::always_inline]] inline reply_view read_reply_node(const message* m, std::size_t index) {
  reply_view r;
  if (m == nullptr || m->empty()) return r;
  r.m = m;
  r.root = index;
  if (r.root == message::npos) return r;
  const message_node& n = m->nodes()[r.root];
  switch (n.type) {
    case resp::type::null:
      r.kind = reply_view::shape::null;
      break;
    case resp::type::integer:
      r.kind = reply_view::shape::integer;
      r.integer = n.integer;
      break;
    case resp::type::boolean:
      r.kind = reply_view::shape::integer;
      r.integer = n.integer != 0 ? 1 : 0;
      break;
    case resp::type::simple_error:
    case resp::type::bulk_error:
      r.kind = reply_view::shape::error;
      break;
    case resp::type::array:
    case resp::type::set:
      r.kind = (n.flags & resp::node_flags::null_array) != 0 ? reply_view::shape::null : reply_view::shape::array;
      break;
    case resp::type::simple_string:
    case resp::type::bulk_string:
      read_string_reply(r, n);
      break;
    default:
      r.kind = reply_view::shape::other;
  }
  return r;
}

inline reply_view read_reply(const message* m) { return read_reply_node(m, m == nullptr ? message::npos : m->root()); }

}  // namespace

reply_view recognizer_detail::read_reply_at(const message* m, std::size_t index) { return read_reply_node(m, index); }

lock_recognizer::lock_recognizer(lock_operation_sink& sink) : state_(std::make_unique<state>(sink)) {}
lock_recognizer::~lock_recognizer() = default;

void lock_recognizer::on_exchange(const exchange& e) { state_->on_exchange(e); }
void lock_recognizer::on_session_event(const session_event& ev) { state_->sink.on_session_event(ev); }
void lock_recognizer::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  state_->on_connection_end(connection, at_us);
  state_->sink.on_connection_end(connection, at_us);
}

const recognizer_stats& lock_recognizer::stats() const noexcept { return state_->stats; }
void lock_recognizer::set_warning_handler(warning_handler h) { state_->warn_handler = std::move(h); }
std::size_t lock_recognizer::cached_scripts() const noexcept { return state_->by_text.size(); }
std::size_t lock_recognizer::cached_shas() const noexcept { return state_->by_sha.size(); }

void lock_recognizer::state::warn(const exchange& e, std::string_view what) {
  if (!warn_handler || ++warnings > warning_limit) return;
  std::string line = fmt::format("{} > {}: {}", e.client_text, e.server_text, what);
  if (warnings == warning_limit) line += " (further such warnings are only counted)";
  // It quotes the wire (a server's error text): no escape sequence reaches the terminal.
  warn_handler(std::string(printable(line)));
}

void lock_recognizer::state::on_exchange(const exchange& e) {
  ++stats.exchanges;
  command_call c{e, e.command, command_word::other, {}, {}};
  begin_call(c);
  if (e.kind == exchange_kind::push) {
    on_push(e, c.op);
    return;
  }
  if (e.command.empty()) return;
  c.word = identify_command(e.command[0]);
  c.reply = read_reply(e.reply);
  if (!open_transactions.empty() || (c.word == command_word::other && e.command[0].size() == 5)) [[unlikely]] {
    if (transaction_step(c)) return;
  }
  read_call_here(c);
}

void lock_recognizer::state::read_call(command_call& c) { read_call_here(c); }

// (Inlined into on_exchange, the hot path; read_call is its out-of-line copy for EXEC.)
[[gnu::always_inline]] inline void lock_recognizer::state::read_call_here(command_call& c) {
  const exchange& e = c.e;
  lock_operation& op = c.op;
  // Redis Cluster: the asked call after an ASKING, and a redirecting reply.
  if (!asking.empty()) {
    if (const auto it = asking.find(e.connection); it != asking.end()) {
      op.asking = true;
      asking.erase(it);
    }
  }
  if (c.word == command_word::asking && c.args.size() == 1) {
    on_asking(c);
    return;
  }
  if (c.reply.kind == reply_view::shape::error) on_error_reply(c);
  if (any_checked_read) [[unlikely]] forget_checked_read(c);
  if (c.word == command_word::other) {
    // The only other commands read: a connection's name (a cheap look at the length first).
    if (e.command[0].size() == 6 || e.command[0].size() == 5) note_client_name(c);
    return;
  }
  dispatch(c);
}

// The table from a command's word to its handler. Each handler checks its command's
// arguments and returns having emitted nothing when they are not a form it reads.
void lock_recognizer::state::dispatch(command_call& c) {
  switch (c.word) {
    case command_word::other: return;  // none of the commands below
    case command_word::asking: return;  // with arguments: not the ASKING on_exchange reads
    case command_word::cluster: return on_cluster(c);
    case command_word::select: return on_select(c);
    case command_word::reset: return on_reset(c);
    case command_word::set: return on_set(c);
    case command_word::setnx: return on_setnx(c);
    case command_word::expire:
    case command_word::pexpire: return on_expire(c);
    case command_word::del:
    case command_word::unlink: return on_del(c);
    case command_word::subscribe:
    case command_word::ssubscribe:
    case command_word::unsubscribe:
    case command_word::sunsubscribe:
    case command_word::psubscribe:
    case command_word::punsubscribe: return on_subscription(c);
    case command_word::script: return on_script_load(c);
    case command_word::eval:
    case command_word::eval_ro:
    case command_word::evalsha:
    case command_word::evalsha_ro: return on_script_call(c);
    case command_word::zrem: return on_zrem(c);
    case command_word::get: return on_get(c);
    case command_word::pubsub: return on_pubsub(c);
    case command_word::list_move: return on_list_move(c);
    case command_word::delex:
    case command_word::delifeq: return on_delex(c);
    case command_word::function: return on_function(c);
    case command_word::fcall:
    case command_word::fcall_ro: return on_function_call(c);
  }
}

}  // namespace lockscope::locks
