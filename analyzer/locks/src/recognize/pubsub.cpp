// Redisson's wake-up channels: (S)SUBSCRIBE and (S)UNSUBSCRIBE of lock channels, the
// `message`/`smessage` pushes delivered on them, and a `sunsubscribe` push that answers
// no command (the server dropping a shard channel whose slot moved). Each connection's
// subscribed lock channels are kept, so that a bare UNSUBSCRIBE or a RESET can report
// the channels it left without naming them. Keyspace notification channels, and the
// patterns (PSUBSCRIBE, `pmessage`) that deliver them, are handed to
// keyspace_notifications.cpp.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "recognize/lock_channels.hpp"
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

using resp::iequals;

void lock_recognizer::state::note_subscribed(std::uint64_t connection, std::string_view channel, bool sharded) {
  auto& list = channels[connection];
  for (const tracked_channel& c : list) {
    if (c.key_db < 0 && c.name == channel) return;
  }
  if (list.size() >= max_tracked_channels) list.erase(list.begin());
  tracked_channel& t = list.emplace_back();
  t.name = channel;
  t.sharded = sharded;
}

void lock_recognizer::state::note_unsubscribed(std::uint64_t connection, std::string_view channel) {
  const auto it = channels.find(connection);
  if (it == channels.end()) return;
  std::erase_if(it->second, [&](const tracked_channel& c) { return c.key_db < 0 && c.name == channel; });
  if (it->second.empty()) channels.erase(it);
}

std::vector<lock_recognizer::state::tracked_channel> lock_recognizer::state::take_channels(std::uint64_t connection,
                                                                                          left_channels which) {
  std::vector<tracked_channel> out;
  const auto it = channels.find(connection);
  if (it == channels.end()) return out;
  std::erase_if(it->second, [&](tracked_channel& c) {
    const bool taken = which == left_channels::all ||
                       (which == left_channels::patterns ? c.by_pattern
                                                         : !c.by_pattern && c.sharded == (which == left_channels::sharded));
    if (!taken) return false;
    out.push_back(std::move(c));
    return true;
  });
  if (it->second.empty()) channels.erase(it);
  return out;
}

void lock_recognizer::state::emit_left(lock_operation& op, const tracked_channel& t, std::int64_t sub_count) {
  op.kind = lock_op_kind::unsubscribe;
  op.outcome = op_outcome::ok;
  op.sub_count = sub_count;
  const std::int32_t connection_db = op.db;  // (a key notification's is its channel's)
  if (t.key_db >= 0) {
    op.channel = t.source;
    op.lock = t.name;
    op.db = t.key_db;
    op.by_notification = true;
    op.family = lock_family::unknown;
  } else {
    op.channel = t.name;
    op.lock = lock_of_channel(t.name);
    op.family = channel_family(t.name);
  }
  emit(op);
  op.by_notification = false;
  op.db = connection_db;
}

void lock_recognizer::state::on_push(const exchange& e, lock_operation& op) {
  if (e.reply == nullptr) return;
  const message& m = *e.reply;
  const std::size_t root = m.root();
  if (root == message::npos) return;
  std::array<std::string_view, 4> parts{};
  std::size_t k = 0;
  m.for_each_child(root, [&](const message_node& n) {
    if (k < parts.size()) parts[k] = m.text(n);
    ++k;
    return k < parts.size();
  });
  op.reply_us = e.request_us;
  if (iequals(parts[0], "sunsubscribe") && k >= 2 && is_lock_channel(parts[1])) {
    // Answering no SUNSUBSCRIBE: the server dropped the shard channel (its slot moved
    // to another node); the subscriber has to subscribe again on the new owner.
    op.kind = lock_op_kind::unsubscribe;
    op.server_dropped = true;
    op.channel = parts[1];
    op.lock = lock_of_channel(parts[1]);
    op.outcome = op_outcome::ok;
    op.family = channel_family(parts[1]);
    note_unsubscribed(e.connection, parts[1]);
    emit(op);
    return;
  }
  if (k >= 4 && iequals(parts[0], "pmessage")) {
    on_key_notification(e, op, parts[1], true, parts[2], parts[3]);
    return;
  }
  if (k >= 3 && parts[1].starts_with("__key") && iequals(parts[0], "message") &&
      on_key_notification(e, op, parts[1], false, parts[1], parts[2])) {
    return;
  }
  if ((iequals(parts[0], "message") || iequals(parts[0], "smessage")) && k >= 3 && is_lock_channel(parts[1])) {
    op.kind = lock_op_kind::message;
    op.channel = parts[1];
    op.lock = lock_of_channel(parts[1]);
    op.message = parts[2];
    op.outcome = op_outcome::ok;
    op.family = channel_family(parts[1]);
    note_subscribed(e.connection, parts[1], iequals(parts[0], "smessage"));  // maybe begun before the capture
    emit(op);
  }
}

void lock_recognizer::state::on_subscription(command_call& c) {
  const exchange& e = c.e;
  const auto& args = c.args;
  lock_operation& op = c.op;
  const bool sub = c.word == command_word::subscribe || c.word == command_word::ssubscribe;
  if ((sub || c.word == command_word::psubscribe) && args.size() < 2) {
    ++stats.skipped;
    warn(e, fmt::format("{} with no channel: skipped", args[0]));
    return;
  }
  if (c.word == command_word::psubscribe || c.word == command_word::punsubscribe) {
    on_pattern_subscription(c, sub || c.word == command_word::psubscribe);
    return;
  }
  op.kind = sub ? lock_op_kind::subscribe : lock_op_kind::unsubscribe;
  op.outcome = c.reply.kind == reply_view::shape::error ? op_outcome::error : op_outcome::ok;
  // The paired confirmation (["unsubscribe", channel, count], RESP2 array or RESP3
  // push) is the first channel's; the others' arrive as pushes of their own.
  std::string_view confirmed;
  std::int64_t count = -1;
  if (e.reply != nullptr && e.reply->root() != message::npos) {
    std::size_t k = 0;
    e.reply->for_each_child(e.reply->root(), [&](const message_node& n) {
      if (k == 1) confirmed = e.reply->text(n);
      if (k == 2 && n.type == resp::type::integer) count = n.integer;
      return ++k < 3;
    });
  }
  const bool sharded = c.word == command_word::ssubscribe || c.word == command_word::sunsubscribe;
  auto emit_channel = [&](std::string_view channel) {
    op.channel = channel;
    op.lock = lock_of_channel(channel);
    op.family = channel_family(channel);
    op.sub_count = channel == confirmed ? count : -1;
    emit(op);
  };
  if (!sub && args.size() == 1) {
    // No channel named: it left all it was subscribed to. The confirmation names the
    // first (the others' come as pushes); the rest are the ones seen subscribed.
    if (op.outcome != op_outcome::ok) return;
    if (!holders_by_connection.empty()) on_subscription_lock_left_all(c);
    std::vector<tracked_channel> left = take_channels(e.connection, sharded ? left_channels::sharded : left_channels::channels);
    if (is_lock_channel(confirmed) &&
        std::none_of(left.begin(), left.end(), [&](const tracked_channel& t) { return t.key_db < 0 && t.name == confirmed; })) {
      tracked_channel& t = left.emplace_back();
      t.name = confirmed;
      t.sharded = sharded;
    }
    for (const auto& t : left) {
      if (t.key_db >= 0) emit_left(op, t);
      else emit_channel(t.name);
    }
    return;
  }
  // A lock held by the subscription itself (subscription_locks.cpp): asked about with
  // PUBSUB NUMSUB first, so nothing to look up until some channel was.
  if (!subscription_locks.empty() && op.outcome == op_outcome::ok && !sharded) {
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (sub) on_subscription_lock_subscribe(c, args[i]);
      else on_subscription_lock_left(c, args[i]);
    }
  }
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (!sharded && args[i].starts_with("__key") && on_key_channel(c, sub, args[i], confirmed, count)) continue;
    if (!is_lock_channel(args[i])) continue;
    if (op.outcome == op_outcome::ok) {
      if (sub) note_subscribed(e.connection, args[i], sharded);
      else note_unsubscribed(e.connection, args[i]);
    }
    emit_channel(args[i]);
  }
}

}  // namespace lockscope::locks
