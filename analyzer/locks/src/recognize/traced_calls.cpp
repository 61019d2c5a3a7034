// Scripts that build their lock's key inside Lua (see recognizer_state.hpp,
// on_traced_call): a job queue's `SET prefix..id..':lock' token PX ms` for a job id it
// popped from a list, its release (`GET == token` then `DEL`) and its renewal (re-`SET
// … PX`) for ids and tokens packed in one argument. The probes (script_effect.hpp) see
// none of it: the key is in no KEYS position, and what it holds depends on lists filled
// before. So each call of a learnt script is run against a shadow of its server's keys
// that the earlier calls built (a lock script's call too: it may move what another
// reads; only a script naming no lock among its KEYS is read for locks), and the run
// counts only when its reply is the server's: where the shadow does not know the
// state (a list filled before the capture, a key written by a plain command) the run
// answers otherwise, the call shows nothing and the shadow stays as it was.
#include "recognize/recognizer_state.hpp"

#include <algorithm>
#include <iterator>

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

constexpr std::uint32_t traced_cpu_ms = 2000;

// Whether a script's reply in the shadow is the one the server sent.
bool same_reply(const effect::lua_reply& r, const message& m, std::size_t index) {
  using kind = effect::lua_reply::kind;
  const message_node& n = m.nodes()[index];
  const bool null = n.type == resp::type::null || (n.flags & (resp::node_flags::null_bulk | resp::node_flags::null_array)) != 0;
  if (null) return r.type == kind::nil;
  switch (n.type) {
    case resp::type::integer: return r.type == kind::integer && r.integer == n.integer;
    case resp::type::simple_error:
    case resp::type::bulk_error: return r.type == kind::error;
    case resp::type::simple_string: return r.type == kind::status && r.text == m.text(n);
    case resp::type::bulk_string:
    case resp::type::verbatim_string: return r.type == kind::bulk && r.text == m.text(n);
    case resp::type::array:
    case resp::type::set: {
      if (r.type != kind::array) return false;
      std::size_t at = 0;
      bool same = true;
      m.for_each_child(index, [&](const message_node& e) {
        same = at < r.items.size() && same_reply(r.items[at], m, static_cast<std::size_t>(&e - m.nodes().data()));
        ++at;
        return same;
      });
      return same && at == r.items.size();
    }
    default: return false;
  }
}

// The shadow's keys as they stand at `now_ms`: TTLs counted down, expired keys gone.
void age_to(effect::shadow_store& store, std::int64_t& aged_to_ms, std::int64_t now_ms) {
  if (aged_to_ms >= 0 && now_ms > aged_to_ms) {
    const std::int64_t elapsed = now_ms - aged_to_ms;
    for (auto it = store.keys.begin(); it != store.keys.end();) {
      effect::shadow_key& k = it->second;
      if (k.pttl_ms >= 0 && (k.pttl_ms -= elapsed) <= 0) it = store.keys.erase(it);
      else ++it;
    }
  }
  if (now_ms > aged_to_ms) aged_to_ms = now_ms;
  store.now_ms = aged_to_ms;
}

// The string value at `key`, or nullptr.
const effect::shadow_key* string_at(const effect::shadow_store& store, std::string_view key) {
  const auto it = store.keys.find(key);
  return it == store.keys.end() || it->second.kind != effect::shadow_key::type::string ? nullptr : &it->second;
}

}  // namespace

bool lock_recognizer::state::on_traced_call(command_call& c, learnt_effect& learnt, std::span<const std::string_view> keys,
                                            std::span<const std::string_view> argv, bool read) {
  if (traced_off || learnt.text.empty() || c.reply.kind == reply_view::shape::none || c.reply.m == nullptr || c.reply.root == message::npos) {
    return false;
  }
  if (c.reply.m->truncated_bytes() != 0 || c.reply.m->dropped_nodes() != 0) return false;
  if (!traced_found && traced_runs >= max_traced_runs_without_lock) {
    traced_off = true;
    traced_servers = {};
    return false;
  }
  traced_server* server = traced_server_of(c.op.server_text);
  if (server == nullptr) return false;
  ++traced_runs;
  apply_list_moves(*server, c.op.request_us);
  age_to(server->store, server->aged_to_ms, c.op.request_us / 1000);
  // The run changes the shadow in place; its journal puts back what a run that does not
  // count changed, and tells what each key held before.
  effect::shadow_journal journal;
  // The instruction and memory budgets bound a run; the CPU time backstop is given room
  // enough that a slow machine does not trip it either.
  effect::sandbox_limits limits;
  limits.cpu_ms = traced_cpu_ms;
  const effect::run_result run =
      effect::run_script(learnt.text, keys, argv, server->store, limits, &journal, &learnt.compiled);
  if (run.outcome == effect::run_result::status::limit || run.outcome == effect::run_result::status::not_lua) {
    journal.restore(server->store);
    learnt.text = std::string();
    learnt.compiled = std::string();
    ++effect_strikes;
    return false;
  }
  if ((run.outcome != effect::run_result::status::ok && run.outcome != effect::run_result::status::script_error) ||
      !same_reply(run.reply, *c.reply.m, c.reply.root)) {
    journal.restore(server->store);
    return false;
  }

  // A value counts as the caller's when one of its arguments carries it (as itself, or
  // inside a packed argument: msgpack and JSON keep a string's bytes as they are), and
  // as a holder's when it looks like a token: a cached document (JSON, text) that a
  // script stores with an expiry has quotes, brackets or spaces no client draws.
  auto carried = [&](std::string_view value) {
    if (!looks_like_value(value) || is_serialized_data(value) ||
        value.find_first_of(" \"'{}[]<>") != std::string_view::npos) {
      return false;
    }
    for (std::string_view a : keys) {
      if (a.find(value) != std::string_view::npos) return true;
    }
    for (std::string_view a : argv) {
      if (a.find(value) != std::string_view::npos) return true;
    }
    return false;
  };
  bool emitted = false;
  const lock_operation base = c.op;
  for (std::size_t i = 0; read && i < run.writes.size(); ++i) {
    const effect::shadow_write& w = run.writes[i];
    using what = effect::shadow_write::what;
    if (w.kind != what::set && w.kind != what::del && w.kind != what::expire) continue;
    bool first = true;  // each key once, at its first write
    for (std::size_t j = 0; j < i && first; ++j) first = run.writes[j].key != w.key;
    if (!first) continue;
    const effect::shadow_key* before = journal.held_before(w.key);
    if (before != nullptr && before->kind != effect::shadow_key::type::string) before = nullptr;
    const effect::shadow_key* now = string_at(server->store, w.key);
    lock_operation op = base;
    op.family = lock_family::set_based;
    op.lock = w.key;
    op.outcome = op_outcome::ok;
    if (before == nullptr && now != nullptr && now->pttl_ms > 0 && carried(now->value)) {
      op.kind = lock_op_kind::acquire;
      op.owner = now->value;
      op.lease_ms = now->pttl_ms;
    } else if (before != nullptr && now != nullptr && now->value == before->value && now->pttl_ms > 0 &&
               carried(before->value)) {
      op.kind = lock_op_kind::renew;
      op.owner = now->value;
      op.lease_ms = now->pttl_ms;
    } else if (before != nullptr && now == nullptr && carried(before->value)) {
      op.kind = lock_op_kind::unlock;
      op.owner = before->value;
      op.lease_ms = -1;
    } else {
      continue;
    }
    emit(op);
    emitted = true;
  }
  if (emitted) traced_found = true;
  return emitted;
}

lock_recognizer::state::traced_server* lock_recognizer::state::traced_server_of(std::string_view server_text) {
  for (traced_server& s : traced_servers) {
    if (s.server == server_text) return &s;
  }
  if (traced_servers.size() >= max_traced_servers) return nullptr;
  traced_server& s = traced_servers.emplace_back();
  s.server = server_text;
  return &s;
}

void lock_recognizer::state::apply_list_moves(traced_server& server, std::int64_t until_us) {
  std::size_t done = 0;
  for (; done < server.moves.size() && server.moves[done].reply_us <= until_us; ++done) {
    const pending_list_move& m = server.moves[done];
    // The item left its source at the end named (one the shadow knew, or none: a list
    // filled before the capture) and is now at its destination's end; the later runs'
    // replies check the rest.
    if (const auto it = server.store.keys.find(m.source);
        it != server.store.keys.end() && it->second.kind == effect::shadow_key::type::list) {
      std::vector<std::string>& items = it->second.items;
      if (m.from_head) {
        if (const auto at = std::find(items.begin(), items.end(), m.item); at != items.end()) items.erase(at);
      } else if (const auto at = std::find(items.rbegin(), items.rend(), m.item); at != items.rend()) {
        items.erase(std::next(at).base());
      }
      if (items.empty()) server.store.keys.erase(it);
    }
    auto [dst, created] = server.store.keys.try_emplace(m.destination);
    if (created) dst->second.kind = effect::shadow_key::type::list;
    if (dst->second.kind != effect::shadow_key::type::list) continue;
    std::vector<std::string>& items = dst->second.items;
    items.insert(m.to_head ? items.begin() : items.end(), m.item);
  }
  server.moves.erase(server.moves.begin(), server.moves.begin() + static_cast<std::ptrdiff_t>(done));
}

void lock_recognizer::state::on_list_move(command_call& c) {
  // Only once a learnt script has been run: a capture of list moves and no script (a job
  // queue without Lua) pays nothing per move.
  if (traced_off || traced_runs == 0 || c.reply.m == nullptr || c.reply.root == message::npos) return;
  // The item moved (a job id reads as a number too), or nil: nothing moved.
  const message_node& item = c.reply.m->nodes()[c.reply.root];
  if (item.type != resp::type::bulk_string || (item.flags & resp::node_flags::null_bulk) != 0) return;
  // RPOPLPUSH src dst: from src's tail to dst's head; LMOVE src dst LEFT|RIGHT LEFT|RIGHT
  // (BRPOPLPUSH and BLMOVE with a timeout after the same arguments).
  const bool lmove = c.args[0].size() <= 6;  // LMOVE, BLMOVE (RPOPLPUSH and BRPOPLPUSH are longer)
  if (c.args.size() < (lmove ? 5u : 3u)) return;
  bool from_head = false, to_head = true;
  if (lmove) {
    const auto left = [](std::string_view w) { return resp::iequals(w, "LEFT"); };
    const auto right = [](std::string_view w) { return resp::iequals(w, "RIGHT"); };
    if (!(left(c.args[3]) || right(c.args[3])) || !(left(c.args[4]) || right(c.args[4]))) return;
    from_head = left(c.args[3]);
    to_head = left(c.args[4]);
  }
  traced_server* server = traced_server_of(c.op.server_text);
  if (server == nullptr) return;
  if (server->moves.size() >= max_pending_moves) server->moves.erase(server->moves.begin());
  pending_list_move m;
  m.reply_us = c.e.reply_us >= 0 ? c.e.reply_us : c.e.request_us;
  m.source = c.args[1];
  m.destination = c.args[2];
  m.item = c.reply.m->text(item);
  m.from_head = from_head;
  m.to_head = to_head;
  const auto at = std::upper_bound(server->moves.begin(), server->moves.end(), m.reply_us,
                                   [](std::int64_t t, const pending_list_move& p) { return t < p.reply_us; });
  server->moves.insert(at, std::move(m));
}

}  // namespace lockscope::locks
