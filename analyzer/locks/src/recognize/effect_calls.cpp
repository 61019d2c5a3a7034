// Scripts learnt from the capture (not built in): read by what they do (script_effect.hpp)
// at their first call, then each call's operations from that effect and its reply. A
// script whose effect shows no lock is classified by its shape (lock_patterns.hpp); one
// the probes could not run to the end (a command the shadow does not model, a budget
// spent) and the shape does not know is inferred from the traffic like an unseen SHA1.
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

std::string_view effect_arg(std::span<const std::string_view> v, std::uint8_t i) noexcept {
  return i >= 1 && i <= v.size() ? v[i - 1] : std::string_view();
}

effect::observed_reply::form observed_form(const message& m, const message_node& n, std::int64_t& integer,
                                           std::string_view& text) {
  using form = effect::observed_reply::form;
  switch (n.type) {
    case resp::type::null: return form::nil;
    case resp::type::integer: integer = n.integer; return form::integer;
    case resp::type::boolean: integer = n.integer != 0 ? 1 : 0; return form::integer;
    case resp::type::simple_error:
    case resp::type::bulk_error: return form::error;
    case resp::type::array:
    case resp::type::set: return (n.flags & resp::node_flags::null_array) != 0 ? form::nil : form::array;
    case resp::type::simple_string:
    case resp::type::bulk_string:
      if ((n.flags & resp::node_flags::null_bulk) != 0) return form::nil;
      text = m.text(n);
      if (parse_int(text, integer)) return form::integer;  // RESP2 clients' numbers
      return n.type == resp::type::simple_string ? form::status : form::text;
    default: return form::text;
  }
}

effect::observed_reply observe(const reply_view& r) {
  effect::observed_reply o;
  using form = effect::observed_reply::form;
  if (r.kind == reply_view::shape::none || r.m == nullptr || r.root == message::npos) return o;
  const message& m = *r.m;
  o.kind = observed_form(m, m.nodes()[r.root], o.integer, o.text);
  if (o.kind == form::array) {
    m.for_each_child(r.root, [&](const message_node& e) {
      o.first = observed_form(m, e, o.first_integer, o.first_text);
      return false;
    });
  }
  return o;
}

// The text of a list reply's item at a 1-based position (an integer as its digits,
// kept in `scratch`); empty when the reply is no list or has no such item.
std::string_view reply_item_text(const reply_view& r, std::uint8_t position, std::string& scratch) {
  if (r.m == nullptr || r.root == message::npos || r.kind == reply_view::shape::none) return {};
  const message& m = *r.m;
  const message_node& root = m.nodes()[r.root];
  if (root.type != resp::type::array) return {};
  std::string_view out;
  std::size_t at = 0;
  m.for_each_child(r.root, [&](const message_node& n) {
    if (++at < position) return true;
    if (n.type == resp::type::integer) {
      scratch = std::to_string(n.integer);
      out = scratch;
    } else if ((n.type == resp::type::bulk_string || n.type == resp::type::simple_string) &&
               (n.flags & resp::node_flags::null_bulk) == 0) {
      out = m.text(n);
    }
    return false;
  });
  return out;
}

}  // namespace

bool lock_recognizer::state::expiry_set_known(const effect::script_effect& e, std::span<const std::string_view> keys) const {
  return e.expiry_key >= 1 && e.expiry_key <= keys.size() &&
         counted_expiry_sets.find(keys[e.expiry_key - 1u]) != counted_expiry_sets.end();
}

script_class lock_recognizer::state::effect_class(std::string_view text) {
  if (effects.size() >= max_learnt_effects) return classify_script(text);
  effects.emplace_back().text = text;
  script_class c;
  c.effect = static_cast<std::uint16_t>(effects.size());
  return c;
}

void lock_recognizer::state::on_effect_call(command_call& c, std::uint16_t index, std::span<const std::string_view> keys,
                                            std::span<const std::string_view> argv) {
  learnt_effect& learnt = effects[index - 1u];
  // The probes need a call's arguments; a call with no KEYS or an error reply (not
  // run, or run on arguments the script refuses) waits for a better one.
  if (!learnt.analysed && !keys.empty() && c.reply.kind != reply_view::shape::error) {
    learnt.analysed = true;
    // A Redisson-shaped script (a hash of owners with Redisson's queue, mode, token or
    // latch) keeps the shape classifier's class, which knows those; any other is read
    // by its effect, and by its shape only when the effect shows no lock.
    learnt.by_shape = classify_script(learnt.text);
    const lock_family shape = learnt.by_shape.family;
    const bool redisson_shaped = learnt.by_shape.is_lock_script() && shape != lock_family::set_based &&
                                 shape != lock_family::redlock_multi && shape != lock_family::unknown;
    const bool probed = !redisson_shaped && effect_strikes < max_effect_strikes;
    if (probed) {
      learnt.found = effect::analyse_script(learnt.text, keys, argv);
      if (learnt.found.hit_limit) ++effect_strikes;
    }
    if ((!learnt.found.is_lock() || learnt.found.by_expiry_set()) && !learnt.by_shape.is_lock_script()) {
      ++stats.unknown_scripts;
    }
    // Only a script the probes ran within their budget is run again on each call.
    if (!probed || learnt.found.hit_limit) learnt.text = std::string();
  }
  if (!learnt.analysed) return;
  // Every learnt script's call keeps the traced shadow of its server (a lock script's
  // too: it may move what another script reads); only one naming no lock among its
  // KEYS is read from its run.
  // A release by an expiry set no acquire has scored: read as a script that is no lock's.
  const bool found = learnt.found.is_lock() &&
                     (!learnt.found.by_expiry_set() || expiry_set_known(learnt.found, keys));
  if (found) {
    emit_effect_operations(c, learnt.found, keys, argv);
    on_traced_call(c, learnt, keys, argv, false);
    return;
  }
  if (learnt.by_shape.is_lock_script()) {
    emit_script_operations(c, learnt.by_shape, keys, argv);
    on_traced_call(c, learnt, keys, argv, false);
    return;
  }
  if (on_traced_call(c, learnt, keys, argv, true)) return;
  // Run to its end and no lock (a counter, a rate limiter, a cache): not guessed at.
  if (learnt.found.ran) return;
  const script_class guess = infer_script(c, learnt.inference, keys, argv);
  if (guess.op == script_op::none) return;
  c.op.inferred = true;
  emit_script_operations(c, guess, keys, argv);
}

void lock_recognizer::state::emit_effect_operations(command_call& c, const effect::script_effect& e,
                                                    std::span<const std::string_view> keys,
                                                    std::span<const std::string_view> argv) {
  lock_operation& op = c.op;
  op.family = e.family;
  op.shared = e.shared;
  if (e.family == lock_family::semaphore) {
    op.permits = 1;
    std::int64_t limit = e.limit;
    if (e.limit_argv != 0) parse_int(effect_arg(argv, e.limit_argv), limit);
    if (!e.limit_field.empty() && e.lock_key >= 1 && e.lock_key <= keys.size()) {
      // A limit kept beside the count: as the traced shadow of its server knows it (the
      // script that set it was seen), else unknown.
      limit = -1;
      for (const traced_server& s : traced_servers) {
        if (s.server != op.server_text) continue;
        const auto k = s.store.keys.find(keys[e.lock_key - 1u]);
        if (k == s.store.keys.end()) break;
        for (const auto& [name, value] : k->second.fields) {
          if (name == e.limit_field) parse_int(value, limit);
        }
      }
    }
    op.limit = limit > 0 ? limit : -1;
    if (e.counted) {
      // An acquire takes the permits it raises the count by; a release gives back what
      // its holder took (the timeline knows it).
      std::int64_t n = 1;
      if (e.permits_argv != 0 && (!parse_int(effect_arg(argv, e.permits_argv), n) || n <= 0)) n = -1;
      op.permits = e.op == script_op::acquire ? n : -1;
    }
  }
  op.owner = effect::argument_at(keys, argv, e.owner_argv);
  // (The sink reads the operation during emit: the drawn owner's digits live that long.)
  std::string drawn_owner;
  if (e.owner_reply != 0) op.owner = reply_item_text(c.reply, e.owner_reply, drawn_owner);
  op.channel = effect_arg(keys, e.channel_key);
  op.lease_ms = -1;
  op.lease_added = e.lease_added;
  if (std::int64_t lease = 0;
      e.lease_argv != 0 && parse_int(effect::argument_at(keys, argv, e.lease_argv), lease) && lease >= 0) {
    op.lease_ms = e.lease_seconds ? std::min<std::int64_t>(lease, INT64_MAX / 1000) * 1000 : lease;
  }
  switch (e.op) {
    case script_op::acquire:
    case script_op::multi_acquire: op.kind = lock_op_kind::acquire; break;
    case script_op::unlock:
    case script_op::multi_release: op.kind = lock_op_kind::unlock; break;
    default: op.kind = lock_op_kind::renew; break;
  }
  const effect::reply_reading reading = effect::read_reply(e, observe(c.reply), keys, argv);
  auto outcome_for = [&](std::string_view key) {
    if (c.reply.kind == reply_view::shape::none) return op_outcome::no_reply;
    if (c.reply.kind == reply_view::shape::error) return op_outcome::error;
    if (!reading.ambiguous) return reading.outcome;
    // A counted release answers what the count came to: any number but its refusal's.
    if (e.counted && op.kind == lock_op_kind::unlock) return op_outcome::ok;
    const value_record* rec = flow.find(value_key(op.server_text, key, op.owner));
    if (op.kind == lock_op_kind::acquire) {
      // A re-entrant acquire answers alike when it creates the key and when the caller's
      // value held it already (writing nothing): unless that value holds the lock here
      // (its lease, if known, still running), it created the key.
      if (!reading.ok_unless_own_hold) return op_outcome::none;
      const bool holds = rec != nullptr && rec->held && (rec->deadline_us < 0 || rec->deadline_us > op.at_us());
      return holds ? op_outcome::none : op_outcome::ok;
    }
    // The reply does not tell (a script that answers nil whatever it did): what the
    // value did before does. A value never seen acquiring here (held since before the
    // capture began) is taken as the holder; a failed attempt's value changed nothing.
    if (rec == nullptr) return op_outcome::ok;
    if (!rec->held) return op_outcome::none;
    if (rec->deadline_us >= 0 && rec->deadline_us <= op.at_us()) {
      return op.kind == lock_op_kind::unlock ? op_outcome::expired : op_outcome::rejected;
    }
    return op_outcome::ok;
  };
  const lock_op_kind kind = op.kind;
  auto one = [&](std::string_view key) {
    op.lock = key;
    op.kind = kind;
    if (e.member_based && !zset_semaphores.empty() && e.family != lock_family::semaphore &&
        zset_semaphores.find(std::string(key)) != zset_semaphores.end()) {
      // The release or renewal of a member of a sorted-set semaphore (its acquire said so).
      op.family = lock_family::semaphore;
      op.shared = true;
      op.permits = 1;
    }
    if (e.renews_own) {
      // A refresh that re-creates a lost key: a renewal while its value holds the lock.
      const value_record* rec = flow.find(value_key(op.server_text, key, op.owner));
      if (rec != nullptr && rec->held && (rec->deadline_us < 0 || rec->deadline_us > op.at_us())) {
        op.kind = lock_op_kind::renew;
      }
    }
    op.outcome = outcome_for(key);
    if (e.owner_reply != 0 && op.outcome != op_outcome::ok) op.owner = {};  // drawn only when it acquires
    // A counted acquire's value may be drawn for each try (nothing but the count refused
    // it): the timeline links a waiter's tries by connection.
    op.fresh_owner = e.counted && op.kind == lock_op_kind::acquire;
    if (op.kind == lock_op_kind::renew && op.outcome == op_outcome::contended) op.outcome = op_outcome::rejected;
    op.ttl_ms = op.outcome == op_outcome::contended ? reading.ttl_ms : -1;
    if (e.family == lock_family::semaphore && op.kind == lock_op_kind::acquire && zset_semaphores.size() < max_zset_semaphores) {
      zset_semaphores.emplace(key);
    }
    emit(op);
  };
  if (e.counted && e.expiry_key >= 1 && e.expiry_key <= keys.size()) {
    const std::string_view expiries = keys[e.expiry_key - 1u];
    if (e.by_expiry_set()) {
      // Its holder's expiry set to the past: a release of the count that set's acquire named.
      const auto count = counted_expiry_sets.find(expiries);
      if (count != counted_expiry_sets.end()) one(count->second);
      return;
    }
    if (op.kind == lock_op_kind::acquire && c.reply.kind != reply_view::shape::none &&
        counted_expiry_sets.size() < max_zset_semaphores && e.lock_key <= keys.size()) {
      counted_expiry_sets.try_emplace(std::string(expiries), std::string(keys[e.lock_key - 1u]));
    }
  }
  if (!e.multi) {
    if (e.lock_key >= 1 && e.lock_key <= keys.size()) one(keys[e.lock_key - 1u]);
    return;
  }
  for (std::string_view key : keys) one(key);
}

}  // namespace lockscope::locks
