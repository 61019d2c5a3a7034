// Locks taken with plain commands: SET key value NX PX|EX (an acquire), SETNX (with a
// separate EXPIRE), SET key value XX PX|EX and EXPIRE/PEXPIRE (a renewal when the key is
// a held lock) and DEL/UNLINK (a release), but not the DEL of a Redisson unlock latch key;
// a GET just before a DEL or EXPIRE on its connection names the value it acts for.
#include "recognize/lock_channels.hpp"
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

using resp::iequals;

// Seconds to milliseconds, saturating (the value comes from the wire).
std::int64_t seconds_to_ms(std::int64_t s) noexcept {
  constexpr std::int64_t limit = INT64_MAX / 1000;
  return s > limit ? INT64_MAX : s < -limit ? -INT64_MAX : s * 1000;
}

// A SET's effect on a lock, from its reply: OK took (or renewed) it, nil is `on_nil`.
lock_operation& set_operation(command_call& c, lock_op_kind kind, std::int64_t lease, op_outcome on_nil) {
  lock_operation& op = c.op;
  op.kind = kind;
  op.family = lock_family::set_based;
  op.lock = c.args[1];
  op.owner = c.args[2];
  op.lease_ms = lease;
  op.outcome = c.reply.kind == reply_view::shape::ok     ? op_outcome::ok
               : c.reply.kind == reply_view::shape::null ? on_nil
               : c.reply.kind == reply_view::shape::none ? op_outcome::no_reply
                                                         : op_outcome::error;
  return op;
}

// With GET, SET answers the key's old value in place of OK: nil says there was no key
// (NX took it, XX found nothing: `op`'s nil outcome is the other way round), a value
// that there was one (`on_value`).
const lock_operation& answered_old_value(lock_operation& op, const command_call& c, bool get, op_outcome on_value) {
  if (!get) return op;
  const reply_view::shape k = c.reply.kind;
  if (k == reply_view::shape::null) op.outcome = on_value == op_outcome::ok ? op_outcome::rejected : op_outcome::ok;
  else if (k == reply_view::shape::ok || k == reply_view::shape::integer || k == reply_view::shape::other) op.outcome = on_value;
  return op;
}

}  // namespace

void lock_recognizer::state::on_set(command_call& c) {
  const auto& args = c.args;
  if (args.size() < 3) return;
  bool nx = false;
  bool xx = false;
  set_options o;
  std::int64_t& lease = o.lease;
  for (std::size_t i = 3; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (iequals(a, "NX")) nx = true;
    else if (iequals(a, "XX")) xx = true;
    else if ((iequals(a, "PX") || iequals(a, "EX")) && i + 1 < args.size()) {
      std::int64_t v = 0;
      if (parse_int(args[i + 1], v)) lease = iequals(a, "EX") ? seconds_to_ms(v) : v;
      ++i;
    } else if (a.size() >= 4 && (a[0] == 'I' || a[0] == 'i') && i + 1 < args.size()) {
      // IFEQ, IFNE, IFDEQ, IFDNE: the write depends on the key's present value.
      o.condition = iequals(a, "IFEQ")    ? value_condition::equal
                    : iequals(a, "IFNE")  ? value_condition::not_equal
                    : iequals(a, "IFDEQ") ? value_condition::digest_equal
                    : iequals(a, "IFDNE") ? value_condition::digest_not_equal
                                          : o.condition;
      o.compared = args[++i];
    } else if ((iequals(a, "PXAT") || iequals(a, "EXAT")) && i + 1 < args.size()) {
      // An absolute deadline (Unix time): the lease is what is left of it when sent.
      std::int64_t v = 0;
      if (parse_int(args[i + 1], v)) {
        const std::int64_t at_ms = iequals(a, "EXAT") ? seconds_to_ms(v) : v;
        lease = std::max<std::int64_t>(at_ms - c.e.request_us / 1000, 0);
      }
      ++i;
    } else if (iequals(a, "GET")) o.get = true;
    else if (iequals(a, "KEEPTTL")) o.keep_ttl = true;
  }
  if (o.condition != value_condition::none) {
    if (!nx && !xx) on_conditional_set(c, o);  // with NX or XX: a syntax error
    return;
  }
  if (xx && !nx && lease >= 0) {
    // Re-set only while the key exists, with a new expiry: a renewal of the lease (a
    // client that renews by writing its value again; nil: the key had gone). Only for a
    // value seen taking (or refused) that key as a lock: a cache refreshing an entry
    // (`SET session data XX EX 3600`) writes the same command. Without an expiry it
    // would make the key permanent, which no lock does: not read.
    if (flow.find(value_key(c.op.server_text, args[1], args[2])) == nullptr) return;
    emit(answered_old_value(set_operation(c, lock_op_kind::renew, lease, op_outcome::rejected), c, o.get, op_outcome::ok));
    return;
  }
  if (!nx) return;
  emit(answered_old_value(set_operation(c, lock_op_kind::acquire, lease, op_outcome::contended), c, o.get,
                          op_outcome::contended));
}

void lock_recognizer::state::on_setnx(command_call& c) {
  if (c.args.size() != 3) return;
  const reply_view& reply = c.reply;
  lock_operation& op = c.op;
  op.kind = lock_op_kind::acquire;
  op.family = lock_family::setnx;
  op.lock = c.args[1];
  op.owner = c.args[2];
  op.outcome = reply.kind != reply_view::shape::integer ? (reply.kind == reply_view::shape::none ? op_outcome::no_reply
                                                                                                 : op_outcome::error)
               : reply.integer == 1                     ? op_outcome::ok
                                                        : op_outcome::contended;
  emit(op);
}

void lock_recognizer::state::on_expire(command_call& c) {
  const std::string_view checked = any_checked_read ? take_checked_value(c, c.args.size() >= 2 ? c.args[1] : "") : "";
  if (c.args.size() < 3) return;
  std::int64_t v = 0;
  if (!parse_int(c.args[2], v)) return;
  lock_operation& op = c.op;
  op.kind = lock_op_kind::expire;
  op.lock = c.args[1];
  op.owner = checked;
  op.lease_ms = c.word == command_word::expire ? seconds_to_ms(v) : v;
  op.outcome = c.reply.kind != reply_view::shape::integer ? op_outcome::no_reply
               : c.reply.integer == 1                     ? op_outcome::ok
                                                          : op_outcome::none;
  if (!checked.empty()) note_checked_renewal(op);
  emit(op);
}

void lock_recognizer::state::on_del(command_call& c) {
  const std::string_view checked = any_checked_read ? take_checked_value(c, c.args.size() == 2 ? c.args[1] : "") : "";
  if (c.args.size() > 2) {
    on_del_keys(c);
    return;
  }
  if (c.args.size() != 2) return;
  if (starts_with(c.args[1], "redisson_unlock_latch")) {
    flow.erase(latch_key(c.e.server_text, c.args[1]));
    return;
  }
  lock_operation& op = c.op;
  op.kind = lock_op_kind::del;
  op.keys_named = 1;
  op.lock = c.args[1];
  op.owner = checked;
  op.outcome = c.reply.kind != reply_view::shape::integer ? op_outcome::no_reply
               : c.reply.integer >= 1                     ? op_outcome::ok
                                                          : op_outcome::none;
  if (!checked.empty()) note_checked_release(op);
  emit(op);
}

// DEL k1 k2 ... answers how many of its keys existed: all of them (each removed), none,
// or some (partial: which, the count alone cannot say; the timeline ends a hold it knows
// on a named key). Each key is an operation of its own, read as a one-key DEL; a client
// that releases several locks at once (RQ's scheduler: one DEL of every queue's lock,
// held or not) is read so. No value names whose hold it ends.
void lock_recognizer::state::on_del_keys(command_call& c) {
  const std::span<const std::string_view> keys = c.args.subspan(1);
  const bool counted = c.reply.kind == reply_view::shape::integer;
  const std::int64_t n = counted ? c.reply.integer : -1;
  const op_outcome outcome = !counted                                              ? op_outcome::no_reply
                             : n <= 0                                              ? op_outcome::none
                             : n >= static_cast<std::int64_t>(keys.size())         ? op_outcome::ok
                                                                                   : op_outcome::partial;
  lock_operation& op = c.op;
  op.kind = lock_op_kind::del;
  op.keys_named = static_cast<std::uint8_t>(std::min<std::size_t>(keys.size(), 255));
  op.owner = {};
  op.outcome = outcome;
  for (const std::string_view key : keys) {
    if (starts_with(key, "redisson_unlock_latch")) {
      flow.erase(latch_key(c.e.server_text, key));
      continue;
    }
    op.lock = key;
    emit(op);
  }
}

void lock_recognizer::state::on_get(command_call& c) {
  checked_read& r = checked_read_of(c.e.connection);
  const message* m = c.e.reply;
  if (c.args.size() != 2 || m == nullptr || c.reply.root == message::npos) {
    if (r.connection == c.e.connection) r.connection = 0;
    return;
  }
  const message_node& n = m->nodes()[c.reply.root];
  if (n.type != resp::type::bulk_string || (n.flags & resp::node_flags::null_bulk) != 0 || m->text(n).empty()) {
    if (r.connection == c.e.connection) r.connection = 0;  // nil: nothing to act for
    return;
  }
  any_checked_read = true;
  r.connection = c.e.connection;
  r.db = c.op.db;
  r.reply_us = c.e.reply_us;
  r.key.assign(c.args[1]);
  r.value.assign(m->text(n));
}

std::string_view lock_recognizer::state::take_checked_value(const command_call& c, std::string_view key) {
  checked_read& r = checked_read_of(c.e.connection);
  if (r.connection != c.e.connection) return {};
  r.connection = 0;
  // Sent once the GET's answer had come (a client that decided on it), on the same key
  // in the same database.
  if (r.reply_us < 0 || r.reply_us > c.e.request_us || r.db != c.op.db || key.empty() || r.key != key) return {};
  return r.value;
}

}  // namespace lockscope::locks
