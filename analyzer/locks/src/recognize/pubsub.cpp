// Redisson's wake-up channels: (S)SUBSCRIBE and (S)UNSUBSCRIBE of lock channels, the
// `message`/`smessage` pushes delivered on them, and a `sunsubscribe` push that answers
// no command (the server dropping a shard channel whose slot moved). Each connection's
// subscribed lock channels are kept, so that a bare UNSUBSCRIBE or a RESET can report
// the channels it left without naming them.
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
    if (c.name == channel) return;
  }
  if (list.size() >= max_tracked_channels) list.erase(list.begin());
  list.push_back({std::string(channel), sharded});
}

void lock_recognizer::state::note_unsubscribed(std::uint64_t connection, std::string_view channel) {
  const auto it = channels.find(connection);
  if (it == channels.end()) return;
  std::erase_if(it->second, [&](const tracked_channel& c) { return c.name == channel; });
  if (it->second.empty()) channels.erase(it);
}

std::vector<lock_recognizer::state::tracked_channel> lock_recognizer::state::take_channels(std::uint64_t connection,
                                                                                          bool all, bool sharded) {
  std::vector<tracked_channel> out;
  const auto it = channels.find(connection);
  if (it == channels.end()) return out;
  std::erase_if(it->second, [&](tracked_channel& c) {
    if (!all && c.sharded != sharded) return false;
    out.push_back(std::move(c));
    return true;
  });
  if (it->second.empty()) channels.erase(it);
  return out;
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
  if (sub && args.size() < 2) {
    ++stats.skipped;
    warn(e, fmt::format("{} with no channel: skipped", args[0]));
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
    std::vector<tracked_channel> left = take_channels(e.connection, false, sharded);
    if (is_lock_channel(confirmed) &&
        std::none_of(left.begin(), left.end(), [&](const tracked_channel& t) { return t.name == confirmed; })) {
      left.push_back({std::string(confirmed), sharded});
    }
    for (const auto& t : left) emit_channel(t.name);
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
    if (!is_lock_channel(args[i])) continue;
    if (op.outcome == op_outcome::ok) {
      if (sub) note_subscribed(e.connection, args[i], sharded);
      else note_unsubscribed(e.connection, args[i]);
    }
    emit_channel(args[i]);
  }
}

}  // namespace lockscope::locks
