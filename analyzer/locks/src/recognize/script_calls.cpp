// EVAL, EVALSHA (and their _RO forms) and SCRIPT LOAD: the script and SHA1 caches, the
// class of each call's script (known by its text, its SHA1, or guessed from the call's
// shape when the SHA1 is unknown), and the operations the class and the reply make.
#include <array>

#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"
#include "recognize/lock_channels.hpp"
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

using resp::iequals;

bool is_number(std::string_view s) noexcept {
  std::int64_t v = 0;
  return parse_int(s, v);
}

// An owner id: Redisson's `<uuid>:<thread>` or anything with a ':' that is not a number.
bool looks_like_owner(std::string_view s) noexcept {
  return lock::parse_owner_id(s).has_value() || (s.find(':') != std::string_view::npos && !is_number(s));
}

// KEYS[i] / ARGV[i], 1-based; empty when absent.
std::string_view arg_at(std::span<const std::string_view> v, std::uint8_t i) noexcept {
  return i >= 1 && i <= v.size() ? v[i - 1] : std::string_view();
}
// ARGV[i] as an integer; -1 when absent or not one.
std::int64_t int_arg(std::span<const std::string_view> argv, std::uint8_t i) noexcept {
  std::int64_t v = -1;
  if (!parse_int(arg_at(argv, i), v)) v = -1;
  return v;
}

// Integer elements of an array reply (up to `out.size()`); returns how many.
std::size_t array_integers(const reply_view& r, std::span<std::int64_t> out, std::size_t& total) {
  std::size_t k = 0;
  total = 0;
  if (r.kind != reply_view::shape::array) return 0;
  r.m->for_each_child(r.root, [&](const message_node& e) {
    std::int64_t v = -1;
    if (e.type == resp::type::integer) v = e.integer;
    else if (e.type == resp::type::boolean) v = e.integer != 0 ? 1 : 0;
    else if (e.type == resp::type::bulk_string || e.type == resp::type::simple_string) {
      if (!parse_int(r.m->text(e), v)) v = -1;
    }
    if (k < out.size()) out[k++] = v;
    ++total;
    return true;
  });
  return k;
}

// An acquire script's outcome (and the holder's TTL, or the fenced token) from its reply.
void read_acquire_reply(lock_operation& op, const script_class& cls, const reply_view& reply) {
  if (reply.kind == reply_view::shape::none) op.outcome = op_outcome::no_reply;
  else if (reply.kind == reply_view::shape::error) op.outcome = op_outcome::error;
  else if (cls.reply == acquire_reply::busy_one) {
    // Fair tryLock() without arguments: nil = acquired, 1 = busy (no TTL is told).
    op.outcome = reply.kind == reply_view::shape::null      ? op_outcome::ok
                 : reply.kind == reply_view::shape::integer ? op_outcome::contended
                                                            : op_outcome::error;
  } else if (cls.reply == acquire_reply::one_zero) {
    op.outcome = reply.kind != reply_view::shape::integer ? op_outcome::error
                 : reply.integer >= 1                     ? op_outcome::ok
                                                          : op_outcome::contended;
  } else if ((cls.reply == acquire_reply::token_list || cls.family == lock_family::redisson_fenced) &&
             reply.kind == reply_view::shape::array) {
    std::array<std::int64_t, 2> v{-1, -1};
    std::size_t total = 0;
    array_integers(reply, v, total);
    if (v[0] == -1) {
      op.outcome = op_outcome::ok;
      op.token = v[1];
    } else {
      op.outcome = op_outcome::contended;
      op.ttl_ms = v[0];
    }
  } else if (reply.kind == reply_view::shape::null && cls.family != lock_family::set_based) op.outcome = op_outcome::ok;
  else if (cls.family == lock_family::set_based && reply.kind == reply_view::shape::integer) {
    op.outcome = reply.integer >= 1 ? op_outcome::ok : op_outcome::contended;  // a script's 1 / 0
  } else if (cls.family == lock_family::set_based) op.outcome = reply.kind == reply_view::shape::ok ? op_outcome::ok : op_outcome::contended;
  else if (reply.kind == reply_view::shape::integer) {
    op.outcome = op_outcome::contended;
    op.ttl_ms = reply.integer;
  } else op.outcome = op_outcome::error;
}

// An unlock or release script's outcome from its reply.
op_outcome unlock_outcome(const script_class& cls, const reply_view& reply) noexcept {
  if (reply.kind == reply_view::shape::none) return op_outcome::no_reply;
  if (reply.kind == reply_view::shape::error) return op_outcome::error;
  if (reply.kind == reply_view::shape::null) return op_outcome::rejected;
  if (reply.kind != reply_view::shape::integer) return op_outcome::error;
  if (cls.op == script_op::release) {
    return reply.integer >= 1 ? op_outcome::ok : reply.integer == -1 ? op_outcome::expired : op_outcome::rejected;
  }
  return reply.integer == 1 ? op_outcome::ok : reply.integer == 0 ? op_outcome::partial : op_outcome::rejected;
}

}  // namespace

// Redis hands a script its KEYS and ARGV alike, and some clients pass the holder's value
// and the lease as KEYS (node-redis-lock: `EVALSHA sha 3 name value ttl` and `EVALSHA sha
// 2 name value`, no ARGV, read by `local value = KEYS[2]`). In a call with no ARGV, the
// KEYS after the first from the first one that names no key on (a bare number: a TTL, a
// count; or a random-looking token, looks_like_value, without the `:` or `{` of a key
// name) are its arguments, those before it the keys it names. Returns how many KEYS name
// keys (all, normally). Only the inference of an unseen script reads it so: a script
// whose text was seen is run by what it does (script_effect.cpp), and
// infer_by_held_value already looks for a held value in KEYS[2..] as in ARGV.
std::size_t lock_recognizer::state::keys_named(std::span<const std::string_view> keys,
                                               std::span<const std::string_view> argv) noexcept {
  if (!argv.empty() || keys.size() < 2) return keys.size();
  for (std::size_t i = 1; i < keys.size(); ++i) {
    const std::string_view k = keys[i];
    if (is_number(k) || (looks_like_value(k) && k.find_first_of(":{") == std::string_view::npos)) return i;
  }
  return keys.size();
}

lock_recognizer::state::state(lock_operation_sink& operation_sink) : sink(operation_sink) {
  auto add = [this](std::string_view text) {
    if (builtin_text.find(text) == builtin_text.end()) builtin_text.emplace(std::string(text), classify_script(text));
  };
  // Every Redisson release's scripts first, by the role their Java method gives them
  // (lockscope's own scripts are among them, byte for byte); a text two lock types share
  // (RedissonSpinLock's acquire is RLock's 3.12-3.18 one) takes the first row's.
  for (const lock::redisson_script& s : lock::redisson_catalogue()) {
    if (builtin_text.find(s.text) == builtin_text.end()) builtin_text.emplace(std::string(s.text), redisson_script_class(s));
  }
  for (const lock::script_info& s : lock::all_scripts()) add(s.text);
  // Semaphores and latches, by their catalogue roles (permit_scripts.cpp).
  for (const lock::primitive_script_info& s : lock::all_primitive_scripts()) {
    if (builtin_text.find(s.text) == builtin_text.end()) builtin_text.emplace(std::string(s.text), permit_script_class(s.text));
  }
  for (const known_script& s : known_scripts()) add(s.text);
  for (const known_script& s : client_scripts()) add(s.text);
}

string_map<lock_recognizer::state::sha_entry>& lock_recognizer::state::builtin_sha() {
  if (!builtin_sha_ready) {
    builtin_sha_ready = true;
    auto add = [this](std::string_view text, const std::string& sha) {
      builtin_sha_table[sha] = sha_entry{builtin_text.find(text)->second, false, false};
    };
    for (const lock::redisson_script& s : lock::redisson_catalogue()) add(s.text, std::string(s.sha1));
    for (const lock::script_info& s : lock::all_scripts()) add(s.text, std::string(s.sha1));
    for (const lock::primitive_script_info& s : lock::all_primitive_scripts()) add(s.text, std::string(s.sha1));
    for (const known_script& s : known_scripts()) add(s.text, lock::sha1_hex(s.text));
    for (const known_script& s : client_scripts()) add(s.text, lock::sha1_hex(s.text));
  }
  return builtin_sha_table;
}

bool lock_recognizer::state::find_eval(std::string_view text) {
  if (const auto it = builtin_text.find(text); it != builtin_text.end()) {
    last_eval_text = &it->first;
    last_eval_class = &it->second;
    return true;
  }
  if (auto* e = by_text.find(text)) {
    last_eval_text = &e->key;
    last_eval_class = &e->value;
    return true;
  }
  return false;
}

lock_recognizer::state::sha_entry* lock_recognizer::state::find_sha(std::string_view sha) {
  if (const auto it = builtin_sha().find(sha); it != builtin_sha().end()) return &it->second;
  if (auto* e = by_sha.find(sha)) return &e->value;
  return nullptr;
}

script_class lock_recognizer::state::learn(std::string_view text, std::string_view sha) {
  script_class c;
  if (const auto it = builtin_text.find(text); it != builtin_text.end()) {
    c = it->second;
  } else if (auto* e = by_text.find(text)) {
    c = e->value;
  } else {
    c = permit_script_class(text);  // a semaphore's or latch's (other releases' spellings)
    if (c.permit_role == 0) c = effect_class(text);
    last_eval_text = nullptr;
    last_eval_class = nullptr;
    last_eval_identity = 0;
    by_text.insert(text, c);
    stats.scripts_evicted = by_text.evictions();
  }
  if (builtin_sha().find(sha) == builtin_sha().end()) {
    by_sha.insert(sha, sha_entry{c, false, false});
    stats.shas_evicted = by_sha.evictions();
  }
  return c;
}

void lock_recognizer::state::on_script_load(command_call& c) {
  const exchange& e = c.e;
  if (c.args.size() != 3 || !iequals(c.args[1], "LOAD")) return;
  // A text Redis refused (a compile error) was not loaded. Any other reply stands: a
  // SHA1, but also `+QUEUED` inside MULTI (the SHA1 comes back in EXEC's array) or none
  // at all (a capture cut short). The key is the SHA1 computed from the text itself:
  // it is what EVALSHA names, even where a reply says otherwise.
  if (e.reply != nullptr) {
    const std::size_t root = e.reply->root();
    if (root != message::npos) {
      const resp::type t = e.reply->nodes()[root].type;
      if (t == resp::type::simple_error || t == resp::type::bulk_error) return;
    }
  }
  const std::string computed = lock::sha1_hex(c.args[2]);
  const std::string_view sha = normal_sha(computed);
  if (sha.empty()) return;
  // A SHA1 met before its text (an EVALSHA answered NOSCRIPT, then this SCRIPT LOAD:
  // node-redis-script's order) was only inferred: its text now says what it does.
  if (const sha_entry* known = find_sha(sha); known == nullptr || known->inferred) {
    ++stats.scripts_seen;
    learn(c.args[2], sha);
  }
}

void lock_recognizer::state::on_script_call(command_call& c) {
  const exchange& e = c.e;
  const auto& args = c.args;
  const bool eval = c.word == command_word::eval || c.word == command_word::eval_ro;
  std::span<const std::string_view> keys, argv;
  if (!split_keys_and_argv(args, keys, argv)) return;

  script_class cls;
  sha_entry* entry = nullptr;
  current_is_script = true;
  clear_current_sha();
  // The script's interned identity, when the session held it once (see exchange).
  const std::uint64_t script_identity = e.interned_argument == 1 ? e.interned_identity : 0;
  if (eval && script_identity != 0 && script_identity == last_eval_identity) {
    cls = *last_eval_class;  // the same bytes as the last EVAL's script: no compare
  } else if (eval && last_eval_text != nullptr && *last_eval_text == args[1]) {
    cls = *last_eval_class;
    last_eval_identity = script_identity;
  } else if (eval) {
    if (!find_eval(args[1])) {
      ++stats.scripts_seen;
      cls = learn(args[1], lock::sha1_hex(args[1]));
      if (!cls.is_lock_script()) ++stats.unknown_scripts;
      find_eval(args[1]);
    }
    cls = *last_eval_class;
    last_eval_identity = script_identity;
  } else {
    entry = entry_of_sha(normal_sha(args[1]));
    if (entry == nullptr) return;
    cls = entry->cls;
    c.op.inferred = entry->inferred;
  }
  read_script_call_here(c, cls, entry, keys, argv);
}

lock_recognizer::state::sha_entry* lock_recognizer::state::entry_of_sha(std::string_view sha) {
  if (sha.empty()) return nullptr;
  current_sha = sha_bytes(sha);
  sha_entry* entry = find_sha(sha);
  if (entry == nullptr) {
    ++stats.unknown_shas;
    entry = &by_sha.insert(sha, sha_entry{{}, true, false}).value;
    stats.shas_evicted = by_sha.evictions();
  }
  return entry;
}

void lock_recognizer::state::read_script_call(command_call& c, const script_class& cls, sha_entry* entry,
                                              std::span<const std::string_view> keys,
                                              std::span<const std::string_view> argv) {
  read_script_call_here(c, cls, entry, keys, argv);
}

// (Inlined into on_script_call, the keep-up path's: out of line, its eight arguments
// pass partly through the stack, 13 instructions an exchange more; read_script_call is
// its out-of-line copy for FCALL.)
[[gnu::always_inline]] inline void lock_recognizer::state::read_script_call_here(
    command_call& c, const script_class& cls, sha_entry* entry, std::span<const std::string_view> keys,
    std::span<const std::string_view> argv) {
  if (cls.permit_role != 0) {
    emit_permit_operations(c, cls, keys, argv);
    return;
  }
  if (cls.effect != 0) {
    on_effect_call(c, cls.effect, keys, argv);
    return;
  }
  if (!cls.is_lock_script() && !(entry != nullptr && entry->inferred)) return;

  if (entry != nullptr && entry->inferred) {
    if (c.reply.kind == reply_view::shape::integer && !keys.empty()) read_errno_convention(c, keys[0]);
    const std::uint64_t operations_before = stats.operations;
    if (!read_textless_call(c, *entry, keys, argv) && stats.operations == operations_before &&
        c.reply.kind != reply_view::shape::error) {
      ++stats.unread_sha_calls;  // (an error, NOSCRIPT, did nothing: nothing to read)
      if (!entry->unread) {
        entry->unread = true;
        ++stats.unread_shas;
      }
    }
    return;
  }
  emit_script_operations(c, cls, keys, argv);
}

// Lock code that answers as C does: 0 when done, a negative errno when not (Ceph RGW's
// lock functions: -16 EBUSY, -2 ENOENT). One library serves a lock, so a lock key an
// unseen script answered such a number for (below -1: -1 is a PTTL's "no expiry" or a
// release's "expired") has its unseen scripts' calls read in that convention: 0 as the
// 1 of a done call, a negative number as the 0 of a refused one.
void lock_recognizer::state::read_errno_convention(command_call& c, std::string_view key) {
  std::int64_t& answer = c.reply.integer;
  if (answer > 0) return;
  const std::uint64_t id = value_key(c.e.server_text, key, "\x04errno");
  if (answer <= -2 && answer >= -4095) {
    if (errno_locks.size() < max_errno_locks) errno_locks.insert(id);
  } else if (errno_locks.empty() || errno_locks.find(id) == errno_locks.end()) {
    return;
  }
  answer = answer == 0 ? 1 : 0;
}

// A call of a script known only by its SHA1, read from its arguments and reply; true
// when its reading is pending (a nil answer kept for a later call to settle).
bool lock_recognizer::state::read_textless_call(command_call& c, sha_entry& entry,
                                                std::span<const std::string_view> keys,
                                                std::span<const std::string_view> argv) {
  // Read with its arguments where the script reads them, KEYS or ARGV (see arguments_in_keys).
  const std::size_t named = keys_named(keys, argv);
  const std::span<const std::string_view> ikeys = keys.first(named);
  const std::span<const std::string_view> iargv = named < keys.size() ? keys.subspan(named) : argv;
  const script_class cls = infer_script(c, entry, ikeys, iargv);
  if (cls.permit_role != 0) {
    c.op.inferred = true;
    emit_permit_operations(c, cls, ikeys, iargv);
    return false;
  }
  if (cls.op == script_op::none) {
    if (on_list_reply(c, entry, keys, argv)) return false;
    // (Kept, no operation yet: its reading is pending.)
    if (const std::uint64_t before = stats.operations; renew_unseen_hold(c, entry, ikeys, iargv)) {
      return stats.operations == before;
    }
    infer_by_held_value(c, &entry, keys, argv);
    return false;
  }
  c.op.inferred = true;
  if (c.reply.kind == reply_view::shape::null && defer_nil_release(c, cls, ikeys, iargv)) return true;
  // (Set only here: a known script's call, the common case, checks nothing more.)
  inferred_lease_seconds = cls.lease_seconds;
  emit_script_operations(c, cls, ikeys, iargv);
  inferred_lease_seconds = false;
  return false;
}

// An unseen script that no argument shape explains, whose arguments (KEYS after the
// first, or ARGV, in any order) carry a value the capture showed holding KEYS[1] on
// this server, answered OK, 1 or a list whose first item is 1: it acted for that
// holder. With a number beside the value it extended the lease to that number of ms
// (node-redis-warlock's touch: KEYS [name, ttl, id], SET XX PX); without one, it
// released. A value an unseen script drew and answered in a list (value_tracking.cpp)
// counts as holding from the call that brings it back. Once a script has acted so,
// its role and the value's place are kept for its SHA1, and its later calls are read
// by them (a number for a value, a refused call). A capture joined
// after a client loaded its scripts shows only their SHA1s.
void lock_recognizer::state::infer_by_held_value(command_call& c, sha_entry* entry,
                                                 std::span<const std::string_view> keys,
                                                 std::span<const std::string_view> argv) {
  const reply_view& reply = c.reply;
  bool listed_done = false, listed_refused = false;
  if (reply.kind == reply_view::shape::array && reply.m != nullptr) {
    std::array<std::int64_t, 1> first{-1};
    std::size_t total = 0;
    if (array_integers(reply, first, total) == 1) {
      listed_done = first[0] == 1;
      listed_refused = first[0] == 0;
    }
  }
  const bool done = reply.kind == reply_view::shape::ok ||
                    (reply.kind == reply_view::shape::integer && reply.integer == 1) || listed_done;
  if (keys.empty()) return;
  lock_operation& op = c.op;
  const bool learnt = entry != nullptr && entry->holder_role != script_op::none;
  if (!done && !(learnt && (listed_refused || reply.kind == reply_view::shape::null ||
                            (reply.kind == reply_view::shape::integer && reply.integer == 0)))) {
    return;
  }
  std::string_view value, number;
  std::size_t values = 0, numbers = 0, value_at = 0, at = 0;
  // A value an unseen script drew, coming back here: learnt only once this call acts for
  // it unambiguously (a count that came back in a rate limiter's list reply and recurs
  // among a call's constant arguments teaches nothing).
  value_record* drawn = nullptr;
  auto consider = [&](std::string_view a) {
    ++at;
    if (learnt) {
      if (at == entry->holder_arg) {
        // Still a value the capture showed holding (a refused call may come after its
        // lease ran out); one never seen is no operation.
        const value_record* rec = flow.find(value_key(op.server_text, keys[0], a));
        if (rec == nullptr || !rec->held) return;
        value = a;
        values = 1;
        value_at = at;
      } else if (is_number(a)) {
        number = a;
        ++numbers;
      }
      return;
    }
    value_record* rec = flow.find(value_key(op.server_text, keys[0], a));
    if (rec != nullptr && rec->reply_position != 0 && !rec->held && rec->first_is_sha && rec->first_sha != current_sha) {
      drawn = rec;
      value = a;
      value_at = at;
      ++values;
      return;
    }
    if (rec != nullptr && rec->held && (rec->deadline_us < 0 || rec->deadline_us > op.at_us())) {
      value = a;
      value_at = at;
      ++values;
      return;
    }
    if (is_number(a)) {
      number = a;
      ++numbers;
    }
  };
  for (std::size_t i = 1; i < keys.size(); ++i) consider(keys[i]);
  for (std::string_view a : argv) consider(a);
  if (values != 1 || numbers > 1) return;  // which is the owner, or the lease, is not sure
  std::int64_t lease = -1;
  if (numbers == 1 && (!parse_int(number, lease) || lease <= 0)) return;
  if (drawn != nullptr) learn_drawn_value(*drawn);
  if (entry != nullptr && !learnt && value_at <= 255) {
    entry->holder_role = numbers == 1 ? script_op::extend : script_op::release;
    entry->holder_arg = static_cast<std::uint8_t>(value_at);
  }
  op.family = lock_family::set_based;
  op.shared = false;
  op.lock = keys[0];
  op.owner = value;
  op.channel = {};
  op.inferred = true;
  op.outcome = done ? op_outcome::ok : op_outcome::rejected;
  if (numbers == 1) {
    op.kind = lock_op_kind::renew;
    op.lease_ms = lease;
  } else {
    op.kind = lock_op_kind::unlock;
    op.lease_ms = -1;
  }
  emit(op);
}

// Unknown script: guess from the argument shape and the reply (see the header).
script_class lock_recognizer::state::infer_script(command_call& c, sha_entry& entry,
                                                  std::span<const std::string_view> keys,
                                                  std::span<const std::string_view> argv) {
  const reply_view& reply = c.reply;
  const std::string_view k2 = keys.size() >= 2 ? keys[1] : std::string_view();
  script_class g;
  g.lock_key = 1;
  if (starts_with(k2, "redisson_lock_queue:")) {
    g.family = lock_family::redisson_fair;
    g.op = keys.size() == 3 ? script_op::acquire : script_op::unlock;
    g.owner_argv = g.op == script_op::acquire ? 2 : 3;
    g.lease_argv = g.op == script_op::acquire ? 1 : 2;
    g.channel_key = g.op == script_op::unlock ? 4 : 0;
  } else if (is_lock_channel(k2) && !permit_channel(k2)) {
    g.family = starts_with(k2, "redisson_rwlock") ? lock_family::redisson_write : lock_family::redisson;
    g.channel_key = 2;
    if (argv.size() >= 3 && looks_like_owner(argv[2])) {
      g.op = script_op::unlock;
      g.owner_argv = 3;
      g.lease_argv = 2;
    } else if (argv.size() >= 2 && looks_like_owner(argv[1])) {
      g.op = script_op::unlock;  // read lock unlock: [message, owner]
      g.owner_argv = 2;
      g.family = lock_family::redisson_read;
    } else {
      g.op = script_op::force_unlock;
    }
  } else if (starts_with(k2, "redisson_unlock_latch") && argv.size() >= 2 && looks_like_owner(argv[1])) {
    // RedissonSpinLock 3.24+: [name, latch], [lease, owner, latch life].
    g.family = lock_family::redisson_spin;
    g.op = script_op::unlock;
    g.owner_argv = 2;
    g.lease_argv = 1;
  } else if (starts_with(k2, "redisson_lock_token:")) {
    g.family = lock_family::redisson_fenced;
    g.op = script_op::acquire;
    g.owner_argv = 2;
    g.lease_argv = 1;
  } else if (keys.size() >= 1 && argv.size() == keys.size() + 1 && is_number(argv[0]) && looks_like_owner(argv[1]) &&
             reply.kind == reply_view::shape::array) {
    g.family = lock_family::redisson;
    g.op = script_op::renew_batch;
    g.owner_argv = 2;
    g.lease_argv = 1;
  } else if (keys.size() == 1 && argv.size() == 2 && is_number(argv[0]) && looks_like_owner(argv[1])) {
    g.family = lock_family::redisson;
    g.owner_argv = 2;
    g.lease_argv = 1;
    const bool decisive = reply.kind == reply_view::shape::null ||
                          (reply.kind == reply_view::shape::integer && reply.integer >= 2) ||
                          (reply.kind == reply_view::shape::integer && reply.integer == -1);
    if (decisive) entry.acquire_proven = true;
    g.op = entry.acquire_proven || decisive ? script_op::acquire : script_op::renew;
  } else if (keys.size() >= 1 && argv.size() == 1 && reply.kind == reply_view::shape::integer) {
    // get == value → del: one key (redis-py, redsync, redis-plus-plus) or node-redlock's N.
    g.family = keys.size() == 1 ? lock_family::set_based : lock_family::redlock_multi;
    g.op = keys.size() == 1 ? script_op::release : script_op::multi_release;
    g.owner_argv = 1;
  } else if (std::int64_t limit = 0, ttl = 0, now = 0;
             keys.size() == 1 && argv.size() == 4 && parse_int(argv[0], limit) && limit >= 1 && limit <= 1'000'000 &&
             !is_number(argv[1]) && parse_int(argv[2], ttl) && ttl > 0 && parse_int(argv[3], now) &&
             now >= 1'000'000'000'000 && reply.kind == reply_view::shape::integer && reply.integer >= 0 &&
             reply.integer <= 1) {
    // [limit, member, ttl, now], answered 1/0: a sorted-set semaphore's acquire (or its
    // refresh: the timeline reads a held member's acquire as one), npm redis-semaphore's
    // form (its texts are read by permit_scripts.cpp when seen).
    g.family = lock_family::semaphore;
    g.permit_role = permit_zset_acquire;
    g.limit_argv = 1;
    g.owner_argv = 2;
    g.lease_argv = 3;
    g.now_argv = 4;
    return g;
  } else if (argument_roles roles; keys.size() >= 1 && argv.size() >= 2 && !is_number(argv[0]) &&
                                    !is_decimal_fraction(argv[0]) && is_number(argv[1]) &&
             reply.kind == reply_view::shape::integer &&
             // `[value, db]` with no lease: a release (infer_by_argument_roles)
             !((roles = roles_of(argv)).value == 1 && roles.lease == 0)) {
    // [value, ttl]: node-redlock's acquire and extend have the same shape; how the
    // value flows tells them apart.
    const bool multi = keys.size() > 1;
    if (multi && (entry.keys_not_all_locks || (reply.integer > 0 && reply.integer < static_cast<std::int64_t>(keys.size())))) {
      // node-redlock's acquire and extend set all their keys or none, and answer how many:
      // a script answering part of its keys (a job's lock renewed beside the job queue's
      // bookkeeping keys) is not that, on this call or any later one.
      entry.keys_not_all_locks = true;
      return g;
    }
    const script_op role = value_role(entry, c.e.server_text, keys[0], argv[0], current_sha, reply.integer >= 1,
                                      c.op.at_us());
    g.family = multi ? lock_family::redlock_multi : lock_family::set_based;
    g.op = role == script_op::acquire ? (multi ? script_op::multi_acquire : script_op::acquire)
                                      : (multi ? script_op::multi_extend : script_op::extend);
    g.owner_argv = 1;
    g.lease_argv = 2;
    // The lease among the numbers after the value (`[value, db, ttl]`: not the database).
    if (roles.value == 1 && roles.lease != 0) g.lease_argv = roles.lease;
    g.lease_seconds = lease_in_seconds(arg_at(argv, g.lease_argv));
    // redis-py's extend: [token, ms, "0" | "1"], the time added unless "1" (replace_ttl).
    if (g.op == script_op::extend && argv.size() == 3 && (argv[2] == "0" || argv[2] == "1")) {
      g.lease_added = true;
      g.replace_argv = 3;
    }
  }
  if (g.op == script_op::none && g.permit_role == 0) return infer_by_argument_roles(c, entry, keys, argv);
  if (g.op == script_op::unlock) {
    // Redisson 3.24+'s unlock latch, wherever the call puts it (KEYS[3], [5] or [2]).
    for (std::size_t i = 1; i < keys.size() && i < 255; ++i) {
      if (starts_with(keys[i], "redisson_unlock_latch")) g.latch_key = static_cast<std::uint8_t>(i + 1);
    }
  }
  return g;
}

void lock_recognizer::state::emit_script_operations(command_call& c, const script_class& cls,
                                                    std::span<const std::string_view> keys,
                                                    std::span<const std::string_view> argv) {
  lock_operation& op = c.op;
  const reply_view& reply = c.reply;
  op.family = cls.family;
  op.shared = cls.shared || cls.family == lock_family::redisson_read;
  op.lock = arg_at(keys, cls.lock_key);
  op.owner = arg_at(argv, cls.owner_argv);
  op.channel = arg_at(keys, cls.channel_key);
  op.lease_ms = int_arg(argv, cls.lease_argv);
  if (op.lock.empty() && cls.op != script_op::renew_batch && cls.op != script_op::multi_acquire &&
      cls.op != script_op::multi_extend && cls.op != script_op::multi_release) {
    return;
  }
  const bool no_reply = reply.kind == reply_view::shape::none;
  const bool error = reply.kind == reply_view::shape::error;

  switch (cls.op) {
    case script_op::acquire:
      op.kind = lock_op_kind::acquire;
      read_acquire_reply(op, cls, reply);
      emit(op);
      return;
    case script_op::unlock:
    case script_op::release:
      op.kind = lock_op_kind::unlock;
      op.outcome = unlock_outcome(cls, reply);
      // (An error reply ran nothing: a TRYAGAIN/ASK'd unlock's retry is the first run.)
      if (!no_reply && !error && cls.op == script_op::unlock && cls.latch_key != 0 && keys.size() >= cls.latch_key &&
          starts_with(keys[cls.latch_key - 1], "redisson_unlock_latch") &&
          replayed_unlock(c.e.server_text, keys[cls.latch_key - 1])) {
        op.outcome = op_outcome::none;  // a retried unlock: the reply replays the first
      }
      emit(op);
      return;
    case script_op::renew:
    case script_op::extend:
      op.kind = lock_op_kind::renew;
      op.lease_added = cls.lease_added && (cls.replace_argv == 0 || arg_at(argv, cls.replace_argv) != "1");
      op.outcome = no_reply ? op_outcome::no_reply
                   : error  ? op_outcome::error
                   : reply.kind == reply_view::shape::integer ? (reply.integer >= 1 ? op_outcome::ok : op_outcome::rejected)
                   : reply.kind == reply_view::shape::ok      ? op_outcome::ok
                                                              : op_outcome::rejected;
      emit(op);
      return;
    case script_op::force_unlock:
      op.kind = lock_op_kind::force_unlock;
      op.owner = {};
      op.lease_ms = -1;
      op.outcome = no_reply ? op_outcome::no_reply
                   : error  ? op_outcome::error
                   // FasterMultiLock's answers how many of its group's locks it removed.
                   : reply.kind == reply_view::shape::integer && reply.integer >= 1 ? op_outcome::ok
                                                                                     : op_outcome::none;
      emit(op);
      return;
    case script_op::renew_batch:
    case script_op::multi_acquire:
    case script_op::multi_extend:
    case script_op::multi_release:
      emit_multi_key_operations(c, cls, keys, argv);
      return;
    case script_op::abandon: {
      // The lock's name inside its queue's: `redisson_lock_queue:{name}`, or, for a
      // name with braces of its own, `redisson_lock_queue:name`.
      constexpr std::string_view prefix = "redisson_lock_queue:";
      if (!starts_with(op.lock, prefix) || no_reply || error) return;
      std::string_view name = op.lock.substr(prefix.size());
      if (name.size() >= 2 && name.front() == '{' && name.back() == '}' &&
          name.find('{', 1) == std::string_view::npos) {
        name = name.substr(1, name.size() - 2);
      }
      if (name.empty()) return;
      op.lock = name;
      op.kind = lock_op_kind::acquire;
      op.lease_ms = -1;
      op.outcome = op_outcome::abandoned;
      emit(op);
      return;
    }
    case script_op::none:
      return;
  }
}

// A call on several keys at once: one operation per key.
void lock_recognizer::state::emit_multi_key_operations(command_call& c, const script_class& cls,
                                                       std::span<const std::string_view> keys,
                                                       std::span<const std::string_view> argv) {
  lock_operation& op = c.op;
  const reply_view& reply = c.reply;
  const bool no_reply = reply.kind == reply_view::shape::none;
  const bool error = reply.kind == reply_view::shape::error;
  if (cls.op == script_op::renew_batch) {
    op.kind = lock_op_kind::renew;
    op.lease_ms = int_arg(argv, 1);
    std::array<std::int64_t, 64> results{};
    std::size_t total = 0;
    const std::size_t n = array_integers(reply, results, total);
    auto outcome_of = [&](std::size_t i) {
      if (no_reply) return op_outcome::no_reply;
      if (error) return op_outcome::error;
      if (reply.kind == reply_view::shape::integer) return reply.integer >= 1 ? op_outcome::ok : op_outcome::rejected;
      if (i < n) return results[i] >= 1 ? op_outcome::ok : op_outcome::rejected;
      return op_outcome::no_reply;
    };
    if (cls.batch == batch_layout::owner_per_key) {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        op.lock = keys[i];
        op.owner = i + 2 <= argv.size() ? argv[i + 1] : std::string_view();
        op.outcome = outcome_of(i);
        emit(op);
      }
      return;
    }
    // Read locks: KEYS in pairs (the lock, its timeout prefix); one reply per pair.
    std::size_t at = 1;  // the next ARGV (0-based) after the lease
    for (std::size_t pair = 0; 2 * pair < keys.size(); ++pair) {
      op.lock = keys[2 * pair];
      op.outcome = outcome_of(pair);
      std::int64_t owners = 1;
      if (cls.batch == batch_layout::key_pairs_counted) {
        if (at >= argv.size() || !parse_int(argv[at], owners) || owners < 0) return;  // not this layout
        ++at;
      }
      for (std::int64_t k = 0; k < owners && at < argv.size(); ++k, ++at) {
        op.owner = argv[at];
        emit(op);
      }
    }
    return;
  }
  // node-redlock's multi_acquire / multi_extend / multi_release.
  op.owner = arg_at(argv, cls.owner_argv);
  op.lease_ms = int_arg(argv, cls.lease_argv);
  const bool all = reply.kind == reply_view::shape::integer && reply.integer >= static_cast<std::int64_t>(keys.size());
  for (std::string_view key : keys) {
    op.lock = key;
    if (cls.op == script_op::multi_acquire) {
      op.kind = lock_op_kind::acquire;
      op.outcome = no_reply ? op_outcome::no_reply : error ? op_outcome::error : all ? op_outcome::ok : op_outcome::contended;
    } else if (cls.op == script_op::multi_extend) {
      op.kind = lock_op_kind::renew;
      op.outcome = no_reply ? op_outcome::no_reply : error ? op_outcome::error : all ? op_outcome::ok : op_outcome::rejected;
    } else {
      op.kind = lock_op_kind::unlock;
      // The count says how many keys still held this value; which ones is not known.
      op.outcome = no_reply ? op_outcome::no_reply
                   : error  ? op_outcome::error
                   : reply.kind == reply_view::shape::integer && reply.integer > 0 ? op_outcome::ok
                                                                                    : op_outcome::rejected;
    }
    emit(op);
  }
}

}  // namespace lockscope::locks
