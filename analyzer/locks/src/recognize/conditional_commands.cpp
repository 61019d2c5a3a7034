// Locks released and renewed with no script (Redis 8.4, Valkey 8.1 to 9.2, Dragonfly):
// the server compares the key's present value, itself or its digest, before it writes.
//   DELEX key IFEQ value, DELIFEQ key value   the holder `value`'s release (0: refused)
//   DELEX key IFNE value                      the hold of whoever is not `value` ended
//   DELEX key IFDEQ|IFDNE digest              the hold the key has ended, checked
//   SET key value IFEQ match PX ttl           value == match: a renewal; else a
//                                             hand-over from `match` to `value`
//   SET key value IFNE match ...              a steal of whatever hold the key had
//   SET key value IFDEQ|IFDNE digest ...      the hold the key had, handed to `value`
// A digest does not name the value it was taken of: the hold it ends is the one the key
// has (the timeline knows its holder), read as that holder's release (a `del` of the
// set_based family: lock_operation.hpp). An error reply (WRONGTYPE, a syntax error)
// changed nothing, and no operation comes of it.
#include <optional>

#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

using resp::iequals;

op_outcome deleted_or(const reply_view& r, op_outcome on_zero) {
  return r.kind != reply_view::shape::integer ? op_outcome::no_reply : r.integer == 1 ? op_outcome::ok : on_zero;
}

// A SET ... GET's reply: the key's old value, or nothing (nil: there was no key). False
// when the reply is neither (an error, none captured).
bool old_value_of(const reply_view& r, std::optional<std::string_view>& old) {
  if (r.kind == reply_view::shape::null) {
    old.reset();
    return true;
  }
  if (r.m == nullptr || r.root == message::npos || r.kind == reply_view::shape::error) return false;
  const message_node& n = r.m->nodes()[r.root];
  if (n.type != resp::type::bulk_string && n.type != resp::type::simple_string) return false;
  old = r.m->text(n);
  return true;
}

}  // namespace

void lock_recognizer::state::on_delex(command_call& c) {
  const auto& args = c.args;
  if (c.reply.kind == reply_view::shape::error) return;  // WRONGTYPE, a syntax error: nothing deleted
  const bool delifeq = c.word == command_word::delifeq;
  if (!delifeq && args.size() == 2) {
    on_del(c);  // no condition: a DEL
    return;
  }
  if (args.size() != (delifeq ? 3u : 4u)) return;
  const std::string_view name = delifeq ? std::string_view("IFEQ") : args[2];
  const std::string_view compared = args.back();
  lock_operation& op = c.op;
  op.lock = args[1];
  op.family = lock_family::set_based;
  if (iequals(name, "IFEQ")) {
    // The holder `compared` releasing its lock, as a release script would: 0 says the key
    // was gone or held by another value (refused).
    op.kind = lock_op_kind::unlock;
    op.owner = compared;
    op.outcome = deleted_or(c.reply, op_outcome::rejected);
  } else if (iequals(name, "IFNE")) {
    // Deleted because the value is another's: that hold ended by force.
    op.kind = lock_op_kind::force_unlock;
    op.outcome = deleted_or(c.reply, op_outcome::none);
  } else if (iequals(name, "IFDEQ") || iequals(name, "IFDNE")) {
    op.kind = lock_op_kind::del;
    op.keys_named = 1;
    op.outcome = deleted_or(c.reply, op_outcome::none);
  } else {
    return;
  }
  emit(op);
}

void lock_recognizer::state::on_conditional_set(command_call& c, const set_options& o) {
  const std::string_view key = c.args[1], value = c.args[2];
  // Whether it wrote: OK or nil, or with GET, the old value against the condition.
  bool wrote = false;
  bool known_old = false;  // the key existed before, as the GET reply shows
  const bool by_digest = o.condition == value_condition::digest_equal || o.condition == value_condition::digest_not_equal;
  if (o.get) {
    std::optional<std::string_view> old;
    if (!old_value_of(c.reply, old)) return;
    if (!old.has_value()) {
      wrote = o.condition == value_condition::not_equal || o.condition == value_condition::digest_not_equal;
    } else if (by_digest) {
      return;  // the old value's digest is not on the wire: whether it wrote is unknown
    } else {
      known_old = true;
      wrote = (*old == o.compared) == (o.condition == value_condition::equal);
    }
  } else if (c.reply.kind == reply_view::shape::ok) {
    wrote = true;
  } else if (c.reply.kind != reply_view::shape::null) {
    return;  // an error (WRONGTYPE, syntax), no reply: nothing known done
  }
  lock_operation& op = c.op;
  op.family = lock_family::set_based;
  op.lock = key;
  std::int64_t lease = o.lease;
  auto acquire = [&](op_outcome outcome) {
    op.kind = lock_op_kind::acquire;
    op.owner = value;
    op.lease_ms = lease;
    op.outcome = outcome;
    emit(op);
  };
  switch (o.condition) {
    case value_condition::equal: {
      if (value == o.compared) {
        // Its own value written again with an expiry: a renewal (nil: the key had gone or
        // is another's). KEEPTTL or no expiry renews nothing.
        if (o.lease < 0) return;
        op.kind = lock_op_kind::renew;
        op.owner = value;
        op.lease_ms = o.lease;
        op.outcome = wrote ? op_outcome::ok : op_outcome::rejected;
        emit(op);
        return;
      }
      // A hand-over: `compared` releases, `value` takes it (nil: `compared` held nothing).
      // With KEEPTTL the key keeps its expiry: `value`'s lease is what was left of
      // `compared`'s, when its lease was seen (read before its release forgets it).
      op.kind = lock_op_kind::unlock;
      op.owner = o.compared;
      op.outcome = wrote ? op_outcome::ok : op_outcome::rejected;
      std::int64_t kept_lease = -1;
      if (wrote && o.keep_ttl) {
        const value_record* old = flow.find(value_key(op.server_text, key, o.compared));
        if (old != nullptr && old->held && old->deadline_us >= 0) {
          kept_lease = std::max<std::int64_t>(0, old->deadline_us - op.at_us()) / 1000;
        }
      }
      emit(op);
      if (wrote) {
        if (kept_lease >= 0) lease = kept_lease;
        acquire(op_outcome::ok);
      }
      return;
    }
    case value_condition::not_equal:
      // Written over another's value (a steal): that hold ends by force; nil: the key holds
      // `compared`, and `value` was refused. Without GET, whether a key was there is not
      // told: a plain DEL's reading ends a hold the timeline knows (and says whose it was).
      if (!wrote) {
        acquire(op_outcome::contended);
        return;
      }
      if (known_old || !o.get) {
        op.kind = known_old ? lock_op_kind::force_unlock : lock_op_kind::del;
        op.family = known_old ? lock_family::set_based : lock_family::unknown;
        op.keys_named = known_old ? 0 : 1;
        op.outcome = op_outcome::ok;
        emit(op);
        op.family = lock_family::set_based;
        op.keys_named = 0;
      }
      acquire(op_outcome::ok);
      return;
    case value_condition::digest_equal:
    case value_condition::digest_not_equal:
      // The hold the key had ends (its holder's, the digest checked), `value` takes it.
      if (!wrote) return;
      op.kind = lock_op_kind::del;
      op.keys_named = 1;
      op.outcome = op_outcome::ok;
      emit(op);
      op.keys_named = 0;
      acquire(op_outcome::ok);
      return;
    case value_condition::none: return;
  }
}

}  // namespace lockscope::locks
