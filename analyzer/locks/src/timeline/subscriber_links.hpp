// Part of lock_timeline::impl (its data: timeline_state.hpp).
// Subscriber links: which subscriber connection belongs to which client's waiter, from
// the life it shares with that process's command connections (its name, its opening
// beside theirs) and from episodes (one client alone reacting to a wake-up), and the
// choice of the waiter a SUBSCRIBE, message or UNSUBSCRIBE is about.
// Inline, included by lock_timeline.cpp: the per-operation path stays in one translation
// unit, inlined as when it was one struct (the default build has no LTO).
#pragma once

#include "timeline/timeline_state.hpp"
#include "timeline/waiter_moved_on.hpp"

namespace lockscope::locks {

// On a change of connection (conn_index): the name the connection gave itself, and the
// client its operations name (a name used by two clients ties nothing).
inline void lock_timeline::impl::note_connection_life(std::uint32_t conn, const lock_operation& op) {
  connection_info& c = connections[conn];
  if (!op.client_name.empty() && !ingest::same_bytes(texts.text(c.name), op.client_name)) {
    const std::uint32_t name = texts.id(op.client_name);
    texts.retain(name);
    texts.release(c.name);
    c.name = name;
    if (c.known_client != 0) c.known_client = 0;  // renamed: learnt again below
  }
  const bool names_client = !op.owner.empty() && op.kind != lock_op_kind::subscribe &&
                            op.kind != lock_op_kind::unsubscribe && op.kind != lock_op_kind::message &&
                            op.kind != lock_op_kind::cluster_link;
  if (c.known_client == 0 && names_client) {
    c.known_client = client_key_of(client_part(op.owner), c.id);
  }
  if (c.known_client == 0 || c.name == no_id) return;
  // (Again at each change of connection: an entry goes when a connection of its name is
  // freed, and another of the client's connections brings it back.)
  const std::string_view name = texts.text(c.name);
  if (const auto it = client_of_name.find(name); it != client_of_name.end()) {
    if (it->second != c.known_client) it->second = ambiguous_client;
  } else {
    client_of_name.emplace(std::string(name), c.known_client);
  }
}

// A subscriber named one way and a command connection another (neither a prefix of the
// other's ":sub" form): two processes, or two clients of one.
inline bool lock_timeline::impl::names_differ(const connection_info& s, const connection_info& command) const {
  if (s.name == no_id || command.name == no_id) return false;
  const std::string_view sub = texts.text(s.name), cmd = texts.text(command.name);
  if (sub == cmd) return false;
  return !(sub.size() == cmd.size() + 4 && sub.starts_with(cmd) && sub.ends_with(":sub"));
}

// The client whose life the subscriber shares: the one client whose command connections
// carry its name (lockscope's "NAME:sub" beside "NAME"; Redisson's clientName on all its
// connections), else the one client whose command connections from its address opened
// within opened_together_us of it. 0: none, or several.
inline auto lock_timeline::impl::tie_of(const connection_info& s, std::uint32_t lock) -> life_tie {
  if (s.name != no_id) {
    std::string_view name = texts.text(s.name);
    auto found = client_of_name.find(name);
    if (found == client_of_name.end() && name.ends_with(":sub")) {
      found = client_of_name.find(name.substr(0, name.size() - 4));
    }
    if (found != client_of_name.end() && found->second != ambiguous_client) return {found->second, true};
  }
  if (s.tied_client != 0) return {s.tied_client, false};
  if (s.opened_us < 0 || (s.opening_shared && lock == no_id)) return {};
  // The nearest opening of each client's: the nearest client's within opened_together_us,
  // every other client's at least opened_together_us farther (processes started nearly
  // together, their connections interleaved, are not told apart by this).
  // A connection whose client is not known yet (no lock operation on it so far, no
  // subscription) may be another process's: one as near counts as another client
  // (seen: a JVM starting while another filled its pool, its own command connection
  // 20 ms from its subscriber still unused when it subscribed).
  std::array<connection_info::opening_near, 4> near{};
  std::int64_t unknown_gap = -1;
  if (s.opening_shared) {
    near = s.near;
    unknown_gap = s.near_unknown_gap_us;
  } else {
    const auto end = opened_connections.upper_bound(s.opened_us + 2 * opened_together_us);
    for (auto o = opened_connections.lower_bound(s.opened_us - 2 * opened_together_us); o != end; ++o) {
      const connection_info& c = connections[o->second];
      if (c.id == s.id || !(c.ip == s.ip)) continue;
      const std::int64_t gap = o->first >= s.opened_us ? o->first - s.opened_us : s.opened_us - o->first;
      if (c.known_client == 0) {
        if (c.subscriptions.empty() && (unknown_gap < 0 || gap < unknown_gap)) unknown_gap = gap;
        continue;
      }
      connection_info::opening_near* slot = nullptr;
      for (auto& n : near) {
        if (n.client == c.known_client) {
          slot = &n;
          break;
        }
        if (n.client == 0 && slot == nullptr) slot = &n;
      }
      if (slot == nullptr) {  // more clients than kept: the farthest makes room
        for (auto& n : near) {
          if (slot == nullptr || n.gap_us > slot->gap_us) slot = &n;
        }
        if (slot->gap_us <= gap) continue;
        *slot = {};
      }
      if (slot->client == 0 || gap < slot->gap_us) *slot = {c.known_client, gap};
    }
  }
  // A client listening to the lock's channel on another subscriber, for certain, did not
  // open this one for it: a client keeps one subscription a channel.
  bool excluded_any = false;
  std::uint64_t best = 0;
  std::int64_t best_gap = -1, other_gap = -1;
  for (const auto& n : near) {
    if (n.client == 0) continue;
    if (lock != no_id && listens_elsewhere(n.client, s, lock, false)) {
      excluded_any = true;
      continue;
    }
    if (best == 0 || n.gap_us < best_gap) {
      if (best != 0) other_gap = other_gap < 0 ? best_gap : std::min(other_gap, best_gap);
      best = n.client;
      best_gap = n.gap_us;
    } else {
      other_gap = other_gap < 0 ? n.gap_us : std::min(other_gap, n.gap_us);
    }
  }
  if (best == 0 || best_gap > opened_together_us) return {};
  if (other_gap >= 0 && other_gap - best_gap < opened_together_us) {
    if (!s.opening_shared) {  // another known client's opening as near: for good
      s.opening_shared = true;
      s.near = near;
      s.near_unknown_gap_us = unknown_gap;
    }
    return {};
  }
  if (unknown_gap >= 0 && (other_gap < 0 || unknown_gap < other_gap)) other_gap = unknown_gap;
  if (other_gap >= 0 && other_gap - best_gap < opened_together_us) return {};
  if (excluded_any || s.opening_shared) s.tied_client = best;  // told apart by exclusion: for good
  return {best, false};
}

// The client listens to the lock's channel on another open connection than `s`: by a
// certain link (its own subscriber, tied by its life or its own connection), or with
// `any_confidence` by any link naming it.
inline bool lock_timeline::impl::listens_elsewhere(std::uint64_t client, const connection_info& s, std::uint32_t lock,
                                                   bool any_confidence) {
  const auto it = subscribers_by_client.find(client);
  if (it == subscribers_by_client.end()) return false;
  for (const std::uint32_t conn : it->second) {
    connection_info& c = connections[conn];
    if (!c.open || c.id == s.id) continue;
    const connection_info::subscription* sub = subscription_of(c, lock);
    if (sub != nullptr && sub->owner != no_id && sub->client == client &&
        (any_confidence || sub->confidence == link_confidence::certain)) {
      return true;
    }
  }
  return false;
}

// `client` subscribed to the lock's channel on `s`, linked for certain. A client keeps one
// subscription a channel, so its guessed subscriptions of that channel on other
// connections (low, or none: a guess by a lone candidate that the episodes did not
// establish) are not its: they name nobody again, its waiters linked to them are
// unlinked, and the events held for them lose the guess (seen on a capture joined
// mid-run: a subscriber whose SUBSCRIBE was guessed to be another JVM's 17 ms before
// that JVM's own subscriber subscribed, certain by its opening; 84 events named the
// wrong JVM).
inline void lock_timeline::impl::drop_guesses_elsewhere(lock_state& l, std::uint32_t lock, const connection_info& s, std::uint64_t client) {
  auto it = subscribers_by_client.find(client);
  if (it == subscribers_by_client.end() || !has_extra(l)) return;
  for (std::size_t i = 0; i < it->second.size();) {
    const std::uint32_t conn = it->second[i];
    connection_info& c = connections[conn];
    connection_info::subscription* sub = subscription_of(c, lock);
    if (!c.open || c.id == s.id || sub == nullptr || sub->owner == no_id || sub->client != client ||
        sub->confidence == link_confidence::certain || sub->confidence == link_confidence::high ||
        pairing_of(c, client) == pairing::established) {
      ++i;
      continue;
    }
    for (waiter& o : xp(l)->waiters) {
      if (o.client != client || o.sub_connection != c.id) continue;
      set_sub_connection(*xp(l), o, 0);
      o.confidence = link_confidence::none;
      o.subscribed_us = -1;
    }
    connection_info::subscription v = *sub;
    owners.release(v.owner);
    v.owner = no_id;
    v.client = 0;
    v.confidence = link_confidence::none;
    const std::size_t before = it->second.size();
    put_subscription(conn, sub, v);  // (leaves the client's list: `it` may be gone)
    outgoing.refute(c.id, &l, [&](std::string_view owner) {
      const std::string_view uuid = client_part(owner);
      if (!uuid.empty()) return client_key_of(uuid, 0) == client;
      for (const waiter& o : xp(l)->waiters) {
        if (o.client == client && owners.text(o.owner) == owner) return true;
      }
      return false;
    });
    const auto again = subscribers_by_client.find(client);
    if (again == subscribers_by_client.end()) return;
    it = again;
    if (it->second.size() == before) ++i;  // (not removed: a record of another lock names it)
  }
}

// An anomaly that blames pub/sub for this waiter (subscription_lost, woken_by_timeout)
// rests on its link: it is raised only when the link is certain.
inline bool lock_timeline::impl::link_certain(const waiter& w) {
  return w.sub_connection != 0 && (w.confidence == link_confidence::certain || w.sub_connection == w.connection);
}

// An anomaly resting on `w`'s link that its attempt would raise were the link certain:
// the attempt's event says so (lock_event::link_not_certain), the first one withheld.
inline void lock_timeline::impl::withhold(const waiter& w, anomaly_kind kind) {
  if (withheld_ != anomaly_kind::none && withheld_owner_ == w.owner) return;
  owners.retain(w.owner);
  owners.release(withheld_owner_);
  withheld_ = kind;
  withheld_owner_ = w.owner;
}

// The waiter's subscriber had subscribed to the lock's channel by `t` (or was seen only
// by its messages, its SUBSCRIBE before the capture).
inline bool lock_timeline::impl::subscribed_by(const waiter& w, std::uint32_t lock, std::int64_t t) {
  connection_info* s = open_connection(w.sub_connection);
  const connection_info::subscription* sub = s == nullptr ? nullptr : subscription_of(*s, lock);
  return sub != nullptr && sub->since_us <= t;
}

inline pairing lock_timeline::impl::pairing_of(const connection_info& s, std::uint64_t client) {
  std::uint32_t mine = 0, others = 0;
  for (const auto& p : s.partners) {
    if (p.episodes == 0) continue;
    if (p.client == client) mine = p.episodes;
    else others += p.episodes;
  }
  if (mine == 0 && others == 0) return pairing::none;
  if (mine >= certain_after && others * 8 <= mine) return pairing::established;
  if (others == 0) return pairing::consistent;
  return pairing::contradicted;
}

inline std::uint64_t lock_timeline::impl::best_partner(const connection_info& s) {
  const connection_info::partner* best = nullptr;
  for (const auto& p : s.partners) {
    if (p.episodes > 0 && (best == nullptr || p.episodes > best->episodes)) best = &p;
  }
  return best == nullptr ? 0 : best->client;
}

// One episode: `client` alone reacted to a wake-up of subscriber `s` (or alone had
// just failed when `s` subscribed).
inline void lock_timeline::impl::learn(connection_info& s, std::uint64_t client) {
  connection_info::partner* slot = nullptr;
  for (auto& p : s.partners) {
    if (p.episodes > 0 && p.client == client) slot = &p;
  }
  if (slot == nullptr) {
    for (auto& p : s.partners) {
      if (slot == nullptr || p.episodes < slot->episodes) slot = &p;
    }
    if (slot->episodes > 0) forget_subscriber(slot->client, s.id);
    *slot = {client, 0};  // the weakest evidence makes room
  }
  if (slot->episodes < 0xffffffffu) ++slot->episodes;
  if (best_partner(s) != client) return;
  // The client's subscriber is the connection with the most episodes for it.
  std::uint64_t& mapped = subscriber_of_client[client];
  if (mapped != s.id) {
    const connection_info* current = open_connection(mapped);
    if (current == nullptr || best_partner(*current) != client || episodes_of(*current, client) < slot->episodes) {
      mapped = s.id;
    }
  }
}

inline std::uint32_t lock_timeline::impl::episodes_of(const connection_info& s, std::uint64_t client) {
  for (const auto& p : s.partners) {
    if (p.episodes > 0 && p.client == client) return p.episodes;
  }
  return 0;
}

inline void lock_timeline::impl::forget_subscriber(std::uint64_t client, std::uint64_t sub) {
  const auto found = subscriber_of_client.find(client);
  if (found != subscriber_of_client.end() && found->second == sub) subscriber_of_client.erase(found);
}

// The client's episodes point to another open subscriber connection than `s`.
inline bool lock_timeline::impl::subscribes_elsewhere(std::uint64_t client, const connection_info& s) {
  const auto it = subscriber_of_client.find(client);
  if (it == subscriber_of_client.end() || it->second == s.id) return false;
  const connection_info* other = open_connection(it->second);
  return other != nullptr && best_partner(*other) == client && pairing_of(*other, client) != pairing::contradicted;
}

// The client listens to the lock's channel on another open connection than `s`, as far
// as its links (high or certain) or its established episodes tell (a few agreeing
// episodes are not enough: one wrong guess excluding its client would make the next
// SUBSCRIBE's lone candidate another wrong one): a client keeps one subscription a
// channel (Redisson's threads share it; a lockscope process has one), so a SUBSCRIBE or
// UNSUBSCRIBE of that channel on `s` is not its.
inline bool lock_timeline::impl::listens_elsewhere(std::uint64_t client, const connection_info& s, std::uint32_t lock) {
  if (const auto it = subscribers_by_client.find(client); it != subscribers_by_client.end()) {
    for (const std::uint32_t conn : it->second) {
      connection_info& c = connections[conn];
      if (!c.open || c.id == s.id) continue;
      const connection_info::subscription* sub = subscription_of(c, lock);
      if (sub == nullptr || sub->owner == no_id || sub->client != client) continue;
      if (sub->confidence == link_confidence::high || sub->confidence == link_confidence::certain) return true;
      if (pairing_of(c, client) == pairing::established) return true;
    }
  }
  const auto m = subscriber_of_client.find(client);
  if (m == subscriber_of_client.end() || m->second == s.id) return false;
  connection_info* other = open_connection(m->second);
  return other != nullptr && best_partner(*other) == client && pairing_of(*other, client) == pairing::established &&
         subscription_of(*other, lock) != nullptr;
}

// Episode, over a longer time than a reaction's: `s` SUBSCRIBEs while one client alone of
// its address was refused the lock within link_window_us before, and listens to its
// channel nowhere else. A client subscribes after a refusal (Redisson's JVM may take a
// few hundred ms to, warming up: seen 300-380 ms), so when no other client of the
// address was refused meanwhile, no other client can have sent it. Processes started
// together are told apart by this where their openings cannot.
inline void lock_timeline::impl::learn_lone_refused(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t request) {
  if (!has_extra(l)) return;
  const std::uint16_t ip_tag = s.ip.tag();
  std::uint64_t only = 0;
  bool excluded = false;
  lock_extra& x = *xp(l);
  // For a lock with many waiters, only those of the subscriber's address, found by its tag.
  const bool keyed = x.waiters.size() > scanned_waiters;
  if (keyed) waiter_keys::sorted(keys_of(x).by_ip, ip_tag, address_seqs);
  const std::size_t n = keyed ? address_seqs.size() : x.waiters.size();
  for (std::size_t i = 0; i < n; ++i) {
    const waiter& w = keyed ? *waiter_at(x, address_seqs[i]) : x.waiters[i];
    if (w.connection == s.id || w.last_attempt_us > request || request - w.last_attempt_us > options.link_window_us ||
        w.ip_tag != ip_tag || !(connections[w.conn].ip == s.ip)) {
      continue;
    }
    if (only != 0 && w.client != only) return;  // two clients could have sent it
    only = w.client;
    // A waiter of it linked to another subscription of the channel (a resubscription
    // after the server dropped it, as when a slot moves, follows no refusal), or
    // polling: the one client refused need not be the one subscribing.
    excluded = excluded || (w.sub_connection != 0 && w.sub_connection != s.id && subscribed(w, lock)) || polls(w);
  }
  if (only != 0 && !excluded && !listens_elsewhere(only, s, lock)) learn(s, only);
}

// Episode (its client, 0: none): `s` UNSUBSCRIBEs within slow_leave_us after the latest acquisition that ended
// a wait, the acquirer's client having no waiter left on the lock and listening to the
// channel nowhere else: a client leaves the channel when its last waiter got the lock,
// a warming JVM well after the reaction window (seen: 32-156 ms). Not when the
// subscription is known (high, certain, established) to be another client's that still
// waits: node-redisson's stale timers UNSUBSCRIBE while their own waiters wait on (a
// process's UNSUBSCRIBE beside another's acquisition taught the wrong client and cost
// true anomalies on captures/thirdparty/redisson.pcap when nothing below was checked).
inline std::uint64_t lock_timeline::impl::learn_lone_acquirer(lock_state& l, std::uint32_t lock, connection_info& s,
                                                              const connection_info::subscription* sub, std::int64_t request) {
  // Only where the subscriber's opening was seen and ties it to nobody (processes started
  // together): a subscriber joined mid-stream may be node-redisson's, whose stale timers
  // UNSUBSCRIBE beside other processes' acquisitions (captures/thirdparty/redisson.pcap:
  // 12 such, each a wrong episode), and its episodes alone would make it certain.
  if (!has_extra(l) || s.opened_us < 0 || tie_of(s).client != 0) return 0;
  lock_extra& x = *xp(l);
  if (x.waited_acquired_us < 0 || x.waited_acquired_us > request || request - x.waited_acquired_us > slow_leave_us ||
      x.waited_acquired_ip_tag != s.ip.tag()) {
    return 0;
  }
  const std::uint64_t client = x.waited_acquired_client;
  x.waited_acquired_us = -1;  // one client leaves per acquisition
  if (client == 0 || listens_elsewhere(client, s, lock)) return 0;
  const bool known_other = sub != nullptr && sub->owner != no_id && sub->client != client &&
                           (sub->confidence == link_confidence::high || sub->confidence == link_confidence::certain ||
                            pairing_of(s, sub->client) == pairing::established);
  for (const waiter& w : x.waiters) {
    if (w.client == client) return 0;  // it still waits: it keeps the channel
    if (known_other && w.client == sub->client) return 0;
  }
  learn(s, client);
  return client;
}

// A subscription begun before the capture (seen by its messages, naming nobody) leaves
// the channel: whose it is, `low` (its client, 0: none). A client leaves its channel when
// the wait of its last waiter ended, so a leave within the reaction window after an
// acquisition that ended a wait, from the acquirer's address, is the acquirer's when
// that client listens to the channel nowhere else and no waiter of it has waited since
// before the acquisition (one that began after it is a new wait: its SUBSCRIBE comes once
// this UNSUBSCRIBE is done). Its messages so far were held for this (emit_linked) and go
// out naming it. Only within unknown_leave_us (not slow_leave_us): node-redisson's
// stale timers UNSUBSCRIBE beside other processes' acquisitions, seldom that soon.
inline std::uint64_t lock_timeline::impl::acquirer_leaving_unknown(lock_state& l, std::uint32_t lock, connection_info& s,
                                                                   std::int64_t request) {
  if (!has_extra(l)) return 0;
  lock_extra& x = *xp(l);
  const std::int64_t acquired = x.waited_acquired_us;
  if (acquired < 0 || acquired > request || request - acquired > unknown_leave_us ||
      x.waited_acquired_ip_tag != s.ip.tag()) {
    return 0;
  }
  const std::uint64_t client = x.waited_acquired_client;
  if (client == 0 || listens_elsewhere(client, s, lock)) return 0;
  for (const waiter& w : x.waiters) {
    if (w.client == client && w.first_us < acquired) return 0;  // it still waits: it keeps the channel
  }
  x.waited_acquired_us = -1;  // one client leaves per acquisition
  return client;
}

// The owner holding the lock for `client` (no_id: none): the acquirer leaving its channel.
inline std::uint32_t lock_timeline::impl::holder_of_client(lock_state& l, std::uint64_t client) {
  std::uint32_t found = no_id;
  for_each_holder(l, [&](holder& h) {
    if (found == no_id && h.conn != no_id && client_key(h.owner, connections[h.conn].id) == client) found = h.owner;
  });
  return found;
}

// Whether the lock was seen in use from before the capture: a hold first seen by its
// renewal or release, a refusal while no holder was known, a subscription first seen at
// a message. Its waiters may then have tried only before the capture.
inline bool lock_timeline::impl::busy_before_capture(const lock_state& l) const {
  const lock_side* side = side_ptr(l);
  return (side != nullptr && side->holds_at_least) ||
         (has_extra(l) && (xp(l)->refused_unseen || xp(l)->subscribed_unseen));
}

// The confidence of naming `client`'s waiter for subscriber `s`; `guess` when the
// traffic has said nothing yet.
// Episodes alone (3 or more agreeing) are certain only where nothing is known of the
// subscriber's life (joined mid-stream, no name) or its life agrees: where its opening
// is known but shared with other processes', they are likely, not certain. No count of
// episodes makes them certain there: they are not independent draws (processes started
// together run the same code on one scheduler, and the one that reacts first once tends
// to again), so k agreeing episodes among n candidates do not bound a coincidence by
// n^-k; and an anomaly raised on a wrong certain link blames the wrong process (issue
// 42's false alarms). Such links stay `high`; what they withhold is said on the waiter's
// attempt (link_not_certain).
inline link_confidence lock_timeline::impl::established_confidence(const connection_info& s, std::uint64_t client) {
  if (s.opened_us < 0 && s.name == no_id) return link_confidence::certain;
  return tie_of(s).client == client ? link_confidence::certain : link_confidence::high;
}

inline link_confidence lock_timeline::impl::confidence_of(const connection_info& s, std::uint64_t client, link_confidence guess) {
  switch (pairing_of(s, client)) {
    case pairing::established: return established_confidence(s, client);
    // A few episodes that agree raise nothing: on a host with several processes one
    // may have reacted first by chance (seen: 5 of 139 events given to the wrong one).
    case pairing::consistent: return guess == link_confidence::none ? link_confidence::low : guess;
    case pairing::contradicted: return guess == link_confidence::certain ? guess : link_confidence::low;
    case pairing::none: break;
  }
  return guess;
}

// A wake-up (message) whose window has passed by `t` teaches who reacted alone, and
// frees its slot.
inline void lock_timeline::impl::settle_wake(wake& k, std::int64_t t) {
  if (k.at_us < 0 || t <= k.at_us + options.wake_window_us) return;
  // The first client, alone by a wide margin: the others were not reacting to it.
  const bool alone = k.other_delay_us < 0 || k.other_delay_us >= 4 * k.first_delay_us + 1'000;
  if (!k.fanout && k.first_client != 0 && alone) {
    if (connection_info* s = open_connection(k.sub)) learn(*s, k.first_client);
  }
  k = wake{};
}

// An attempt by `client` at `t` (request time): maybe a reaction to a wake-up before.
// (Each wake-up settled first, in one pass: settling one reads and changes only its own.)
inline void lock_timeline::impl::attribute_wakes(lock_extra& x, std::uint64_t client, std::int64_t t) {
  for (wake& k : x.wakes) {
    settle_wake(k, t);
    if (k.at_us < 0 || t < k.at_us) continue;
    if (k.first_client == 0) {
      k.first_client = client;
      k.first_delay_us = t - k.at_us;
    } else if (k.first_client != client && k.other_delay_us < 0) {
      k.other_delay_us = t - k.at_us;
    }
  }
}

// (One pass over the wake-ups: each settled, then asked, then weighed as the slot.)
inline void lock_timeline::impl::note_wake(lock_extra& x, std::uint64_t sub, std::int64_t at, bool message) {
  wake* slot = nullptr;
  bool fanout = false;
  for (wake& k : x.wakes) {
    settle_wake(k, at);
    // Messages on several subscribers at once: one publish fanned out. Also one that
    // came later on a loaded host (seen: 3.1 ms between two subscribers' copies of one
    // publish, the later one taken for a wake-up of its own and the first client to
    // react after it learnt as its partner) when no publishing release came between.
    if (message && k.at_us >= 0 && k.message && k.sub != sub &&
        (at - k.at_us <= 2'000 || (k.at_us >= x.published_us && at - k.at_us <= options.wake_window_us))) {
      k.fanout = fanout = true;
    }
    if (slot == nullptr || k.at_us < slot->at_us) slot = &k;  // a free slot (-1) or the oldest
  }
  *slot = wake{};
  slot->at_us = at;
  slot->sub = sub;
  slot->message = message;
  slot->fanout = fanout;
}

// A message reached the waiter's subscriber between its attempt's request and its reply:
// the server may have published it after it ran the attempt (replies on two connections
// are captured in no order the server guarantees: seen, a release's message 24 us before
// the refusal of an attempt the server had run before the release), so the waiter stays
// told for its next attempt (without this, a Redisson thread retrying 91 ms later, its
// TTL 30 s, was a false woken_by_timeout once its link was certain).
inline bool lock_timeline::impl::told_during(const lock_extra& x, const waiter& w, std::int64_t request, std::int64_t reply) {
  if (w.sub_connection == 0) return false;
  for (const wake& k : x.wakes) {
    if (k.message && k.sub == w.sub_connection && k.at_us >= request && k.at_us <= reply) return true;
  }
  return false;
}

// The waiter's attempt at `t` came right after a message on a subscriber that may be
// its client's.
inline bool lock_timeline::impl::woken_by_message(lock_extra& x, const waiter& w, std::int64_t t) {
  for (const wake& k : x.wakes) {
    if (!k.message || k.at_us < 0 || k.at_us < w.last_attempt_us || t < k.at_us || t - k.at_us > options.wake_window_us) continue;
    if (k.sub == w.sub_connection) return true;
    connection_info* s = open_connection(k.sub);
    if (s != nullptr && pairing_of(*s, w.client) != pairing::contradicted) return true;
  }
  return false;
}

inline void lock_timeline::impl::take_guessed_subscription(lock_state& l, std::uint32_t lock, waiter& w, std::int64_t t) {
  lock_extra& x = *xp(l);
  lock_extra::guessed_subscribe& g = x.guessed;
  if (t < g.confirmed_us) return;  // not yet confirmed: nobody's retry answers it
  if (t - g.confirmed_us > subscribe_retry_us || w.owner == g.owner) {
    g = {};  // too late for anyone, or the guessed waiter retried first: it stands
    return;
  }
  if (!w.pubsub || polls(w) || w.last_attempt_us > g.request_us || g.request_us - w.last_attempt_us > options.wake_window_us ||
      (w.sub_connection != 0 && w.sub_connection != g.sub && subscribed(w, lock))) {
    return;
  }
  const auto it = connection_ids.find(g.sub);
  if (it == connection_ids.end() || !connections[it->second].open) {
    g = {};
    return;
  }
  const std::uint32_t conn = it->second;
  connection_info& s = connections[conn];
  connection_info::subscription* sub = subscription_of(s, lock);
  if (!(connections[w.conn].ip == s.ip) || sub == nullptr || sub->owner != g.owner) {
    g = {};
    return;
  }
  // The traffic has shown w's client subscribing on another connection: not w's.
  if (subscribes_elsewhere(w.client, s)) return;
  const std::int64_t confirmed = g.confirmed_us;
  g = {};
  if (waiter* guessed = find_waiter(l, sub->owner)) {
    const std::uint64_t client = guessed->client;
    for (waiter& o : x.waiters) {
      if (o.client != client || o.sub_connection != s.id) continue;
      set_sub_connection(x, o, 0);
      o.confidence = link_confidence::none;
      o.subscribed_us = -1;
    }
  }
  link(l, lock, w, s, link_confidence::low, confirmed);
  owners.retain(w.owner);
  owners.release(sub->owner);
  put_subscription(conn, sub, {lock, w.owner, w.client, link_confidence::low, true});
}

// Every SUBSCRIBE of the lock's channel (whatever its link), for the retries after it.
inline void lock_timeline::impl::note_subscribe(lock_extra& x, const connection_info& s, std::int64_t request, std::int64_t confirmed,
                                                const waiter* chosen) {
  lock_extra::recent_subscribe* slot = nullptr;
  for (auto& r : x.recent_subscribes) {
    if (slot == nullptr || r.request_us < slot->request_us) slot = &r;  // a free slot (-1) or the oldest
  }
  if (slot->sub != 0) x.evicted_subscribe_us = std::max(x.evicted_subscribe_us, slot->request_us);
  *slot = {s.id, request, confirmed, chosen == nullptr ? -1 : chosen->last_attempt_us, chosen == nullptr ? 0 : chosen->client};
}

// Every message on the lock's channel, for the retries after it (a retry may answer one).
inline void lock_timeline::impl::note_message(lock_extra& x, const connection_info& s, std::int64_t at) {
  lock_extra::recent_message* slot = nullptr;
  for (auto& m : x.recent_messages) {
    if (slot == nullptr || m.at_us < slot->at_us) slot = &m;
  }
  if (slot->sub != 0) x.evicted_message_us = std::max(x.evicted_message_us, slot->at_us);
  *slot = {s.id, at};
}

// Whether a message reached a subscriber of the lock within the wake window before `at`.
inline bool lock_timeline::impl::message_just_before(const lock_extra& x, std::int64_t at) const {
  for (const auto& m : x.recent_messages) {
    if (m.sub != 0 && m.at_us <= at && at - m.at_us <= options.wake_window_us) return true;
  }
  return false;
}

// Subscriber `s` is known to be another client's than `client`: by its life, its
// established episodes, a retry that answered its SUBSCRIBE, or a sure link.
inline bool lock_timeline::impl::known_other_client(connection_info& s, std::uint32_t lock, std::uint64_t client) {
  const life_tie tie = tie_of(s);
  if (tie.client != 0) return tie.client != client;
  const std::uint64_t partner = best_partner(s);
  if (partner != 0 && pairing_of(s, partner) == pairing::established) return partner != client;
  if (s.retry_client != 0) return s.retry_client != client;
  const connection_info::subscription* sub = subscription_of(s, lock);
  return sub != nullptr && sub->owner != no_id && sub->client != client &&
         (sub->confidence == link_confidence::high || sub->confidence == link_confidence::certain);
}

// A client that listens to the channel nowhere does nothing for a refused waiter until
// its SUBSCRIBE is confirmed, then the waiter retries (Redisson's lock and tryLock: its
// subscribe future, then tryAcquire; its other threads refused meanwhile wait on that
// future too). So the waiter's first retry names the one SUBSCRIBE from its address
// sent after its refusal and confirmed before the retry that is not known to be another
// client's, however late each came (seen on a loaded host: SUBSCRIBEs 30-330 ms after
// the refusal, retries 26-70 ms after the confirmation, when the latest failure before a
// SUBSCRIBE named the wrong JVM: 25 events of a capture joined mid-run). Not when two
// such SUBSCRIBEs could be its; nor when a message came since its refusal on a
// subscription of its address not known to be another client's (a client subscribed
// before the capture retries on its messages); nor when the SUBSCRIBE was linked to
// another client's waiter that failed before this one (the evidence preferred it: seen,
// node-redisson retrying at once after its first failure, beside another process's
// SUBSCRIBE); nor for a waiter surely linked elsewhere.
// The subscription becomes the waiter's client's (`low`: an inference from timing), its
// held events name it, the client's guesses on other subscriptions of the channel are
// dropped (it keeps one), and the connection remembers the client (retry_client) for
// its later SUBSCRIBEs: a connection is one process's.
inline void lock_timeline::impl::take_subscription_by_retry(lock_state& l, std::uint32_t lock, waiter& w, std::int64_t t) {
  lock_extra& x = *xp(l);
  if (w.attempts != 1 || !w.pubsub || polls(w) || x.waiters.size() > scanned_waiters ||
      x.evicted_subscribe_us > w.last_attempt_us) {
    return;
  }
  const address& ip = connections[w.conn].ip;
  if (x.evicted_message_us > w.last_attempt_us) return;
  std::uint32_t only = no_id;
  for (const auto& r : x.recent_subscribes) {
    if (r.sub == 0 || r.request_us <= w.last_attempt_us || r.confirmed_us > t || r.confirmed_us < r.request_us ||
        r.request_us - w.last_attempt_us > options.link_window_us || t - r.confirmed_us > options.link_window_us) {
      continue;
    }
    const auto it = connection_ids.find(r.sub);
    if (it == connection_ids.end()) return;  // gone: whose it was cannot be told
    connection_info& c = connections[it->second];
    // Left since (or subscribed again: the later SUBSCRIBE stands for it): a client keeps
    // its subscription while a waiter of it waits.
    const connection_info::subscription* now_sub = subscription_of(c, lock);
    if (!c.open || now_sub == nullptr || now_sub->since_us != r.confirmed_us) continue;
    if (!(c.ip == ip) || known_other_client(c, lock, w.client)) continue;
    // Linked, when sent, to another client's waiter that failed before w did: the
    // evidence preferred it to the latest failure (or w was no candidate): undecided.
    if (c.retry_client != w.client && r.linked_client != 0 && r.linked_client != w.client &&
        r.linked_failure_us < w.last_attempt_us) {
      return;
    }
    if (only != no_id && only != it->second) return;  // two could be its client's
    only = it->second;
  }
  if (only == no_id) return;
  for (const auto& m : x.recent_messages) {
    if (m.sub == 0 || m.at_us <= w.last_attempt_us || m.at_us > t || m.sub == connections[only].id) continue;
    const auto it = connection_ids.find(m.sub);
    if (it == connection_ids.end()) return;
    connection_info& c = connections[it->second];
    if (c.ip == ip && !known_other_client(c, lock, w.client)) return;  // it may answer that message
  }
  connection_info& s = connections[only];
  connection_info::subscription* sub = subscription_of(s, lock);
  if (!s.open || sub == nullptr || names_differ(s, connections[w.conn])) return;
  // Surely linked to another live subscription: that one is its. (A guess gives way.)
  if (w.sub_connection != 0 && w.sub_connection != s.id && subscribed(w, lock) &&
      (w.confidence == link_confidence::high || w.confidence == link_confidence::certain)) {
    return;
  }
  if (s.retry_client == 0) s.retry_client = w.client;
  if (x.guessed.sub == s.id) x.guessed = {};
  // A client keeps one subscription a channel: its guesses elsewhere are not its.
  drop_guesses_elsewhere(l, lock, s, w.client);
  sub = subscription_of(s, lock);
  if (sub == nullptr || (sub->owner != no_id && sub->client == w.client)) return;  // the guess stands
  if (sub->confidence == link_confidence::high || sub->confidence == link_confidence::certain ||
      (sub->owner != no_id && pairing_of(s, sub->client) == pairing::established)) {
    return;
  }
  if (sub->owner != no_id) {
    const std::uint64_t guessed = sub->client;
    for (waiter& o : x.waiters) {
      if (o.client != guessed || o.sub_connection != s.id) continue;
      set_sub_connection(x, o, 0);
      o.confidence = link_confidence::none;
      o.subscribed_us = -1;
    }
  }
  link(l, lock, w, s, link_confidence::low, sub->since_us);
  connection_info::subscription v = *sub;
  owners.retain(w.owner);
  owners.release(v.owner);
  v.owner = w.owner;
  v.client = w.client;
  v.confidence = link_confidence::low;
  put_subscription(only, sub, v);
  // Its held events: those naming another process lose that guess; all name w's client.
  const std::string_view mine = owners.text(w.owner);
  const std::string_view uuid = client_part(mine);
  outgoing.refute(s.id, &l, [&](std::string_view owner) { return uuid.empty() ? owner != mine : client_part(owner) != uuid; });
  outgoing.suggest(s.id, &l, mine, link_confidence::low);
}

// A new waiter whose client already has a subscription on the lock's channel shares
// it: Redisson shares one subscription among a client's threads.
// The first such connection in table order, as a walk of the table would find.
inline void lock_timeline::impl::link_existing_subscription(std::uint32_t lock, waiter& w) {
  const auto it = subscribers_by_client.find(w.client);
  if (it == subscribers_by_client.end()) return;
  std::uint32_t found = no_id;
  link_confidence shared = link_confidence::none;  // the subscription's own link
  for (const std::uint32_t conn : it->second) {
    const connection_info& c = connections[conn];
    if (!c.open || conn >= found) continue;
    for (const auto& sub : c.subscriptions) {
      if (sub.lock == lock && sub.owner != no_id && sub.client == w.client) {
        found = conn;
        shared = sub.confidence;
        break;
      }
    }
  }
  if (found == no_id) return;
  if (shared == link_confidence::none) shared = link_confidence::low;
  const connection_info& c = connections[found];
  w.sub_connection = c.id;
  // As sure as the subscription's own link (a guess stays a guess for the client's
  // next waiter), unless its life ties it to the client.
  w.confidence = c.id == w.connection || tie_of(c).client == w.client ? link_confidence::certain
                                                                       : confidence_of(c, w.client, shared);
}

// Links `w` to subscriber `s` (and its client's other waiters, which share it).
inline void lock_timeline::impl::link(lock_state& l, std::uint32_t lock, waiter& w, connection_info& s, link_confidence conf, std::int64_t at) {
  lock_extra& x = *xp(l);
  const auto visit = [&](waiter& o) {
    if (&o != &w && o.client != w.client) return;
    if (&o != &w && o.sub_connection != 0 && o.sub_connection != s.id && subscribed(o, lock)) return;
    if (&o != &w && left_waiter(o)) return;  // it left the channel after its last attempt (waiter_moved_on.hpp)
    set_sub_connection(x, o, s.id);
    o.confidence = conf;
    o.unsubscribed_us = -1;
    o.left_channel = false;
    o.left_unexplained = false;
    if (&o == &w) o.subscribed_us = at;  // its own SUBSCRIBE: its next attempt is no timer's
  };
  if (x.waiters.size() > scanned_waiters) {  // w and its client's others, found by key, in the waiters' order
    waiter_keys::sorted(keys_of(x).by_client, w.client, keyed_seqs);
    if (!std::binary_search(keyed_seqs.begin(), keyed_seqs.end(), w.seq)) {
      keyed_seqs.insert(std::lower_bound(keyed_seqs.begin(), keyed_seqs.end(), w.seq), w.seq);
    }
    for (const std::uint64_t seq : keyed_seqs) {
      if (waiter* o = waiter_at(x, seq)) visit(*o);
    }
    return;
  }
  for (waiter& o : x.waiters) visit(o);
}

inline auto lock_timeline::impl::choose_waiter(lock_state& l, std::uint32_t lock, connection_info& s, std::int64_t at, std::int64_t request) -> linked {
  linked r;
  if (!has_extra(l)) return r;
  // The latest failure before the request (an attempt answered after it cannot have
  // caused it): among a client's waiters, the one that subscribes.
  auto distance = [&](const waiter& o) {
    return o.last_attempt_us <= request ? request - o.last_attempt_us : options.link_window_us + o.last_attempt_us - request;
  };
  // For a lock with many waiters, those of one connection or client are found by key, in
  // the waiters' order (a herd's SUBSCRIBE walked thousands); a waiter on the
  // subscriber's own connection is its (RESP3), the first one, before all else.
  lock_extra& x = *xp(l);
  const bool keyed = x.waiters.size() > scanned_waiters;
  // The waiters of `client`, each given to `visit`, in the waiters' order.
  const auto client_waiters = [&](std::uint64_t client, auto&& visit) {
    waiter_keys::sorted(keys_of(x).by_client, client, keyed_seqs);
    for (const std::uint64_t seq : keyed_seqs) {
      if (waiter* w = waiter_at(x, seq)) visit(*w);
    }
  };
  // The process whose life the subscriber shares: its waiter, certain unless the
  // episodes point elsewhere (an opening beside another's is a coincidence then).
  const life_tie tie = tie_of(s, lock);
  if (keyed) {
    if (const auto it = connection_ids.find(s.id); it != connection_ids.end()) {
      if (waiter* own = first_on_conn(x, it->second)) return {own, link_confidence::certain};
    }
  }
  if (tie.client != 0) {
    const auto nearest = [&](waiter& w) {
      if (w.client == tie.client && (r.w == nullptr || distance(w) < distance(*r.w))) r.w = &w;
    };
    if (keyed) {
      client_waiters(tie.client, nearest);
    } else {
      for (waiter& w : x.waiters) {
        if (w.connection == s.id) return {&w, link_confidence::certain};
        nearest(w);
      }
    }
    if (r.w != nullptr) {
      r.confidence = tie.by_name || pairing_of(s, tie.client) != pairing::contradicted ? link_confidence::certain
                                                                                        : link_confidence::low;
      return r;
    }
  }
  const std::uint64_t partner = best_partner(s);
  const bool established = partner != 0 && pairing_of(s, partner) == pairing::established;
  const std::uint16_t ip_tag = s.ip.tag();
  int candidates = 0;
  bool uncertain = false;
  const auto nearest_of_partner = [&](waiter& w) {
    if (w.client == partner && (r.w == nullptr || distance(w) < distance(*r.w))) r.w = &w;
  };
  // Keyed: the partner's waiters, or those of the subscriber's address.
  std::size_t n = x.waiters.size();
  if (established && keyed) {
    client_waiters(partner, nearest_of_partner);
    n = 0;
  } else if (keyed) {
    waiter_keys::sorted(keys_of(x).by_ip, ip_tag, address_seqs);
    n = address_seqs.size();
  }
  for (std::size_t i = 0; i < n; ++i) {
    waiter& w = keyed ? *waiter_at(x, address_seqs[i]) : x.waiters[i];
    if (w.connection == s.id) return {&w, link_confidence::certain};
    if (established) {
      nearest_of_partner(w);
      continue;
    }
    // The time first: the address is another table's row.
    if (at - w.last_attempt_us > options.link_window_us || w.ip_tag != ip_tag || !(connections[w.conn].ip == s.ip)) continue;
    // Named apart from the subscriber: another process (or client) than its own.
    if (names_differ(s, connections[w.conn])) continue;
    // A poller (three attempts or more, never subscribed nor linked, far more often than
    // its TTL) listens to no channel: a subscription seen from its address is another
    // client's, one whose waiter may be unseen (subscribed before the capture).
    if (polls(w)) continue;
    // Waiting with a live subscription elsewhere: not this one's (if that link is
    // itself only a guess, this one cannot be sure either).
    if (w.sub_connection != 0 && w.sub_connection != s.id && subscribed(w, lock) &&
        !(partner != 0 && w.client == partner)) {
      if (w.confidence == link_confidence::low) uncertain = true;
      continue;
    }
    // Nothing known of the subscriber's life (joined mid-stream, no name): a client
    // already named by another open subscription of the channel, even by a guess, is not
    // offered a second one (it keeps one a channel); the guess among the rest stays low.
    // (Seen on a loaded host joined mid-run: one JVM guessed on three subscribers at once.)
    if (s.opened_us < 0 && s.name == no_id && listens_elsewhere(w.client, s, lock, true)) {
      uncertain = true;
      continue;
    }
    ++candidates;
    // The client the evidence points to; else the latest failure before the request.
    // (The client whose first retry answered an earlier SUBSCRIBE on this connection next.)
    auto rank = [&](const waiter& o) {
      return partner != 0 && o.client == partner ? 3 : s.retry_client != 0 && o.client == s.retry_client ? 2 : subscribes_elsewhere(o.client, s) ? 0 : 1;
    };
    const int preferred = rank(w);
    const int best_preferred = r.w == nullptr ? -1 : rank(*r.w);
    if (r.w == nullptr || preferred > best_preferred || (preferred == best_preferred && distance(w) < distance(*r.w))) {
      r.w = &w;
    }
  }
  if (r.w == nullptr) return r;
  if (established) {
    r.confidence = established_confidence(s, partner);
  } else {
    r.confidence = confidence_of(s, r.w->client, candidates == 1 && !uncertain ? link_confidence::high : link_confidence::low);
    if (subscribes_elsewhere(r.w->client, s)) r.confidence = link_confidence::low;  // the traffic says otherwise
    // A guess among several waiters stays low however consistent the few episodes.
    if (candidates > 1 && r.confidence == link_confidence::high && r.w->client != partner) r.confidence = link_confidence::low;
  }
  // The client may be sure while its waiter is not: another waiter of that client
  // failed nearly as recently (e.g. two attempts in one pipeline).
  const auto as_recent = [&](const waiter& o) {
    if (&o != r.w && o.client == r.w->client && distance(o) < 4 * distance(*r.w) + 1'000) {
      r.confidence = link_confidence::low;
    }
  };
  if (keyed) {
    client_waiters(r.w->client, as_recent);
  } else {
    for (const waiter& o : x.waiters) as_recent(o);
  }
  // Its life ties the subscriber to a client with no waiter here: this guess goes
  // against it.
  if (tie.client != 0 && r.w->client != tie.client) r.confidence = link_confidence::low;
  // On a lock already busy when the capture began, its first link window shows only the
  // waiters that happened to try in it: one candidate then is the one seen, not the one
  // there is, for a subscriber that was already open (seen: JVMs' subscribers given at
  // `high` to another JVM's waiter 5-7 ms after the start, 31 wrong events after one).
  if (r.confidence == link_confidence::high && s.opened_us < 0 && options.capture_start_us >= 0 &&
      at - options.capture_start_us < options.link_window_us && busy_before_capture(l)) {
    r.confidence = link_confidence::low;
  }
  // Another process waits from the same address: the one candidate in the window is
  // only the likelier (seen: three `lockscope lock` waiters on one host, a subscriber
  // given to the wrong one at `high` in 16 of 139 events).
  if (r.confidence == link_confidence::high) {
    const auto other_process = [&](const waiter& o) { return o.client != r.w->client && o.ip_tag == ip_tag && connections[o.conn].ip == s.ip; };
    if (keyed) {
      waiter_keys::sorted(keys_of(x).by_ip, ip_tag, address_seqs);
      for (const std::uint64_t seq : address_seqs) {
        if (other_process(*waiter_at(x, seq))) {
          r.confidence = link_confidence::low;
          break;
        }
      }
    } else if (std::any_of(x.waiters.begin(), x.waiters.end(), other_process)) {
      r.confidence = link_confidence::low;
    }
  }
  return r;
}

// An UNSUBSCRIBE follows a message on the connection (the woken waiter leaves), or
// comes when the named waiter's wait for a message ends (its TTL since its latest
// attempt): else it may be a stale timer of a waiter long gone (node-redisson).
inline bool lock_timeline::impl::explained_unsubscribe(lock_state& l, const connection_info& s, const connection_info::subscription& sub, const lock_operation& op) {
  if (!has_extra(l)) return false;
  for (const wake& k : xp(l)->wakes) {
    if (k.message && k.sub == s.id && k.at_us <= op.request_us && op.request_us - k.at_us <= options.wake_window_us) {
      return true;
    }
  }
  const waiter* w = find_waiter(l, sub.owner);
  if (w == nullptr || w->last_ttl_us < 0) return false;
  const std::int64_t due = w->last_attempt_us + w->last_ttl_us;
  const std::int64_t slack = std::max(options.wake_window_us, w->last_ttl_us / 20);
  return op.request_us >= due - slack && op.request_us <= due + slack;
}

// The waiter of the client the subscriber's episodes point to (not contradicted).
inline waiter* lock_timeline::impl::partner_waiter(lock_state& l, const connection_info& s) {
  const std::uint64_t partner = best_partner(s);
  if (partner == 0 || !has_extra(l) || pairing_of(s, partner) == pairing::contradicted) return nullptr;
  waiter* found = nullptr;
  for (waiter& w : xp(l)->waiters) {
    if (w.client == partner && (found == nullptr || w.first_us < found->first_us)) found = &w;
  }
  return found;
}

// The one client left that can own subscriber `s`: among the waiters from its address
// (a few: a herd's are not walked), those listening on another subscription of the
// channel, polling, or named apart are excluded; when one client is left, its earliest
// waiter (nullptr otherwise). A guess by elimination, named `low`: for a message whose
// subscription names no waiter any more (its guessed client acquired and left).
inline waiter* lock_timeline::impl::last_candidate(lock_state& l, std::uint32_t lock, const connection_info& s) {
  if (!has_extra(l) || xp(l)->waiters.size() > scanned_waiters) return nullptr;
  waiter* found = nullptr;
  const std::uint16_t ip_tag = s.ip.tag();
  for (waiter& w : xp(l)->waiters) {
    if (w.ip_tag != ip_tag || !(connections[w.conn].ip == s.ip) || names_differ(s, connections[w.conn])) continue;
    if (w.sub_connection != 0 && w.sub_connection != s.id && subscribed(w, lock)) continue;
    if (found != nullptr && found->client != w.client) return nullptr;  // two clients left
    if (found == nullptr || w.first_us < found->first_us) found = &w;
  }
  return found;
}

// A subscription given to a guessed waiter may be taken by the waiter that retries
// right after its confirmation (take_guessed_subscription).
inline void lock_timeline::impl::note_guess(lock_state& l, const connection_info& s, const lock_operation& op, const linked& chosen) {
  if (!has_extra(l)) return;
  if (chosen.w != nullptr && chosen.confidence == link_confidence::low) {
    xp(l)->guessed = {s.id, op.request_us, op.at_us(), chosen.w->owner};
  } else {
    xp(l)->guessed = {};
  }
}

}  // namespace lockscope::locks
