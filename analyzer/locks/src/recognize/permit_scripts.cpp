// Semaphores and latches: which script is which (permit_script_class), and the
// operations their calls make (emit_permit_operations).
//
// A text of lock::all_primitive_scripts() (Redisson 4.7.0's RSemaphore,
// RPermitExpirableSemaphore and RCountDownLatch, byte for byte) takes its catalogue
// role. Any other text is read by what it does, on its normalised form
// (normalize_script): Redisson's other releases write the same scripts with a literal
// 'publish', another ARGV order (3.16's permit-expirable acquire takes [permits,
// expiry, id, now, no-lease] and answers the id) or without the expiry check; the roles
// are told apart by the commands each runs on KEYS[1] (a string of free permits or a
// count) and on the timeout sorted set, and the argument positions are read from the
// operands of those commands.
#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "lockscope/lock/scripts.hpp"
#include "recognize/lock_channels.hpp"
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

using lock::primitive_script;

bool has(std::string_view norm, std::string_view s) noexcept { return norm.find(s) != std::string_view::npos; }

// The ARGV index in `norm` right after `prefix` ("…argv[3]…" → 3); 0 when absent.
std::uint8_t argv_after(std::string_view norm, std::string_view prefix) {
  const std::size_t at = norm.find(prefix);
  if (at == std::string_view::npos) return 0;
  std::size_t i = at + prefix.size();
  if (norm.substr(i, 5) != "argv[") return 0;
  i += 5;
  unsigned v = 0;
  while (i < norm.size() && norm[i] >= '0' && norm[i] <= '9' && v < 255) v = v * 10 + static_cast<unsigned>(norm[i++] - '0');
  return i < norm.size() && norm[i] == ']' ? static_cast<std::uint8_t>(v) : 0;
}

script_class with_role(primitive_script role, lock_family family) {
  script_class c;
  c.family = family;
  c.permit_role = static_cast<std::uint8_t>(static_cast<unsigned>(role) + 1);
  return c;
}

// The argument positions of a permit-expirable acquire: the zadd's score (the expiry)
// and member (the id, or `argv[i]` in a loop from `for i = N`), the expired-ids scan's
// upper bound (now).
void read_expirable_acquire(std::string_view norm, script_class& c) {
  c.now_argv = argv_after(norm, "'zrangebyscore',keys[2],0,");
  const std::size_t z = norm.find("'zadd',keys[2],");
  if (z == std::string_view::npos) return;
  c.lease_argv = argv_after(norm.substr(z), "'zadd',keys[2],");
  const std::string_view after = norm.substr(z + 15);
  const std::size_t comma = after.find(',');
  if (comma == std::string_view::npos) return;
  const std::string_view member = after.substr(comma + 1);
  if (member.substr(0, 7) == "argv[i]") {
    const std::size_t loop = norm.find("fori=");
    if (loop != std::string_view::npos) {
      unsigned v = 0;
      for (std::size_t i = loop + 5; i < norm.size() && norm[i] >= '0' && norm[i] <= '9' && v < 255; ++i) v = v * 10 + static_cast<unsigned>(norm[i] - '0');
      c.owner_argv = static_cast<std::uint8_t>(v);
      c.ids_from_owner_argv = true;
    }
  } else {
    c.owner_argv = argv_after(member, "");
  }
}

// A sorted-set semaphore (npm redis-semaphore's Semaphore and its kind): read from the
// script's redis.call()s with its Lua locals resolved (`local key = KEYS[1]`, `local
// limit = tonumber(ARGV[1])`). Acquire: ZCARD of KEYS[1] compared `<` with an ARGV (the
// limit), then ZADD of an ARGV member (the holder); refresh: ZSCORE of the member,
// then ZADD; the lease is the PEXPIRE's ARGV (or the ZREMRANGEBYSCORE's `now - ARGV`).
// Scanned by hand, not by std::regex: an untrusted script can be megabytes long, and
// libstdc++'s regex recurses per character (a stack overflow on a long operand).
bool ident_char(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

// "keys[12]" / "argv[3]" at `at` in `s`: its length, 0 when it is not one.
std::size_t keys_or_argv_at(std::string_view s, std::size_t at) noexcept {
  const std::string_view rest = s.substr(at);
  if (rest.substr(0, 5) != "keys[" && rest.substr(0, 5) != "argv[") return 0;
  std::size_t i = 5;
  while (i < rest.size() && i < 9 && rest[i] >= '0' && rest[i] <= '9') ++i;
  return i > 5 && i < rest.size() && rest[i] == ']' ? i + 1 : 0;
}

struct operand_reader {
  std::unordered_map<std::string, std::string> alias;  // local name → "keys[1]" / "argv[2]"
  explicit operand_reader(std::string_view norm) {
    // `local<name>=keys[n]`, `local<name>=argv[n]`, `local<name>=tonumber(argv[n])`.
    for (std::size_t at = norm.find("local"); at != std::string_view::npos; at = norm.find("local", at + 5)) {
      std::size_t i = at + 5;
      const std::size_t name_from = i;
      while (i < norm.size() && ident_char(norm[i])) ++i;
      if (i == name_from || i >= norm.size() || norm[i] != '=') continue;
      const std::string_view name = norm.substr(name_from, i - name_from);
      ++i;
      if (norm.substr(i, 9) == "tonumber(") i += 9;
      const std::size_t n = keys_or_argv_at(norm, i);
      if (n == 0 || alias.size() >= 256) continue;
      alias.emplace(std::string(name), std::string(norm.substr(i, n)));
    }
  }
  // "argv[3]" (through aliases and tonumber()); "" when it is neither KEYS nor ARGV.
  std::string resolve(std::string operand) const {
    if (operand.rfind("tonumber(", 0) == 0 && !operand.empty() && operand.back() == ')') {
      operand = operand.substr(9, operand.size() - 10);
    }
    if (keys_or_argv_at(operand, 0) == operand.size() && !operand.empty()) return operand;
    const auto it = alias.find(operand);
    return it != alias.end() ? it->second : std::string();
  }
  static std::uint8_t argv_index(const std::string& r) {
    if (r.rfind("argv[", 0) != 0) return 0;
    return static_cast<std::uint8_t>(std::min(255, std::atoi(r.c_str() + 5)));
  }
};

struct zcall {
  std::string command;
  std::vector<std::string> operands;
  std::string after;  // the text after the call's ')' (a comparison's other side)
};

// Every `redis.call('<word>',<operands without parentheses>)` (and pcall), at most 256.
std::vector<zcall> redis_calls(std::string_view norm) {
  std::vector<zcall> out;
  for (std::size_t at = norm.find("redis."); at != std::string_view::npos && out.size() < 256; at = norm.find("redis.", at + 6)) {
    std::size_t i = at + 6;
    if (norm.substr(i, 1) == "p") ++i;
    if (norm.substr(i, 6) != "call('") continue;
    i += 6;
    const std::size_t word_from = i;
    while (i < norm.size() && norm[i] >= 'a' && norm[i] <= 'z') ++i;
    if (i == word_from || norm.substr(i, 2) != "',") continue;
    zcall c;
    c.command.assign(norm.substr(word_from, i - word_from));
    i += 2;
    const std::size_t ops_from = i;
    while (i < norm.size() && norm[i] != ')' && norm[i] != '(') ++i;
    if (i >= norm.size() || norm[i] != ')') continue;
    const std::string_view ops = norm.substr(ops_from, i - ops_from);
    for (std::size_t from = 0; c.operands.size() < 16;) {
      const std::size_t comma = ops.find(',', from);
      c.operands.emplace_back(ops.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
    c.after.assign(norm.substr(i + 1, 24));
    out.push_back(std::move(c));
  }
  return out;
}

script_class zset_semaphore_class(const std::string& norm) {
  if (!has(norm, "'zadd'")) return {};
  const operand_reader r(norm);
  const std::vector<zcall> calls = redis_calls(norm);
  std::string member;
  std::uint8_t limit = 0, lease = 0, now = 0;
  bool zscore = false, zadd = false;
  for (const zcall& c : calls) {
    if (c.operands.empty() || r.resolve(c.operands[0]) != "keys[1]") continue;
    // A member the script names itself (a writer's mark beside the holders: a
    // read/write lock) is no semaphore of its callers' members: read by its effect.
    const bool member_call = c.command == "zadd" || c.command == "zscore" || c.command == "zrem";
    if (member_call && c.operands.size() >= 2 && !c.operands.back().empty() && c.operands.back().front() == '\'') return {};
    if (c.command == "zadd" && c.operands.size() == 3) {
      member = r.resolve(c.operands[2]);
      now = operand_reader::argv_index(r.resolve(c.operands[1]));
      zadd = operand_reader::argv_index(member) != 0;
    } else if (c.command == "zcard" && c.after.size() > 1 && c.after[0] == '<') {
      std::string bound = c.after.substr(c.after[1] == '=' ? 2 : 1);
      bound = bound.substr(0, bound.find("then"));
      limit = operand_reader::argv_index(r.resolve(bound));
    } else if (c.command == "zscore" && c.operands.size() == 2) {
      zscore = true;
    } else if (c.command == "pexpire" && c.operands.size() == 2) {
      lease = operand_reader::argv_index(r.resolve(c.operands[1]));
    }
  }
  if (!zadd) return {};
  script_class c;
  c.family = lock_family::semaphore;
  c.owner_argv = operand_reader::argv_index(member);
  c.lease_argv = lease;
  c.limit_argv = limit;
  c.now_argv = now;
  if (limit != 0) c.permit_role = permit_zset_acquire;
  else if (zscore) c.permit_role = permit_zset_refresh;
  else return {};
  return c;
}

}  // namespace

script_class permit_script_class(std::string_view text) {
  for (const lock::primitive_script_info& s : lock::all_primitive_scripts()) {
    if (s.text != text) continue;
    switch (s.kind) {
      case primitive_script::semaphore_try_acquire:
      case primitive_script::semaphore_release:
      case primitive_script::semaphore_try_set_permits:
      case primitive_script::semaphore_add_permits:
      case primitive_script::semaphore_drain_permits:
        return with_role(s.kind, lock_family::redisson_semaphore);
      case primitive_script::latch_count_down:
      case primitive_script::latch_try_set_count:
      case primitive_script::latch_delete:
        return with_role(s.kind, lock_family::redisson_latch);
      case primitive_script::expirable_try_acquire: {
        script_class c = with_role(s.kind, lock_family::redisson_expirable);
        read_expirable_acquire(normalize_script(text), c);
        return c;
      }
      case primitive_script::expirable_try_release: {
        script_class c = with_role(s.kind, lock_family::redisson_expirable);
        c.owner_argv = 1;
        c.permits_argv = 2;
        c.now_argv = 3;
        return c;
      }
      case primitive_script::expirable_available_permits:
      case primitive_script::expirable_add_permits:
        return with_role(s.kind, lock_family::redisson_expirable);
    }
  }
  // Not a catalogue text: read what it does.
  const std::string norm = normalize_script(text);
  if (script_class z = zset_semaphore_class(norm); z.permit_role != 0) return z;
  const bool timeout_set = has(norm, "'zrangebyscore',keys[2]") || has(norm, "'zrem',keys[3]");
  if (timeout_set) {
    if (has(norm, "'zadd',keys[2]") && has(norm, "'decrby',keys[1]")) {
      script_class c = with_role(primitive_script::expirable_try_acquire, lock_family::redisson_expirable);
      read_expirable_acquire(norm, c);
      return c.lease_argv != 0 && c.owner_argv != 0 ? c : script_class{};
    }
    if (has(norm, "'zrem',keys[3],argv[1]") && has(norm, "'incrby',keys[1],argv[2]")) {
      script_class c = with_role(primitive_script::expirable_try_release, lock_family::redisson_expirable);
      c.owner_argv = 1;
      c.permits_argv = 2;
      if (has(norm, "<=tonumber(argv[3])")) c.now_argv = 3;  // 3.2x+: an expired permit answers 0
      return c;
    }
    if (has(norm, "'zrangebyscore',keys[2]") && has(norm, "'incrby',keys[1]") && !has(norm, "'zadd'")) {
      return with_role(primitive_script::expirable_available_permits, lock_family::redisson_expirable);
    }
    return {};
  }
  // RSemaphore: KEYS[1] holds the free permits.
  if (has(norm, "'get',keys[1]") && has(norm, "tonumber(value)>=tonumber(argv[1])") && has(norm, "'decrby',keys[1],argv[1]")) {
    return with_role(primitive_script::semaphore_try_acquire, lock_family::redisson_semaphore);
  }
  if (has(norm, "localvalue=redis.call('incrby',keys[1],argv[1])") && has(norm, "keys[2],value)") && !has(norm, "'get'")) {
    return with_role(primitive_script::semaphore_release, lock_family::redisson_semaphore);
  }
  if (has(norm, "'get',keys[1]") && has(norm, "'set',keys[1],argv[1]") && has(norm, "value==false")) {
    return with_role(primitive_script::semaphore_try_set_permits, lock_family::redisson_semaphore);
  }
  if (has(norm, "'get',keys[1]") && (has(norm, "'set',keys[1],value+argv[1]") || has(norm, "'set',keys[1],tonumber(value)+tonumber(argv[1])"))) {
    return with_role(primitive_script::semaphore_add_permits, lock_family::redisson_semaphore);
  }
  if (has(norm, "'get',keys[1]") && has(norm, "'set',keys[1],0)") && has(norm, "returnvalue")) {
    return with_role(primitive_script::semaphore_drain_permits, lock_family::redisson_semaphore);
  }
  // RCountDownLatch: KEYS[1] holds the count.
  if (has(norm, "'decr',keys[1]") && has(norm, "'del',keys[1]")) {
    return with_role(primitive_script::latch_count_down, lock_family::redisson_latch);
  }
  if (has(norm, "'exists',keys[1])==0") && has(norm, "'set',keys[1],argv[2]")) {
    return with_role(primitive_script::latch_try_set_count, lock_family::redisson_latch);
  }
  return {};
}

namespace {

// A bulk or simple string reply's text; empty otherwise.
std::string_view reply_text(const reply_view& r) {
  if (r.m == nullptr || r.root == message::npos) return {};
  const message_node& n = r.m->nodes()[r.root];
  if (n.type != resp::type::bulk_string && n.type != resp::type::simple_string) return {};
  return r.m->text(n);
}

std::string_view at(std::span<const std::string_view> v, std::size_t i) noexcept {
  return i >= 1 && i <= v.size() ? v[i - 1] : std::string_view();
}

std::int64_t int_at(std::span<const std::string_view> v, std::size_t i) noexcept {
  std::int64_t x = -1;
  return parse_int(at(v, i), x) ? x : -1;
}

}  // namespace

void lock_recognizer::state::emit_permit_operations(command_call& c, const script_class& cls,
                                                    std::span<const std::string_view> keys,
                                                    std::span<const std::string_view> argv) {
  lock_operation& op = c.op;
  const reply_view& reply = c.reply;
  op.family = cls.family;
  op.shared = true;
  op.lock = at(keys, 1);
  if (op.lock.empty()) return;
  const bool no_reply = reply.kind == reply_view::shape::none;
  const bool error = reply.kind == reply_view::shape::error;
  const op_outcome failed = no_reply ? op_outcome::no_reply : op_outcome::error;
  const bool one = reply.kind == reply_view::shape::integer && reply.integer >= 1;
  if (cls.permit_role == permit_zset_acquire || cls.permit_role == permit_zset_refresh) {
    op.owner = at(argv, cls.owner_argv);
    op.lease_ms = int_at(argv, cls.lease_argv);
    op.limit = int_at(argv, cls.limit_argv);
    op.caller_now_ms = int_at(argv, cls.now_argv);
    op.permits = 1;
    if (cls.permit_role == permit_zset_acquire) {
      op.kind = lock_op_kind::acquire;
      op.outcome = no_reply || error ? failed : one ? op_outcome::ok : op_outcome::contended;
      if (zset_semaphores.size() < max_zset_semaphores) zset_semaphores.emplace(op.lock);
    } else {
      op.kind = lock_op_kind::renew;
      op.outcome = no_reply || error ? failed : one ? op_outcome::ok : op_outcome::rejected;
    }
    emit(op);
    return;
  }
  const auto role = static_cast<primitive_script>(cls.permit_role - 1);
  switch (role) {
    case primitive_script::semaphore_try_acquire:
      op.kind = lock_op_kind::acquire;
      op.permits = int_at(argv, 1);
      op.outcome = no_reply || error ? failed : one ? op_outcome::ok : op_outcome::contended;
      break;
    case primitive_script::semaphore_release:
      op.kind = lock_op_kind::unlock;
      op.channel = at(keys, 2);
      op.permits = int_at(argv, 1);
      op.outcome = no_reply || error ? failed : op_outcome::ok;
      break;
    case primitive_script::semaphore_try_set_permits:
    case primitive_script::latch_try_set_count:
      op.kind = lock_op_kind::set_permits;
      op.channel = at(keys, 2);
      op.permits = int_at(argv, role == primitive_script::latch_try_set_count ? 2 : 1);
      op.limit = op.permits;
      op.outcome = no_reply || error ? failed : one ? op_outcome::ok : op_outcome::none;
      break;
    case primitive_script::semaphore_add_permits:
    case primitive_script::expirable_add_permits:
      op.kind = lock_op_kind::set_permits;
      op.channel = at(keys, 2);
      op.permits = int_at(argv, 1);
      op.outcome = no_reply || error ? failed : op_outcome::ok;
      break;
    case primitive_script::semaphore_drain_permits:
      // Every free permit taken at once, by no one in particular.
      op.kind = lock_op_kind::acquire;
      op.permits = reply.kind == reply_view::shape::integer ? reply.integer : -1;
      if (const std::string_view t = reply_text(reply); !t.empty() && op.permits < 0) parse_int(t, op.permits);
      op.outcome = no_reply || error ? failed : op.permits > 0 ? op_outcome::ok : op_outcome::none;
      break;
    case primitive_script::latch_count_down:
      op.kind = lock_op_kind::count_down;
      op.channel = at(keys, 2);
      op.permits = 1;
      op.outcome = no_reply || error ? failed : op_outcome::ok;
      break;
    case primitive_script::latch_delete:
      op.kind = lock_op_kind::force_unlock;
      op.channel = at(keys, 2);
      op.outcome = no_reply || error ? failed : one ? op_outcome::ok : op_outcome::none;
      break;
    case primitive_script::expirable_try_acquire: {
      op.kind = lock_op_kind::acquire;
      op.channel = at(keys, 3);
      op.permits = int_at(argv, 1);
      const std::int64_t expiry = int_at(argv, cls.lease_argv);
      const std::int64_t now = int_at(argv, cls.now_argv);
      op.caller_now_ms = now;
      // A permit without a lease has the catalogue's far expiry (922337203685477).
      op.lease_ms = expiry > 0 && now > 0 && expiry - now < 100'000'000'000 ? expiry - now : -1;
      const std::string_view text = reply_text(reply);
      if (no_reply || error) op.outcome = failed;
      else if (reply.kind == reply_view::shape::null) op.outcome = op_outcome::contended;
      else if (!text.empty() && text.front() == ':') {
        op.outcome = op_outcome::contended;  // the nearest permit's expiry: retry then
        std::int64_t next = -1;
        if (parse_int(text.substr(1), next) && now > 0 && next >= now) op.ttl_ms = next - now;
      } else op.outcome = op_outcome::ok;  // "OK", or (3.16) the permit's id
      if (op.outcome != op_outcome::ok || !cls.ids_from_owner_argv) {
        op.owner = at(argv, cls.owner_argv);
        if (cls.ids_from_owner_argv && op.outcome != op_outcome::ok) op.owner = {};
        break;
      }
      // One operation per permit id.
      op.permits = 1;
      for (std::size_t i = cls.owner_argv; i <= argv.size(); ++i) {
        op.owner = argv[i - 1];
        emit(op);
      }
      return;
    }
    case primitive_script::expirable_try_release:
      op.kind = lock_op_kind::unlock;
      op.channel = at(keys, 2);
      op.owner = at(argv, cls.owner_argv);
      op.permits = int_at(argv, cls.permits_argv);
      op.caller_now_ms = int_at(argv, cls.now_argv);
      // 0: the id was not acquired, or its permit had expired (then it is given back
      // now, but the caller is told it had lost it).
      op.outcome = no_reply || error ? failed : one ? op_outcome::ok : op_outcome::rejected;
      break;
    case primitive_script::expirable_available_permits:
      return;  // a read (its return of expired permits is the timeline's to see by time)
  }
  emit(op);
}

void lock_recognizer::state::on_zrem(command_call& c) {
  // ZREM key member: a release of a sorted-set semaphore's holder.
  if (c.args.size() != 3 || zset_semaphores.empty()) return;
  if (zset_semaphores.find(std::string(c.args[1])) == zset_semaphores.end()) return;
  lock_operation& op = c.op;
  op.family = lock_family::semaphore;
  op.shared = true;
  op.kind = lock_op_kind::unlock;
  op.lock = c.args[1];
  op.owner = c.args[2];
  op.permits = 1;
  const reply_view& reply = c.reply;
  op.outcome = reply.kind == reply_view::shape::none    ? op_outcome::no_reply
               : reply.kind != reply_view::shape::integer ? op_outcome::error
               : reply.integer >= 1                       ? op_outcome::ok
                                                          : op_outcome::rejected;  // gone (expired and swept)
  emit(op);
}

}  // namespace lockscope::locks
