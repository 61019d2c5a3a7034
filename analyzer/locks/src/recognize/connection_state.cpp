// What a connection's own commands change for the operations that follow on it: its
// database (SELECT answered +OK; RESET, back to 0, which also leaves every channel),
// and forgetting all of it when the connection ends.
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

using resp::iequals;

void lock_recognizer::state::on_select(command_call& c) {
  if (c.args.size() != 2) return;
  std::int64_t db = 0;
  if (c.reply.kind == reply_view::shape::ok && parse_int(c.args[1], db) && db >= 0 && db <= INT32_MAX) {
    set_database(c.e.connection, static_cast<std::int32_t>(db));
  }
}

void lock_recognizer::state::on_reset(command_call& c) {
  const exchange& e = c.e;
  if (c.args.size() != 1) return;
  // Answered +RESET: the connection is back in db 0 (HELLO keeps the database).
  if (e.reply == nullptr || e.reply->root() == message::npos ||
      !iequals(e.reply->text(e.reply->nodes()[e.reply->root()]), "RESET")) {
    return;
  }
  set_database(e.connection, 0);
  // RESET clears the connection's name too; the unsubscribes below still carry it (the
  // name is kept here until they are emitted).
  std::string name;
  if (const auto it = client_names.find(e.connection); it != client_names.end()) {
    name = std::move(it->second);
    client_names.erase(it);
    c.op.client_name = name;
  }
  // It also left every channel: each lock channel's subscription ends here.
  if (!holders_by_connection.empty()) on_subscription_lock_left_all(c);
  lock_operation& op = c.op;
  for (const auto& t : take_channels(e.connection, left_channels::all)) emit_left(op, t);
}

void lock_recognizer::state::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  if (!holders_by_connection.empty()) subscription_holder_ended(connection, at_us);
  if (!undecided_nils.empty()) settle_nil_releases(connection);
  databases.erase(connection);
  if (!open_transactions.empty()) end_transaction(connection);
  if (checked_read& r = checked_read_of(connection); r.connection == connection) r.connection = 0;
  if (!client_names.empty()) client_names.erase(connection);
  asking.erase(connection);
  channels.erase(connection);
  if (last_db_connection == connection) {
    last_db_connection = 0;
    last_db = 0;
  }
}

void lock_recognizer::state::note_client_name(const command_call& c) {
  const auto& a = c.args;
  if (c.reply.kind == reply_view::shape::none || c.reply.kind == reply_view::shape::error) return;
  std::string_view name;
  bool named = false;
  if (a.size() == 3 && resp::iequals(a[0], "CLIENT") && resp::iequals(a[1], "SETNAME")) {
    name = a[2];
    named = true;
  } else if (a.size() >= 2 && resp::iequals(a[0], "HELLO")) {
    for (std::size_t i = 1; i + 1 < a.size(); ++i) {
      if (resp::iequals(a[i], "SETNAME")) {
        name = a[i + 1];
        named = true;
      }
    }
  }
  if (!named) return;
  if (name.empty()) {
    client_names.erase(c.e.connection);  // CLIENT SETNAME "" clears the name
  } else {
    client_names[c.e.connection].assign(name);
  }
}

}  // namespace lockscope::locks
