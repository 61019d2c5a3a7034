// Locks held by a pub/sub subscription, not by a key: a client asks PUBSUB NUMSUB how
// many are subscribed to a channel, subscribes when none is, and holds the lock for as
// long as that subscription lives (portalocker's RedisLock). Nothing is written: the
// server's subscriber count is the lock, so it frees itself when the holder's
// connection dies, and there is no owner value, only the subscriber.
//
// Read by what the connections do, not by channel names:
//   - a channel some connection asked NUMSUB about becomes a candidate;
//   - a SUBSCRIBE to a candidate soon after a NUMSUB answered 0, from the same client
//     host, takes it (acquired); the candidate is a subscription lock from then on;
//   - on a subscription lock, a NUMSUB answered more than 0 from a connection that does
//     not hold it is a refused attempt, except the acquirer's own check right after
//     its SUBSCRIBE (answered 1, from the holder's host);
//   - the holder's UNSUBSCRIBE (of the channel or of all), its RESET or its connection's
//     end releases it; a NUMSUB answered 0 while a holder is known says it went unseen.
// The owner is the client host (its address without the port): the one identity such a
// client shows, as it opens a connection for each subscription and each check.
#include <algorithm>

#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

// "10.0.0.5:40001" → "10.0.0.5"; "[::1]:40001" → "[::1]".
std::string_view host_of(std::string_view endpoint) noexcept {
  const std::size_t colon = endpoint.rfind(':');
  return colon == std::string_view::npos ? endpoint : endpoint.substr(0, colon);
}

}  // namespace

lock_recognizer::state::subscription_lock* lock_recognizer::state::subscription_lock_of(std::string_view channel) {
  const auto it = subscription_locks.find(channel);
  return it == subscription_locks.end() ? nullptr : &it->second;
}

lock_recognizer::state::subscription_lock& lock_recognizer::state::subscription_candidate(std::string_view channel,
                                                                                        std::int64_t at) {
  if (subscription_lock* s = subscription_lock_of(channel)) return *s;
  if (subscription_locks.size() >= max_subscription_locks) {
    // Forget the candidate (or lock without a holder) least recently seen.
    auto oldest = subscription_locks.end();
    for (auto it = subscription_locks.begin(); it != subscription_locks.end(); ++it) {
      if (it->second.holder != 0) continue;
      if (oldest == subscription_locks.end() || it->second.seen_us < oldest->second.seen_us) oldest = it;
    }
    if (oldest != subscription_locks.end()) subscription_locks.erase(oldest);
  }
  subscription_lock& s = subscription_locks[std::string(channel)];
  s.seen_us = at;
  return s;
}

// (`op` a copy: the exchange's own operation goes on to its other handlers.)
void lock_recognizer::state::emit_subscription_op(std::string_view channel, lock_op_kind kind, op_outcome outcome,
                                                  lock_operation op) {
  op.kind = kind;
  op.outcome = outcome;
  op.family = lock_family::subscription;
  op.lock = channel;
  op.channel = channel;
  op.owner = host_of(op.client_text);
  op.lease_ms = -1;
  op.ttl_ms = -1;
  op.sub_count = -1;
  emit(op);
}

// PUBSUB NUMSUB channel [channel ...]: the reply pairs each channel with its count (an
// array in RESP2, a map in RESP3).
void lock_recognizer::state::on_pubsub(command_call& c) {
  const auto& a = c.args;
  if (a.size() < 3 || !resp::iequals(a[1], "NUMSUB")) return;
  if (c.reply.kind != reply_view::shape::array && c.reply.kind != reply_view::shape::other) return;
  const message* m = c.e.reply;
  if (m == nullptr || m->root() == message::npos) return;
  std::string_view channel;
  bool expect_count = false;
  const std::int64_t at = c.op.at_us();
  m->for_each_child(m->root(), [&](const message_node& n) {
    if (!expect_count) {
      channel = m->text(n);
      expect_count = true;
      return true;
    }
    expect_count = false;
    if (n.type != resp::type::integer || channel.empty()) return true;
    on_subscriber_count(c, channel, n.integer, at);
    return true;
  });
}

void lock_recognizer::state::on_subscriber_count(command_call& c, std::string_view channel, std::int64_t count,
                                                 std::int64_t at) {
  subscription_lock& s = subscription_candidate(channel, at);
  s.seen_us = at;
  const std::string_view host = host_of(c.op.client_text);
  if (count == 0) {
    if (s.holder != 0) {
      // Its holder left without a word the capture holds (a lost packet, a kill the
      // capture missed): free now, released as far as anyone can tell.
      release_subscription_lock(s, channel, holder_operation(s, at));
    }
    // (At most a few hosts race for it at once: the oldest finding is dropped first.)
    std::erase_if(s.found_free_by, [&](const auto& f) { return f.host == host || at - f.at_us > subscribe_after_free_us; });
    if (s.found_free_by.size() >= 8) s.found_free_by.erase(s.found_free_by.begin());
    s.found_free_by.push_back({std::string(host), at});
    return;
  }
  if (!s.is_lock || s.holder == c.e.connection) return;
  // The acquirer's own check that it is the only subscriber: its first NUMSUB after it
  // took the lock, from the host it took it from.
  if (s.holder != 0 && !s.holder_checked && count == 1 && host == host_of(s.holder_client)) {
    s.holder_checked = true;
    return;
  }
  emit_subscription_op(channel, lock_op_kind::acquire, op_outcome::contended, c.op);
}

// A confirmed SUBSCRIBE of `channel` on this connection: an acquisition when the channel
// was just found free from this host.
void lock_recognizer::state::on_subscription_lock_subscribe(command_call& c, std::string_view channel) {
  subscription_lock* s = subscription_lock_of(channel);
  if (s == nullptr) return;
  const std::int64_t at = c.op.at_us();
  const std::string_view host = host_of(c.op.client_text);
  const auto found = std::find_if(s->found_free_by.begin(), s->found_free_by.end(), [&](const auto& f) {
    return f.host == host && at - f.at_us <= subscribe_after_free_us;
  });
  if (found == s->found_free_by.end()) return;
  s->found_free_by.erase(found);
  s->seen_us = at;
  // Subscribed beside a holder (both found it free): its own count check answers 2 and
  // it lets go; that check is its refused attempt. Its subscription holds nothing.
  if (s->holder != 0) return;
  s->is_lock = true;
  s->holder = c.e.connection;
  s->holder_checked = false;
  s->holder_client.assign(c.op.client_text);
  s->holder_server.assign(c.op.server_text);
  s->holder_db = c.op.db;
  s->has_client_ep = c.op.client != nullptr;
  if (c.op.client != nullptr) s->holder_client_ep = *c.op.client;
  s->has_server_ep = c.op.server != nullptr;
  if (c.op.server != nullptr) s->holder_server_ep = *c.op.server;
  holders_by_connection[c.e.connection].emplace_back(channel);
  emit_subscription_op(channel, lock_op_kind::acquire, op_outcome::ok, c.op);
}

// The holder left the channel (UNSUBSCRIBE naming it, or all; RESET).
void lock_recognizer::state::on_subscription_lock_left(command_call& c, std::string_view channel) {
  subscription_lock* s = subscription_lock_of(channel);
  if (s == nullptr || s->holder != c.e.connection) return;
  release_subscription_lock(*s, channel, c.op);
}

void lock_recognizer::state::on_subscription_lock_left_all(command_call& c) { release_all_held_by(c.e.connection, &c.op, 0); }

// Every lock `connection` holds, released by `by` (its UNSUBSCRIBE or RESET) or, with
// none, at `at_us` in the holder's own name (its connection ended).
void lock_recognizer::state::release_all_held_by(std::uint64_t connection, const lock_operation* by, std::int64_t at_us) {
  const auto it = holders_by_connection.find(connection);
  if (it == holders_by_connection.end()) return;
  const std::vector<std::string> held = std::move(it->second);
  holders_by_connection.erase(it);
  for (const std::string& channel : held) {
    subscription_lock* s = subscription_lock_of(channel);
    if (s == nullptr || s->holder != connection) continue;
    release_subscription_lock(*s, channel, by != nullptr ? *by : holder_operation(*s, at_us));
  }
}

// An operation on the holder's connection at `at_us` (a release no command of its made).
lock_operation lock_recognizer::state::holder_operation(const subscription_lock& s, std::int64_t at_us) const {
  lock_operation op;
  op.connection = s.holder;
  op.db = s.holder_db;
  op.client_text = s.holder_client;
  op.server_text = s.holder_server;
  op.client = s.has_client_ep ? &s.holder_client_ep : nullptr;
  op.server = s.has_server_ep ? &s.holder_server_ep : nullptr;
  op.request_us = at_us;
  op.reply_us = at_us;
  return op;
}

void lock_recognizer::state::forget_holder(std::uint64_t connection, std::string_view channel) {
  const auto it = holders_by_connection.find(connection);
  if (it == holders_by_connection.end()) return;
  std::erase_if(it->second, [&](const std::string& held) { return held == channel; });
  if (it->second.empty()) holders_by_connection.erase(it);
}

void lock_recognizer::state::release_subscription_lock(subscription_lock& s, std::string_view channel, const lock_operation& op) {
  forget_holder(s.holder, channel);
  s.holder = 0;
  s.seen_us = op.at_us();
  emit_subscription_op(channel, lock_op_kind::unlock, op_outcome::ok, op);
}

// The holder's connection ended: the server dropped its subscription, and the lock.
void lock_recognizer::state::subscription_holder_ended(std::uint64_t connection, std::int64_t at_us) {
  release_all_held_by(connection, nullptr, at_us);
}

}  // namespace lockscope::locks
