// Plain lock commands queued in MULTI and run at EXEC (recognizer_state.hpp,
// "transactions.cpp"): a client that pipelines its lock's SET, EXPIRE or DEL in a
// transaction (RQ's scheduler heartbeat: `MULTI, EXPIRE k1 61, EXPIRE k2 61, EXEC`) is
// answered `+QUEUED` for each, and what each did only in EXEC's array.
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

using resp::iequals;

bool kept_when_queued(command_word w) noexcept {
  switch (w) {
    case command_word::set:
    case command_word::setnx:
    case command_word::expire:
    case command_word::pexpire:
    case command_word::del:
    case command_word::unlink:
    case command_word::delex:
    case command_word::delifeq: return true;
    default: return false;
  }
}

bool is_queued(const reply_view& r) {
  if (r.kind != reply_view::shape::other || r.m == nullptr || r.root == message::npos) return false;
  const message_node& n = r.m->nodes()[r.root];
  return n.type == resp::type::simple_string && iequals(r.m->text(n), "QUEUED");
}

}  // namespace

void lock_recognizer::state::end_transaction(std::uint64_t connection) noexcept {
  for (std::size_t i = 0; i < open_transactions.size(); ++i) {
    if (open_transactions[i].connection != connection) continue;
    open_transactions.erase(open_transactions.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

bool lock_recognizer::state::transaction_step(command_call& c) {
  const std::uint64_t connection = c.e.connection;
  const std::string_view name = c.args[0];
  if (c.word == command_word::other && name.size() == 5 && iequals(name, "MULTI")) {
    if (c.reply.kind != reply_view::shape::ok) return false;  // refused (nested MULTI): nothing opens
    end_transaction(connection);
    if (open_transactions.size() >= max_open_transactions) open_transactions.erase(open_transactions.begin());
    open_transactions.push_back(open_transaction{connection, 0, {}});
    return true;
  }
  open_transaction* t = nullptr;
  for (open_transaction& o : open_transactions) {
    if (o.connection == connection) t = &o;
  }
  if (t == nullptr) return false;
  if (c.word == command_word::other && (iequals(name, "EXEC") || iequals(name, "DISCARD"))) {
    // EXEC answered with an array: every queued command ran, in order. A nil (a WATCHed key
    // changed), an EXECABORT error or no reply: none did.
    if (iequals(name, "EXEC") && c.reply.kind == reply_view::shape::array) {
      open_transaction ran = std::move(*t);
      end_transaction(connection);
      run_queued(c.e, ran, *c.reply.m);
      return true;
    }
    end_transaction(connection);
    return true;
  }
  if (!is_queued(c.reply)) return false;  // refused when queued (an error) or not in MULTI after all
  const std::uint32_t position = t->queued++;
  if (!kept_when_queued(c.word)) return false;  // read at its QUEUED as before (SCRIPT LOAD keys its text)
  if (t->commands.size() < max_kept_queued) {
    queued_command& q = t->commands.emplace_back();
    q.position = position;
    q.word = c.word;
    q.args.assign(c.args.begin(), c.args.end());
  }
  return true;
}

void lock_recognizer::state::run_queued(const exchange& exec, open_transaction& t, const message& reply) {
  // The elements of EXEC's array, by place (a queued command answered in its own).
  std::vector<std::size_t> elements;
  elements.reserve(t.queued);
  reply.for_each_child(reply.root(), [&](const message_node& n) {
    elements.push_back(static_cast<std::size_t>(&n - reply.nodes().data()));
    return true;
  });
  std::vector<std::string_view> args;
  for (const queued_command& q : t.commands) {
    if (q.position >= elements.size()) break;  // the array kept fewer (cut short): unknown
    args.assign(q.args.begin(), q.args.end());
    exchange ran = exec;
    ran.command = args;
    ran.interned_identity = 0;
    command_call c{ran, ran.command, q.word, read_reply_at(&reply, elements[q.position]), {}};
    begin_call(c);
    read_call(c);
  }
}

}  // namespace lockscope::locks
