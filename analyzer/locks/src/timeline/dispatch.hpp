// Part of lock_timeline::impl (its data: timeline_state.hpp).
// An operation's way in (on_operation → handle → dispatch), and events out (the
// event's fields from its lock and operation, anomalies counted and sent).
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

inline lock_event lock_timeline::impl::base(const lock_state& l, std::int64_t ts) const {
  lock_event e;
  e.ts_us = ts;
  const lock_store::identity row = lock_store::identity_of(l);
  e.lock = row.name;
  const scope& sc = scopes[canon(row.scope)];
  e.lock_server = sc.label.empty() ? std::string_view(sc.server) : std::string_view(sc.label);
  e.db = sc.db;
  return e;
}

// The owner table's hash of e's owner, `owner` (its id: e.owner is its text), for the
// lock groups' keys (a try's set is keyed by its owner).
inline void lock_timeline::impl::give_owner_hash(lock_event& e, std::uint32_t owner) const noexcept {
  e.owner_hashed = e.owner.data();
  e.owner_hash = owners.hash(owner);
}

inline lock_event lock_timeline::impl::from_op(const lock_state& l, const lock_operation& op, lock_event_kind kind) const {
  lock_event e = base(l, op.at_us());
  e.event = kind;
  e.owner = op.owner;
  e.client = op.client_text;
  e.server = op.server_text;
  e.client_endpoint = op.client;
  e.server_endpoint = op.server;
  e.inferred = op.inferred;
  e.asking = op.asking;
  return e;
}

// A call the cluster did not run here: shown, and nothing changes (its retry, on the
// node named or after a pause, is the operation that counts).
inline void lock_timeline::impl::on_redirect(std::uint32_t id, const lock_operation& op) {
  lock_state& l = locks[id];
  lock_event e = from_op(l, op, lock_event_kind::redirected);
  e.redirect = op.redirect;
  e.slot = op.slot;
  e.redirect_to = op.redirect_to;
  e.operation = op.kind;
  emit(l, e);
  schedule(id);
}

inline void lock_timeline::impl::emit(lock_state& l, lock_event& e) {
  if (e.event == lock_event_kind::anomaly) ++ex(l).anomalies[static_cast<std::size_t>(e.kind)];
  if (withheld_ != anomaly_kind::none && (e.event == lock_event_kind::contended || e.event == lock_event_kind::acquired) &&
      e.owner == owners.text(withheld_owner_)) {
    e.link_not_certain = withheld_;
    withheld_ = anomaly_kind::none;
    owners.release(withheld_owner_);
    withheld_owner_ = no_id;
  }
  // A lock turning into a herd while guesses of it are held: they go with their guesses
  // now, not after the bound with a herd's events behind them (emit_linked).
  if (outgoing.undecided() > 0 && e.event == lock_event_kind::contended && has_extra(l) &&
      xp(l)->waiters.size() > scanned_waiters) {
    outgoing.settle_lock(&l);
  }
  outgoing.pass(e, sink);
}

// A subscriber event (subscribed, notified) on subscriber connection `sub` for lock `l`.
// A guess (`low`) waits for the traffic's decision (held_events.hpp); a sure link
// (high, certain) decides the guesses held for the same subscription: a connection is one
// process's. Not a herd's guesses (more waiters than a scan visits): every event behind a
// held one is copied while it waits, a cost paid on each of a herd's events, while its
// subscriptions seldom end within the bound (herd20: none in its 0.14 s, +11% instructions
// for nothing).
// `unknown`: the event names nobody on a subscription begun before the capture, whose
// process a later leave may show (on_unsubscribe): it waits too, and goes out unlinked
// past the bound.
inline void lock_timeline::impl::emit_linked(const lock_state& l, lock_event& e, std::uint64_t sub, bool unknown) {
  const bool herd = has_extra(l) && xp(l)->waiters.size() > scanned_waiters;
  if (herd) {
    outgoing.settle_lock(&l);  // those held before it became one go with their guesses
  } else if ((e.confidence == link_confidence::low && !e.owner.empty()) || (unknown && e.owner.empty())) {
    if (outgoing.hold(e, sub, &l, sink)) return;
  }
  if (e.confidence == link_confidence::high || e.confidence == link_confidence::certain) {
    decide_link(l, sub, e.owner, e.confidence);
  }
  outgoing.pass(e, sink);
}

// The traffic showed whose subscriber `sub` is (for lock `l`): the held guesses naming
// another process are named `owner` (an owner of the same client, another thread of that
// process, keeps its own).
inline void lock_timeline::impl::decide_link(const lock_state& l, std::uint64_t sub, std::string_view owner, link_confidence confidence) {
  if (!outgoing.waits_on(sub, &l)) return;
  outgoing.decide(sub, &l, owner, confidence, [this](std::string_view a, std::string_view b) {
    const std::string_view ca = client_part(a);
    return !ca.empty() && ca == client_part(b);
  });
}

// What the bound lets go by now (capture time).
inline void lock_timeline::impl::release_held() {
  if (!outgoing.empty()) outgoing.release(sink, now);
}

inline void lock_timeline::impl::anomaly(lock_state& l, std::int64_t ts, anomaly_kind kind, std::uint32_t owner, std::uint32_t conn, const anomaly_facts& found, bool inferred, std::int64_t interval_start, std::int64_t interval) {
  lock_event e = base(l, ts);
  e.event = lock_event_kind::anomaly;
  e.kind = kind;
  e.owner = owners.text(owner);
  name_connection(e, conn);
  e.found = found;
  e.inferred = inferred;
  e.interval_start_us = interval_start;
  e.interval_us = interval;
  emit(l, e);
}

inline void lock_timeline::impl::on_operation(const lock_operation& op) {
  if (capture_ending) [[unlikely]] capture_end_operation(op);  // (capture_end.hpp)
  if (first_op_us < 0) first_op_us = op.request_us;
  if (permits.next_deadline_us >= 0 && permits.next_deadline_us <= op.at_us()) [[unlikely]] expire_permits(op.at_us());
  if (forget_at != 0 && locks.size() >= forget_at) forget_idle_locks();
  handle(op, take_announced(op));
  release_held();
  collect();
}

inline void lock_timeline::impl::handle(const lock_operation& op, const announced* ann) {
  if (op.kind == lock_op_kind::cluster_link) {
    link_servers(op.server_text, op.redirect_to);
    return;
  }
  if (op.lock.empty()) return;
  const std::int64_t at = op.at_us();
  if (first < 0) first = op.request_us;
  // Plain commands only matter for keys already known as locks.
  std::uint32_t where = announced_scope(ann, op);
  if (where == no_id) where = scope_of(op);
  if (op.db < 0) where = scope_of_unknown_db(where, op.lock);
  const bool plain = op.kind == lock_op_kind::expire || op.kind == lock_op_kind::del;
  lock_slot slot;
  const std::uint32_t found = find_announced(ann, where, op.lock, slot);
  // A keyspace notification names any key of its database: only a lock's counts.
  std::uint32_t id = plain || op.by_notification ? found : lock_id(where, op.lock, found, slot);
  if (id == no_id && op.by_notification) [[unlikely]] id = lock_of_guessed_db(op);
  if (id == no_id) {
    advance(at);
    return;
  }
  if (permit_family(op.family)) [[unlikely]] {  // several holders by design: timeline/permits.hpp
    advance(at);
    on_permit_operation(id, op);
    return;
  }
  lock_state& l = locks[id];  // the row the handlers below are given
  const bool answered_by_key = op.reply_us > op.request_us &&
                               (op.outcome == op_outcome::ok || op.outcome == op_outcome::partial) &&
                               (plain || op.kind == lock_op_kind::renew || op.kind == lock_op_kind::unlock);
  const shielded_deadline shielded = answered_by_key ? shield_answering_holder(l, op, at, plain) : shielded_deadline{};
  advance(at);
  // (MultiLock/RedLock waits: group_waits.hpp; lock operations only once two servers were seen.)
  if (!plain && (op.kind == lock_op_kind::subscribe || op.kind == lock_op_kind::message ||
                 (scopes.size() >= 2 && (op.kind == lock_op_kind::acquire || op.kind == lock_op_kind::unlock)))) {
    group_thread_acted(canon(where), op);
  }
  dispatch(id, l, op, plain);
  if (shielded.owner != no_id) unshield(id, l, shielded, at);
}

[[gnu::always_inline]] inline void lock_timeline::impl::dispatch(std::uint32_t id, lock_state& l, const lock_operation& op, bool plain) {
  if (op.outcome == op_outcome::redirected) {
    on_redirect(id, op);
    return;
  }
  if (plain) {
    on_plain(id, l, op);
    return;
  }
  switch (op.kind) {
    case lock_op_kind::acquire: on_acquire(id, l, op); break;
    case lock_op_kind::unlock: on_unlock(id, l, op); break;
    case lock_op_kind::renew: on_renew(id, l, op); break;
    case lock_op_kind::force_unlock: on_force_unlock(id, l, op); break;
    case lock_op_kind::subscribe: on_subscribe(id, op); break;
    case lock_op_kind::unsubscribe: on_unsubscribe(id, op); break;
    case lock_op_kind::message: on_message(id, op); break;
    default: break;
  }
}

}  // namespace lockscope::locks
