// Part of lock_timeline::impl (its data: timeline_state.hpp).
// The channel operations: SUBSCRIBE, a message, UNSUBSCRIBE on a lock's channel.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

// Joined mid-stream, a lock's own commands may come with their database unseen (counted
// as db 0 above): a keyspace notification of its key, which names its database, is that
// lock's when the connections holding or waiting for it had their database guessed.
inline std::uint32_t lock_timeline::impl::lock_of_guessed_db(const lock_operation& op) {
  const std::uint32_t db0 = canon(raw_scope(options.merge_servers ? std::string_view() : op.server_text, 0));
  const std::uint32_t id = find_lock(db0, op.lock);
  if (id == no_id) return no_id;
  lock_state& l = locks[id];
  bool guessed = false;
  for_each_holder(l, [&](const holder& h) { guessed = guessed || (h.conn != no_id && connections[h.conn].database_guessed); });
  if (!guessed && has_extra(l)) {
    for (const waiter& w : xp(l)->waiters) guessed = guessed || w.mid_stream;
  }
  return guessed ? id : no_id;
}

inline void lock_timeline::impl::on_subscribe(std::uint32_t id, const lock_operation& op) {
  lock_state& l = locks[id];
  const std::uint32_t conn = conn_index(op);
  connection_info& s = connections[conn];
  const std::int64_t at = op.at_us();
  if (has_extra(l)) {
    bool learnt = false;
    // Episode: one client had just failed when this connection subscribed, and no
    // other client nearly as recently.
    const std::uint16_t ip_tag = s.ip.tag();
    const waiter* latest = nullptr;
    lock_extra& x = *xp(l);
    // For a lock with many waiters, those of the subscriber's address, found by its tag
    // (the result is the same over them: a herd's SUBSCRIBE walked thousands).
    const auto each_of_address = [&](auto&& visit) {
      if (x.waiters.size() <= scanned_waiters) {
        for (const waiter& w : x.waiters) visit(w);
        return;
      }
      waiter_keys::sorted(keys_of(x).by_ip, ip_tag, address_seqs);
      for (const std::uint64_t seq : address_seqs) visit(*waiter_at(x, seq));
    };
    each_of_address([&](const waiter& w) {
      if (w.connection == s.id || w.last_attempt_us > op.request_us || w.ip_tag != ip_tag || !(connections[w.conn].ip == s.ip)) return;
      // Subscribed on another connection already (its own SUBSCRIBE, just before its
      // retry): a client listens on one subscription per channel, so this one is not
      // its; its retry must not teach this connection that it is.
      if (w.sub_connection != 0 && w.sub_connection != s.id && w.subscribed_us >= 0 && subscribed(w, id)) return;
      if (latest != nullptr && w.last_attempt_us <= latest->last_attempt_us) return;
      // Nor a client already listening to the channel on another connection by a sure link
      // (one waiter of it shares that subscription, not its own SUBSCRIBE): a client keeps
      // one subscription a channel, so this one is another client's, and the refused
      // attempt just before, its, is no episode (seen: a JVM's subscriber given for good to
      // the JVM that had just failed beside it, certain on its own subscriber, 65 events).
      // (Asked only of a later failure than the latest so far: a herd's SUBSCRIBE walks
      // thousands of waiters.)
      if (listens_elsewhere(w.client, s, id)) return;
      latest = &w;
    });
    if (latest != nullptr && op.request_us - latest->last_attempt_us <= options.wake_window_us) {
      const std::int64_t d1 = op.request_us - latest->last_attempt_us;
      // Another client's failure nearly as recent (nearer than 4 * d1 + 1 ms): no episode.
      // The first found decides; a herd's lock (thousands of waiters, none that recent)
      // looks only at its latest attempts when they reach back far enough.
      const std::int64_t reach = 4 * d1 + 1'000;
      const std::uint64_t latest_client = latest->client;
      const auto as_recent = [&](const waiter& w) {
        return w.client != latest_client && w.last_attempt_us <= op.request_us && op.request_us - w.last_attempt_us < reach;
      };
      bool other_as_recent = false;
      if (x.keys && x.keys->recent_holds_after(op.request_us - reach)) {
        for (const waiter_keys::attempt& a : x.keys->recent) {
          if (a.at_us > op.request_us - reach && a.at_us <= op.request_us) {
            const waiter* w = waiter_at(x, a.seq);
            if (w != nullptr && as_recent(*w)) {
              other_as_recent = true;
              break;
            }
          }
        }
      } else {
        other_as_recent = std::any_of(x.waiters.begin(), x.waiters.end(), as_recent);
      }
      if (!other_as_recent) {
        learn(s, latest->client);
        learnt = true;
      }
    }
    if (!learnt) learn_lone_refused(l, id, s, op.request_us);
  }
  const linked chosen = choose_waiter(l, id, s, at, op.request_us);
  std::uint32_t owner = no_id;
  std::uint64_t client = 0;
  if (chosen.w != nullptr) {
    owner = chosen.w->owner;
    client = chosen.w->client;
    // A connection is one process's: another client's waiters linked to it (an earlier
    // guess) are not, and must not stay excluded from their own client's SUBSCRIBE.
    lock_extra& x = *xp(l);
    auto unlink_other = [&](waiter& o) {
      if (o.client == client || o.sub_connection != s.id) return;
      set_sub_connection(x, o, 0);
      o.confidence = link_confidence::none;
      o.subscribed_us = -1;
    };
    if (chosen.confidence == link_confidence::certain) drop_guesses_elsewhere(l, id, s, client);
    if (x.waiters.size() <= scanned_waiters) {
      for (waiter& o : x.waiters) unlink_other(o);
    } else if (const auto* v = waiter_keys::of(keys_of(x).by_sub, s.id)) {
      // Those linked to it, found by key (a herd's SUBSCRIBE would walk thousands);
      // copied, as unlinking edits the key's list.
      woken_seqs.assign(v->begin(), v->end());
      for (const std::uint64_t seq : woken_seqs) {
        if (waiter* o = waiter_at(x, seq)) unlink_other(*o);
      }
    }
    link(l, id, *chosen.w, s, chosen.confidence, at);
  }
  // One subscription a channel and connection: a repeated SUBSCRIBE names its latest waiter.
  owners.retain(owner);
  if (auto* sub = record_of(s, id)) {
    // Already subscribed for a waiter of the same client that still waits: the channel
    // stays its (node-redisson's handlers run in subscription order).
    const waiter* earlier = sub->active && sub->owner != no_id ? find_waiter(l, sub->owner) : nullptr;
    if (earlier != nullptr && earlier->client == client) {
      owners.release(owner);
    } else {
      owners.release(sub->owner);
      put_subscription(conn, sub, {id, owner, client, chosen.confidence, true, at});
      note_guess(l, s, op, chosen);
    }
  } else {
    put_subscription(conn, nullptr, {id, owner, client, chosen.confidence, true, at});
    note_guess(l, s, op, chosen);
  }
  if (has_extra(l)) note_subscribe(*xp(l), s, op.request_us, at, chosen.w);
  lock_event e = from_op(l, op, lock_event_kind::subscribed);
  e.owner = owners.text(owner);
  e.confidence = chosen.confidence;
  emit_linked(l, e, s.id, owner == no_id);  // naming nobody: a later retry or leave may name it
  schedule(id);
}

// A keyspace notification (lock_operation::by_notification) reaches every subscriber of
// the key or of its database, waiting or not (an event channel's or a pattern's
// subscription is kept for good), and its process's next wait is another owner: it woke
// a waiter only when one waits on the key, linked to this subscriber (its SUBSCRIBE), or
// else the one client waiting from the subscriber's address; of those, the latest to
// attempt (an earlier one gave up unseen), and not one that let an earlier notification
// of this subscriber pass without retrying (it had stopped waiting). Nothing guessed, nor
// held for a later link. (`previous_us`: this subscriber's notification before, -1 none.)
inline waiter* lock_timeline::impl::notified_waiter(lock_state& l, std::uint32_t lock, const connection_info& s,
                                                    std::int64_t previous_us, std::int64_t at) {
  if (!has_extra(l)) return nullptr;
  lock_extra& x = *xp(l);
  const bool passed_one = previous_us >= 0 && at - previous_us > options.wake_window_us;
  waiter* on_it = nullptr;
  waiter* by_address = nullptr;
  bool clients_apart = false;
  const auto later = [](const waiter* a, const waiter& w) { return a == nullptr || w.last_attempt_us > a->last_attempt_us; };
  const auto consider = [&](waiter& w) {
    if (passed_one && previous_us > w.last_attempt_us) return;
    if (w.sub_connection == s.id) {
      if (later(on_it, w)) on_it = &w;
      return;
    }
    if (w.ip_tag != s.ip.tag() || !(connections[w.conn].ip == s.ip) || names_differ(s, connections[w.conn])) return;
    if (w.sub_connection != 0 && subscribed(w, lock)) return;  // listening on its own subscriber
    if (by_address != nullptr && by_address->client != w.client) clients_apart = true;
    if (later(by_address, w)) by_address = &w;
  };
  if (x.waiters.size() <= scanned_waiters) {
    for (waiter& w : x.waiters) consider(w);
  } else if (const auto* v = waiter_keys::of(keys_of(x).by_sub, s.id)) {  // a herd's: its linked ones only
    for (const std::uint64_t seq : *v) {
      if (waiter* w = waiter_at(x, seq)) consider(*w);
    }
  }
  if (on_it != nullptr) return on_it;
  return clients_apart ? nullptr : by_address;
}

inline void lock_timeline::impl::on_key_notification(std::uint32_t id, const lock_operation& op) {
  lock_state& l = locks[id];
  const std::uint32_t conn = conn_index(op);
  connection_info& s = connections[conn];
  const std::int64_t at = op.at_us();
  lock_extra& x = ex(l);
  note_wake(x, s.id, at, true);
  note_message(x, s, at);
  std::int64_t previous_us = -1;
  if (auto* sub = subscription_of(s, id)) {
    previous_us = sub->message_us;
    if (sub->unanswered < max_unanswered) ++sub->unanswered;
    sub->wakes_all = true;  // every subscriber is told, each free to retry
    sub->message_us = at;
  } else {  // its subscription begun before the capture, or an event channel's, a pattern's
    x.subscribed_unseen = true;
    put_subscription(conn, record_of(s, id), {id, no_id, 0, link_confidence::none, true, -1, 1, true, at});
  }
  waiter* woken = notified_waiter(l, id, s, previous_us, at);
  if (woken == nullptr) return;
  woken->notified = true;
  lock_event e = from_op(l, op, lock_event_kind::notified);
  e.owner = owners.text(woken->owner);
  e.confidence = confidence_of(s, woken->client, woken->sub_connection == s.id ? woken->confidence : link_confidence::low);
  emit(l, e);
}

inline void lock_timeline::impl::on_message(std::uint32_t id, const lock_operation& op) {
  if (op.by_notification) {
    on_key_notification(id, op);
    return;
  }
  lock_state& l = locks[id];
  const std::uint32_t conn = conn_index(op);
  connection_info& s = connections[conn];
  const std::int64_t at = op.at_us();
  lock_extra& x = ex(l);  // (its address stays: extras is a stable_vector)
  note_wake(x, s.id, at, true);
  note_message(x, s, at);
  // A subscription begun before the capture shows itself by its messages.
  auto* sub = subscription_of(s, id);
  if (sub == nullptr) {
    x.subscribed_unseen = true;
    const linked guess = choose_waiter(l, id, s, at, at);
    std::uint32_t owner = no_id;
    std::uint64_t client = 0;
    if (guess.w != nullptr && guess.confidence != link_confidence::low) {
      owner = guess.w->owner;
      client = guess.w->client;
      link(l, id, *guess.w, s, guess.confidence, at);
    }
    owners.retain(owner);
    put_subscription(conn, record_of(s, id), {id, owner, client, owner == no_id ? link_confidence::none : guess.confidence, true, -1, 1, false, at});
  } else {
    // A permit for one retry of its client (waiters.hpp, retry); Redisson's read unlock
    // (`1`) wakes every thread.
    if (sub->unanswered < max_unanswered) ++sub->unanswered;
    sub->wakes_all = op.message == "1";
    sub->message_us = at;
  }
  waiter* woken = nullptr;
  const std::uint64_t partner = best_partner(s);
  const bool established = partner != 0 && pairing_of(s, partner) == pairing::established;
  // Every waiter the message reaches is told; the one woken is the first preferred, in
  // the waiters' order: the earliest first attempt, then the earliest seq (whatever the
  // order of the visits, and a waiter visited twice is no other).
  auto reached = [&](waiter& w) {
    if (w.sub_connection != s.id && !(established && w.client == partner)) return;
    w.notified = true;
    const bool preferred = !established || w.client == partner;
    const bool best_preferred = woken != nullptr && (!established || woken->client == partner);
    if (woken == nullptr || (preferred && !best_preferred) ||
        (preferred == best_preferred &&
         (w.first_us < woken->first_us || (w.first_us == woken->first_us && w.seq < woken->seq)))) {
      woken = &w;
    }
  };
  if (x.waiters.size() <= scanned_waiters || s.id == 0) {
    for (waiter& w : x.waiters) reached(w);
  } else {
    // Those of its subscriber connection and of its established client, found by key
    // (a herd's publish reaches each of 200 subscribers: a scan of all 4,000 waiters
    // for each was half of the analysis), in the keys' order (reached() needs none).
    const waiter_keys& keys = keys_of(x);
    const auto reach_each = [&](const waiter_keys::seqs* v) {
      if (v == nullptr) return;
      for (const std::uint64_t seq : *v) {
        if (waiter* w = waiter_at(x, seq)) reached(*w);
      }
    };
    reach_each(waiter_keys::of(keys.by_sub, s.id));
    if (established) reach_each(waiter_keys::of(keys.by_client, partner));
  }
  if (woken == nullptr) {
    woken = partner_waiter(l, s);
    if (woken != nullptr) woken->notified = true;
  }
  bool by_elimination = false;
  if (woken == nullptr && sub != nullptr) {
    woken = last_candidate(l, id, s);
    by_elimination = woken != nullptr;
  }
  // A subscription that names nobody (begun before the capture, or its guess dropped
  // when its client was shown listening elsewhere): its process may be shown by its
  // leave (on_unsubscribe), for which its events wait.
  // (The record found above unless one was made for it: nothing since changed them.)
  const connection_info::subscription* current = sub != nullptr ? sub : subscription_of(s, id);
  const bool unknown = current != nullptr && current->owner == no_id;
  lock_event e = from_op(l, op, lock_event_kind::notified);
  e.owner = {};
  if (woken != nullptr) {
    e.owner = owners.text(woken->owner);
    // The waiter's own link counts only if it is to this connection (one found through
    // the episodes may be linked, even for certain, to its client's real subscriber).
    e.confidence = by_elimination ? link_confidence::low
                                  : confidence_of(s, woken->client, woken->sub_connection == s.id ? woken->confidence : link_confidence::low);
  }
  // The one client left for it now is the best guess for its events held so far too
  // (a connection is one process's).
  if (unknown && by_elimination && outgoing.waits_on(s.id, &l)) outgoing.suggest(s.id, &l, e.owner, e.confidence);
  emit_linked(l, e, s.id, unknown);
}

inline void lock_timeline::impl::on_unsubscribe(std::uint32_t id, const lock_operation& op) {
  lock_state& l = locks[id];
  const std::uint32_t conn = conn_index(op);
  connection_info& s = connections[conn];
  const std::int64_t at = op.at_us();
  auto* sub = subscription_of(s, id);
  // Clients send UNSUBSCRIBE for channels they are not subscribed to (answered with 0
  // subscriptions left, or seen leaving before): nothing happened.
  // (A fair lock's waiters have a channel each, all one lock here: leaving one says
  // nothing of the others.)
  const bool per_waiter_channel = !op.by_notification && !op.channel.empty() && op.channel.back() != '}';
  if (sub == nullptr && (op.sub_count == 0 || (!per_waiter_channel && record_of(s, id) != nullptr))) {
    // ...but a waiter that left unexplained waited on to here (left_again, waiter_moved_on.hpp).
    left_again(l, id, s, at);
    return;
  }
  // Episode: a client unsubscribes right after its waiter acquired (Redisson and
  // our client leave the channel once the wait is over).
  std::uint32_t leaver = no_id;  // the client that just acquired: no waiter any more
  std::uint64_t leaver_client = 0;
  std::uint64_t lone_acquirer = 0;  // the client a slower leave follows (learn_lone_acquirer)
  if (has_extra(l) && xp(l)->acquired_us >= 0 && op.request_us >= xp(l)->acquired_us &&
      op.request_us - xp(l)->acquired_us <= options.wake_window_us) {
    leaver_client = xp(l)->acquired_client;
    learn(s, leaver_client);
    leaver = xp(l)->acquired_owner;
    xp(l)->acquired_us = -1;  // one client leaves per acquisition
    xp(l)->waited_acquired_us = -1;
    owners.release(leaver);   // its text stays valid until the next collect()
    xp(l)->acquired_owner = no_id;
  } else if (has_extra(l)) {
    lone_acquirer = learn_lone_acquirer(l, id, s, sub, op.request_us);
    // A subscriber joined mid-stream whose subscription names nobody or a guess: the
    // acquirer's leave, within the reaction window (no episode learnt of it).
    if (lone_acquirer == 0 && s.opened_us < 0 && sub != nullptr &&
        (sub->owner == no_id || (sub->confidence == link_confidence::low && pairing_of(s, sub->client) != pairing::established))) {
      lone_acquirer = acquirer_leaving_unknown(l, id, s, op.request_us);
    }
    // node-redisson unsubscribes first, then retries: its next attempt is the reaction.
    if (!xp(l)->waiters.empty()) note_wake(*xp(l), s.id, at, false);
  }
  lock_event e = from_op(l, op, lock_event_kind::unsubscribed);
  e.owner = {};
  bool shown = sub == nullptr || leaver != no_id || lone_acquirer != 0;  // what the leave shows
  const bool unknown = sub != nullptr && sub->owner == no_id;  // begun before the capture, named by nothing yet
  if (sub != nullptr) {
    e.owner = owners.text(sub->owner);
    e.confidence = sub->owner == no_id ? link_confidence::none : confidence_of(s, sub->client, sub->confidence);
    if (sub->owner == no_id) {
      if (const waiter* w = partner_waiter(l, s)) {
        e.owner = owners.text(w->owner);
        e.confidence = confidence_of(s, w->client, link_confidence::low);
      } else if (leaver != no_id) {
        e.owner = owners.text(leaver);
        e.confidence = confidence_of(s, xp(l)->acquired_client, link_confidence::low);
      }
    }
    // The traffic has since established whose subscriber this is: name that client.
    const std::uint64_t partner = best_partner(s);
    if (partner != 0 && partner != sub->client && pairing_of(s, partner) == pairing::established && has_extra(l)) {
      for (const waiter& w : xp(l)->waiters) {
        if (w.client == partner) {
          e.owner = owners.text(w.owner);
          e.confidence = established_confidence(s, partner);
          shown = true;
          break;
        }
      }
    }
    // The subscription was only guessed to be another client's, while the client that
    // just acquired, its last waiter gone and listening nowhere else, leaves: a client
    // leaves its channel when its last waiter got the lock, so this is the acquirer's
    // leave (the guessed client, had it been its, would still wait, or would have left
    // already with its own acquisition).
    const std::uint64_t acquirer = leaver != no_id ? leaver_client : lone_acquirer;
    const bool guessed = sub->owner == no_id || ((sub->confidence == link_confidence::low || sub->confidence == link_confidence::none) &&
                                                 pairing_of(s, sub->client) != pairing::established);
    if (acquirer != 0 && sub->client != acquirer && guessed) {
      const std::uint32_t named = leaver != no_id ? leaver : holder_of_client(l, acquirer);
      e.owner = owners.text(named);
      e.confidence = named == no_id ? link_confidence::none : confidence_of(s, acquirer, link_confidence::low);
    } else if (leaver != no_id && sub->client == leaver_client) {
      e.owner = owners.text(leaver);  // the waiter that just acquired leaves the channel
    } else if (sub->owner != no_id &&
               (has_sibling(l, sub->owner, sub->client) || !explained_unsubscribe(l, s, *sub, op))) {
      e.confidence = link_confidence::low;
    }
    // Its own SUBSCRIBE's subscription, which no other waiter of its client shares, left
    // by the client's UNSUBSCRIBE (not the server's, for a moved slot): the waiter
    // surely left with it (continuing_waiter).
    const waiter* own = sub->owner != no_id && leaver == no_id && !op.server_dropped ? find_waiter(l, sub->owner) : nullptr;
    const std::uint32_t leaving = own != nullptr && own->sub_connection == s.id && own->subscribed_us >= 0 &&
                                          !has_sibling(l, sub->owner, sub->client)
                                      ? own->owner
                                      : no_id;
    // Whether a message or its timer explains the leave (else a later UNSUBSCRIBE may be
    // its own: left_again).
    const bool unexplained = leaving != no_id && !explained_unsubscribe(l, s, *sub, op);
    owners.release(sub->owner);  // freed by the next collect(): the view stays valid until then
    // Its waiters keep waiting, unsubscribed (those whose command connection ended leave).
    subscription_ended(id, s.id, at);
    if (waiter* w = leaving != no_id ? find_waiter(l, leaving) : nullptr) {
      w->left_channel = true;
      w->left_unexplained = unexplained;
    }
  }
  set_inactive(conn, id, at);
  // The subscription's end is the evidence its guessed events waited for: the process
  // that just acquired leaves its channel (named above); they go out naming it. A leave
  // that no acquisition explains shows nothing: its guessed events (and this one's guess)
  // wait on for a sure link of the connection later, or the bound (seen on Redisson
  // joined mid-run: JVMs that leave before their retry, their first second's guesses
  // settled wrong by their own leaves).
  if (shown || e.confidence == link_confidence::high || e.confidence == link_confidence::certain) {
    decide_link(l, s.id, e.owner, e.confidence);
  } else if (((unknown && e.owner.empty()) || (!e.owner.empty() && outgoing.waits_on(s.id, &l))) &&
             !(has_extra(l) && xp(l)->waiters.size() > scanned_waiters) && outgoing.hold(e, s.id, &l, sink)) {
    outgoing.outlive(s.id, &l);  // this leave's guess waits with theirs
    schedule(id);
    return;
  }
  emit(l, e);
  schedule(id);
}

}  // namespace lockscope::locks
