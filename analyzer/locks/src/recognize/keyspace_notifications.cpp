// Waiters woken by Redis keyspace notifications, not by a channel their lock client
// publishes to: a subscription to a key's channel (`__keyspace@<db>__:<key>`), to an
// event's channel for every key of a database (`__keyevent@<db>__:del`, the payload the
// key), or to a pattern matching either (PSUBSCRIBE, `pmessage`), with the server's
// notify-keyspace-events set (by an operator: not in the capture). A notification that
// frees the key (del, expired, ...) is the wake-up (`message`) of the key's waiters on
// that connection; a key channel's SUBSCRIBE and UNSUBSCRIBE are the subscription of its
// lock; leaving an event channel or a pattern leaves every key it delivered. An event
// channel delivers every key of its database: a notification is read only for a key some
// attempt was refused on (lock_keys: a waiter's), or whose own channel was subscribed to,
// and the timeline counts it only for a key it knows as a lock (by_notification). Joined mid-stream, the
// messages alone show the subscription (as a Redisson channel's do).
#include "recognize/keyspace_channels.hpp"
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

// The notifications of one command come back to back (a hash's last `hdel`, then its
// `del`), and a pattern matching both `__keyspace@…` and `__keyevent@…` delivers each
// change twice: one wake-up.
constexpr std::int64_t same_change_us = 1'000;

}  // namespace

lock_recognizer::state::tracked_channel* lock_recognizer::state::key_watch(std::uint64_t connection, std::int32_t db,
                                                                            std::string_view key) {
  const auto it = channels.find(connection);
  if (it == channels.end()) return nullptr;
  for (tracked_channel& t : it->second) {
    if (t.key_db == db && t.name == key) return &t;
  }
  return nullptr;
}

lock_recognizer::state::tracked_channel& lock_recognizer::state::note_key_watch(std::uint64_t connection, std::int32_t db,
                                                                                 std::string_view key, std::string_view source,
                                                                                 bool by_pattern) {
  if (tracked_channel* t = key_watch(connection, db, key)) return *t;
  auto& list = channels[connection];
  if (list.size() >= max_tracked_channels) list.erase(list.begin());
  tracked_channel& t = list.emplace_back();
  t.name = key;
  t.key_db = db;
  t.source = source;
  t.by_pattern = by_pattern;
  return t;
}

std::vector<lock_recognizer::state::tracked_channel> lock_recognizer::state::take_key_watches(std::uint64_t connection,
                                                                                             std::string_view source,
                                                                                             bool by_pattern) {
  std::vector<tracked_channel> out;
  const auto it = channels.find(connection);
  if (it == channels.end()) return out;
  std::erase_if(it->second, [&](tracked_channel& t) {
    if (t.key_db < 0 || t.by_pattern != by_pattern || t.source != source) return false;
    out.push_back(std::move(t));
    return true;
  });
  if (it->second.empty()) channels.erase(it);
  return out;
}

std::int32_t lock_recognizer::state::database_of_key(std::string_view key) const {
  const auto it = key_databases.find(key);
  return it == key_databases.end() ? -1 : it->second;
}

void lock_recognizer::state::note_key_database(std::string_view key, std::int32_t db) {
  if (const auto it = key_databases.find(key); it != key_databases.end()) {
    if (it->second != db) it->second = -1;  // a key of that name in several databases: no telling
    return;
  }
  if (key_databases.size() >= max_key_databases) key_databases.clear();
  key_databases.emplace(std::string(key), db);
}

bool lock_recognizer::state::on_key_notification(const exchange& e, lock_operation& op, std::string_view source,
                                                 bool by_pattern, std::string_view channel, std::string_view payload) {
  const keyspace_channel ch = read_keyspace_channel(channel);
  if (ch.kind == keyspace_channel::form::none) return false;
  const bool by_key = ch.kind == keyspace_channel::form::keyspace;
  const std::string_view key = by_key ? ch.rest : payload;
  const std::string_view event = by_key ? payload : ch.rest;
  // (A `set` or `expire` is a holder taking or renewing the key: nothing to wake for.)
  if (ch.db < 0 || key.empty() || !frees_key(event)) return true;
  // (A key's own channel was asked for by name: its SUBSCRIBE made a watch of it.)
  if (lock_keys.find(key) == lock_keys.end() && key_watch(e.connection, ch.db, key) == nullptr) return true;
  tracked_channel& watch = note_key_watch(e.connection, ch.db, key, source, by_pattern);
  if (watch.woken_us < 0) note_key_database(key, ch.db);  // (once a key and subscriber)
  if (watch.woken_us >= 0 && e.request_us >= watch.woken_us && e.request_us - watch.woken_us <= same_change_us) return true;
  watch.woken_us = e.request_us;
  op.kind = lock_op_kind::message;
  op.outcome = op_outcome::ok;
  op.family = lock_family::unknown;
  op.channel = channel;
  op.lock = key;
  op.message = event;
  op.db = ch.db;
  op.by_notification = true;
  emit(op);
  return true;
}

bool lock_recognizer::state::on_key_channel(command_call& c, bool sub, std::string_view channel, std::string_view confirmed,
                                            std::int64_t count) {
  const keyspace_channel ch = read_keyspace_channel(channel);
  if (ch.kind == keyspace_channel::form::none) return false;
  lock_operation& op = c.op;
  if (op.outcome != op_outcome::ok) return true;
  const std::int64_t sub_count = channel == confirmed ? count : -1;
  const bool names_key = ch.kind == keyspace_channel::form::keyspace && ch.db >= 0 && !ch.rest.empty();
  if (sub) {
    // An event channel names no key: its messages do, each its key's wake-up.
    if (!names_key) return true;
    note_key_watch(c.e.connection, ch.db, ch.rest, channel, false);
    note_key_database(ch.rest, ch.db);
    const std::int32_t connection_db = op.db;
    op.kind = lock_op_kind::subscribe;
    op.channel = channel;
    op.lock = ch.rest;
    op.db = ch.db;
    op.by_notification = true;
    op.family = lock_family::unknown;
    op.sub_count = sub_count;
    emit(op);
    op.by_notification = false;
    op.db = connection_db;
    return true;
  }
  bool left_named = false;
  for (const tracked_channel& t : take_key_watches(c.e.connection, channel, false)) {
    left_named |= names_key && t.key_db == ch.db && t.name == ch.rest;
    emit_left(op, t, sub_count);
  }
  if (names_key && !left_named) {  // its subscription not seen (begun before the capture)
    tracked_channel t;
    t.name = ch.rest;
    t.key_db = ch.db;
    t.source = channel;
    emit_left(op, t, sub_count);
  }
  return true;
}

void lock_recognizer::state::on_pattern_subscription(command_call& c, bool sub) {
  // A pattern names no key: the keys come with its messages (`pmessage`).
  if (sub || c.reply.kind == reply_view::shape::error) return;
  if (c.args.size() == 1) {
    for (const tracked_channel& t : take_channels(c.e.connection, left_channels::patterns)) emit_left(c.op, t);
    return;
  }
  for (std::size_t i = 1; i < c.args.size(); ++i) {
    for (const tracked_channel& t : take_key_watches(c.e.connection, c.args[i], true)) emit_left(c.op, t);
  }
}

}  // namespace lockscope::locks
