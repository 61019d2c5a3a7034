#include "lockscope/locks/lock_patterns.hpp"
#include "lockscope/resp/ascii.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace lockscope::locks {

namespace {

using resp::ascii_lower;
bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

struct call {
  std::string_view command;               // quoted literal without quotes, or an operand like argv[4]
  std::vector<std::string_view> operands; // the remaining arguments, as normalised text
};

// "keys[3]" → 3 for prefix "keys["; 0 when `s` is not exactly such an operand.
int index_of(std::string_view s, std::string_view prefix) {
  if (s.size() <= prefix.size() + 1 || s.substr(0, prefix.size()) != prefix || s.back() != ']') return 0;
  int v = 0;
  for (char c : s.substr(prefix.size(), s.size() - prefix.size() - 1)) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
    if (v > 250) return 0;
  }
  return v;
}
int key_index(std::string_view s) { return index_of(s, "keys["); }
int argv_index(std::string_view s) { return index_of(s, "argv["); }
// The first `argv[N]` anywhere inside an expression (e.g. `expiration+argv[2]`).
int argv_inside(std::string_view s) {
  const std::size_t p = s.find("argv[");
  if (p == std::string_view::npos) return 0;
  const std::size_t e = s.find(']', p);
  if (e == std::string_view::npos) return 0;
  return argv_index(s.substr(p, e - p + 1));
}
std::string_view unquote(std::string_view s) {
  if (s.size() >= 2 && s.front() == '\'' && s.back() == '\'') return s.substr(1, s.size() - 2);
  return s;
}

std::vector<call> parse_calls(std::string_view n) {
  std::vector<call> calls;
  std::size_t pos = 0;
  while (true) {
    const std::size_t a = n.find("redis.call(", pos);
    const std::size_t b = n.find("redis.pcall(", pos);
    const std::size_t start = std::min(a, b);
    if (start == std::string_view::npos) break;
    std::size_t i = start + (start == a ? 11 : 12);
    call c;
    int depth = 0;
    bool quoted = false;
    std::size_t arg_start = i;
    std::vector<std::string_view> args;
    for (; i < n.size(); ++i) {
      const char ch = n[i];
      if (quoted) {
        if (ch == '\\') ++i;
        else if (ch == '\'') quoted = false;
        continue;
      }
      if (ch == '\'') quoted = true;
      else if (ch == '(' || ch == '[' || ch == '{') ++depth;
      else if ((ch == ')' || ch == ']' || ch == '}') && depth > 0) --depth;
      else if (ch == ')' && depth == 0) {
        args.push_back(n.substr(arg_start, i - arg_start));
        break;
      } else if (ch == ',' && depth == 0) {
        args.push_back(n.substr(arg_start, i - arg_start));
        arg_start = i + 1;
      }
    }
    pos = i;
    if (args.empty() || i >= n.size()) break;
    c.command = unquote(args[0]);
    c.operands.assign(args.begin() + 1, args.end());
    calls.push_back(std::move(c));
  }
  return calls;
}

bool has(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

std::uint8_t u8(int v) { return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v)); }

}  // namespace

std::string normalize_script(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote != 0) {
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(c);
        out.push_back(ascii_lower(text[++i]));
        continue;
      }
      if (c == quote) {
        out.push_back('\'');
        quote = 0;
        continue;
      }
      out.push_back(ascii_lower(c));
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out.push_back('\'');
      continue;
    }
    if (c == '-' && i + 1 < text.size() && text[i + 1] == '-') {  // Lua comment to end of line
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (is_space(c)) continue;
    out.push_back(ascii_lower(c));
  }
  return out;
}

namespace {

// What a script's redis.call()s do, read before its class is decided: the operands
// that hold the owner, lease, channel and token, and which kinds of command it runs.
struct script_facts {
  int owner = 0, lease = 0, channel = 0, token = 0;
  bool inc = false, dec = false, hexists = false, pexpire = false, pttl = false, del1 = false,
       publish = false, get = false, set_px = false, set_nx = false, incr = false, mode = false,
       queue = false, exists = false, any_del = false, mode_write = false, hget_owner = false;
  int latch = 0;  // the unlock latch's KEYS position
  std::size_t countdown_at = std::string::npos;  // where the first hold count-down is in `norm`
  bool key_loop = false;                         // a loop over KEYS
};

script_facts read_facts(const std::string& norm, const std::vector<call>& calls) {
  script_facts f;
  for (const call& k : calls) {
    const std::string_view cmd = k.command;
    const auto& o = k.operands;
    const std::string_view o0 = o.size() > 0 ? o[0] : std::string_view();
    const std::string_view o1 = o.size() > 1 ? o[1] : std::string_view();
    const std::string_view o2 = o.size() > 2 ? o[2] : std::string_view();
    if (cmd == "hincrby" && argv_index(o1) > 0) {
      f.owner = argv_index(o1);
      if (o2 == "1") f.inc = true;
      else if (o2 == "-1") {
        f.dec = true;
        f.countdown_at = std::min(f.countdown_at, static_cast<std::size_t>(o1.data() - norm.data()));
      }
    } else if (cmd == "hset" && unquote(o1) == "mode") {
      f.mode = true;
      if (unquote(o2) == "write") f.mode_write = true;
    } else if (cmd == "hset" && argv_index(o1) > 0 && o2 == "1") {
      f.owner = argv_index(o1);
      f.inc = true;
    } else if (cmd == "hexists" && has(o1, "argv[")) {
      f.hexists = true;
      // `ARGV[i + 1]` in a loop over KEYS (batched renew): the owners start at ARGV[2].
      if (f.owner == 0) f.owner = argv_index(o1) > 0 ? argv_index(o1) : 2;
    } else if (cmd == "hget" && unquote(o1) == "mode") {
      f.mode = true;
    } else if (cmd == "hget" && has(o1, "argv[") && has(o0, "keys[") && !has(norm, "#argv")) {
      // Redisson's read renewal reads the owner's hold count: `hget(KEYS[1], ARGV[2])`
      // (batched: `hget(KEYS[i], ARGV[j])`).
      f.hget_owner = true;
      if (f.owner == 0) f.owner = argv_index(o1) > 0 ? argv_index(o1) : 2;
    } else if (cmd == "pexpire" || cmd == "expire") {
      if (has(o0, "keys[") || o0 == "key") f.pexpire = true;
      if (f.lease == 0) f.lease = argv_inside(o1);
    } else if (cmd == "pttl") {
      f.pttl = true;
    } else if (cmd == "del" || cmd == "unlink") {
      f.any_del = true;
      if (key_index(o0) == 1 || o0 == "key" || has(o0, "keys[i]")) f.del1 = true;
    } else if (cmd == "publish" || cmd == "spublish" || argv_index(cmd) > 0) {
      if (key_index(o0) > 0) {
        f.publish = true;
        f.channel = key_index(o0);
      } else if (has(o0, "keys[")) {
        f.publish = true;  // fair lock: KEYS[4] .. ':' .. owner
        f.channel = key_index(o0.substr(0, o0.find(']') + 1));
      }
    } else if (cmd == "get") {
      // Redisson's unlock latch: `local val = redis.call('get', KEYS[n]); if val ~= false
      // then return tonumber(val)` before anything else, on a key other than the lock.
      if (key_index(o0) > 1 && f.latch == 0 && !f.hexists && !f.dec && has(norm, "ifval~=falsethenreturntonumber(val)")) {
        f.latch = key_index(o0);
      } else {
        f.get = true;
      }
    } else if (cmd == "set") {
      if (f.latch != 0 && key_index(o0) == f.latch) continue;  // the latch: its PX is no lease
      for (std::size_t i = 1; i < o.size(); ++i) {
        const std::string_view opt = unquote(o[i]);
        if ((opt == "px" || opt == "ex") && i + 1 < o.size()) {
          f.set_px = true;
          if (f.lease == 0) f.lease = argv_inside(o[i + 1]);
        }
        if (opt == "nx") f.set_nx = true;
      }
      if (f.token == 0 && o.size() > 1) f.token = argv_index(o[1]);
    } else if (cmd == "incr") {
      f.incr = true;
    } else if (cmd == "lindex" || cmd == "zscore" || cmd == "rpush" || cmd == "zadd" || cmd == "lpop") {
      f.queue = true;
    } else if (cmd == "exists") {
      f.exists = true;
    }
  }
  return f;
}

// A loop over KEYS, read from the script as sent: Lua names are case-sensitive, and a
// local called `keys` (Redisson's read lock: `local keys = redis.call('hkeys', …)`) is
// not KEYS once the text is lower-cased.
bool loops_over_keys(std::string_view text) {
  return has(text, "ipairs(KEYS)") || has(text, "#KEYS") || has(text, "KEYS[i]");
}

// A Redisson hash lock (owner → hold count): its family and operation.
script_class classify_hash_lock(const script_facts& f, const std::string& norm, script_class c) {
  c.owner_argv = u8(f.owner);
  c.family = lock_family::redisson;
  if (f.queue) c.family = lock_family::redisson_fair;
  else if (f.mode) c.family = f.mode_write ? lock_family::redisson_write : lock_family::redisson_read;
  else if (f.incr) c.family = lock_family::redisson_fenced;
  if (f.dec) {
    c.op = script_op::unlock;
    c.channel_key = u8(f.channel);
    if (!f.publish && c.family == lock_family::redisson) c.family = lock_family::redisson_spin;
    if (f.mode) {
      // A write unlock counts a hold down only after finding the mode is 'write'; a read
      // unlock counts down in either mode (Redisson 3.x's compares with 'write' after
      // that, only to decide whether the key stays).
      const std::size_t write_check = std::min(norm.find("=='write'"), norm.find("'write'=="));
      c.family = write_check < f.countdown_at ? lock_family::redisson_write : lock_family::redisson_read;
    }
    return c;
  }
  if (f.inc && (f.pttl || f.queue || f.mode || f.incr)) {
    c.op = script_op::acquire;
    // Redisson's fair tryLock() without arguments answers a bare 1 when busy, no TTL.
    if (!f.pttl && norm.ends_with("return1;")) c.reply = acquire_reply::busy_one;
    // The fenced lockAndGetToken answers {-1, token} / {pttl, -1}.
    if (f.incr && has(norm, "return{-1,")) c.reply = acquire_reply::token_list;
    return c;
  }
  if ((f.hexists || f.hget_owner) && f.pexpire && !f.inc && !f.any_del) {
    c.op = f.key_loop ? script_op::renew_batch : script_op::renew;
    if (f.key_loop) c.owner_argv = 2;  // ARGV[i + 1]
    // A read lock's renewal also renews each read hold's `…:rwlock_timeout:<n>` key; batched,
    // its KEYS come in (lock, timeout prefix) pairs, since 4.4 with a count of owners per lock.
    if (has(norm, "rwlock_timeout")) {
      c.family = lock_family::redisson_read;
      c.shared = true;
      if (f.key_loop && has(norm, "keys[i+1]")) {
        c.batch = has(norm, "=tonumber(argv[argidx])") ? batch_layout::key_pairs_counted : batch_layout::key_pairs;
      }
    }
    return c;
  }
  c.family = lock_family::unknown;
  c.owner_argv = 0;
  return c;
}

// Every other lock script: Redisson's forceUnlock, node-redlock's multi-key scripts, and
// the SET-based scripts whose token is compared with a GET.
script_class classify_value_lock(const script_facts& f, const std::string& norm, script_class c) {
  if (f.del1 && f.publish && !f.get && !f.key_loop) {
    c.op = script_op::force_unlock;
    // Labelled with its lock type: a fair lock's wakes the queue's head; a read or write
    // lock's deletes only in its own mode.
    c.family = f.queue ? lock_family::redisson_fair
               : f.mode ? (has(norm, "=='write'") ? lock_family::redisson_write : lock_family::redisson_read)
                        : lock_family::redisson;
    c.channel_key = u8(f.channel);
    return c;
  }
  if (f.del1 && !f.publish && !f.get && !f.key_loop && !has(norm, "argv[") &&
      has(norm, "if(redis.call('del',keys[1])==1)thenreturn1")) {
    // RedissonSpinLock's forceUnlock: a DEL of the lock and nothing else (no waiters to wake).
    c.op = script_op::force_unlock;
    c.family = lock_family::redisson_spin;
    return c;
  }
  // The token is the ARGV compared with a GET's result.
  int compared = 0;
  for (std::string_view pat : {"==argv[", "~=argv[", "argv[1]=="}) {
    const std::size_t p = norm.find(pat);
    if (p != std::string::npos) {
      compared = pat == std::string_view("argv[1]==") ? 1 : argv_inside(norm.substr(p + 2, 10));
      break;
    }
  }
  if (f.key_loop && (f.set_px || f.any_del)) {
    c.family = lock_family::redlock_multi;
    c.owner_argv = u8(f.token > 0 ? f.token : (compared > 0 ? compared : 1));
    if (f.any_del && f.get) c.op = script_op::multi_release;
    else if (f.set_px && f.get) c.op = script_op::multi_extend;
    else if (f.set_px && f.exists) c.op = script_op::multi_acquire;
    else c.family = lock_family::unknown;
    return c;
  }
  if (f.get && compared > 0) {
    c.family = lock_family::set_based;
    c.owner_argv = u8(compared);
    if (f.del1) c.op = script_op::release;
    else if (f.pexpire || f.set_px) {
      c.op = script_op::extend;
      // redis-py: `pexpire(KEYS[1], expiration + ARGV[2])`, since 4.0 only when
      // `ARGV[3] == "0"` (replace_ttl false).
      const int lease_at = c.lease_argv != 0 ? c.lease_argv : (compared == 1 ? 2 : 1);
      const std::string lease_operand = "argv[" + std::to_string(lease_at) + "]";
      if (has(norm, lease_operand + "+expiration") || has(norm, "expiration+" + lease_operand)) {
        c.lease_added = true;
        const std::size_t flag = norm.find("ifargv[");
        const std::size_t close = flag == std::string::npos ? flag : norm.find(']', flag);
        if (close != std::string::npos && norm.compare(close + 1, 9, "=='0'then") == 0) {
          c.replace_argv = u8(argv_index(norm.substr(flag + 2, close - flag - 1)));
        }
      }
      if (c.lease_argv == 0) {
        // redis-py style `pexpire(KEYS[1], expiration + ARGV[2])` was read above; else
        // take the first ARGV that is not the token.
        c.lease_argv = u8(compared == 1 ? 2 : 1);
      }
    } else c.family = lock_family::unknown;
    return c;
  }
  if (f.set_nx && f.set_px) {
    c.family = lock_family::set_based;
    c.op = script_op::acquire;
    c.owner_argv = u8(f.token > 0 ? f.token : 1);
    return c;
  }
  return c;
}

}  // namespace

namespace {
// A fair waiter's clean-up (Redisson's acquireFailed, every spelling since 3.10): it
// removes the owner ARGV[1] from the queue list KEYS[1] and the timeout set KEYS[2],
// moving the later waiters' timeouts, and touches no lock key.
bool leaves_fair_queue(const std::vector<call>& calls) {
  bool lrem = false, zrem = false;
  for (const call& c : calls) {
    const auto& o = c.operands;
    if (c.command == "lrem" && o.size() == 3 && o[0] == "keys[1]" && o[2] == "argv[1]") lrem = true;
    else if (c.command == "zrem" && o.size() == 2 && o[0] == "keys[2]" && o[1] == "argv[1]") zrem = true;
    else if (c.command != "lrange" && c.command != "lindex" && c.command != "zrange" && c.command != "zincrby") return false;
  }
  return lrem && zrem;
}
}  // namespace

script_class classify_script(std::string_view text) {
  const std::string norm = normalize_script(text);
  const std::vector<call> calls = parse_calls(norm);
  script_class c;
  if (calls.empty()) return c;
  if (leaves_fair_queue(calls)) {
    c.op = script_op::abandon;
    c.family = lock_family::redisson_fair;
    c.lock_key = 1;
    c.owner_argv = 1;
    return c;
  }
  script_facts f = read_facts(norm, calls);
  f.key_loop = loops_over_keys(text);
  c.lease_argv = u8(f.lease);
  c.latch_key = u8(f.latch);
  if (f.owner > 0 && (f.inc || f.dec || f.hexists || f.hget_owner)) return classify_hash_lock(f, norm, c);
  return classify_value_lock(f, norm, c);
}

namespace {
// Written in Redisson's own style (string concatenations joined); see wire-facts §1.
constexpr std::array<known_script, 5> extra{{
    {"redisson acquire (one branch, since 2022)",
     "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
     "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
     "return redis.call('pttl', KEYS[1]);"},
    {"redisson unlock (latch, publish command as ARGV, since 3.24)",
     "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; "
     "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
     "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then "
     "redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
     "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
     "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; "},
    {"redisson renew (batched, since 3.44)",
     "local result = {} for i = 1, #KEYS, 1 do if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then "
     "redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1); else table.insert(result, 0); end; end; "
     "return result;"},
    {"redisson forceUnlock (publish command as ARGV)",
     "if (redis.call('del', KEYS[1]) == 1) then redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1 else return 0 end"},
    {"redisson spin unlock",
     "if (redis.call('hexists', KEYS[1], ARGV[2]) == 0) then return nil;end; "
     "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter > 0) then "
     "redis.call('pexpire', KEYS[1], ARGV[1]); return 0; else redis.call('del', KEYS[1]); return 1; end; "
     "return nil;"},
}};
}  // namespace

std::span<const known_script> known_scripts() noexcept { return extra; }

script_class redisson_script_class(const lock::redisson_script& s) {
  using lock::redisson_lock_type;
  using lock::redisson_role;
  script_class c;
  c.lock_key = s.lock_key;
  c.channel_key = s.channel_key;
  c.latch_key = s.latch_key;
  c.owner_argv = s.owner_argv;
  c.lease_argv = s.lease_argv;
  switch (s.type) {
    case redisson_lock_type::lock:
    case redisson_lock_type::non_reentrant: c.family = lock_family::redisson; break;
    case redisson_lock_type::fair:
    case redisson_lock_type::non_reentrant_fair: c.family = lock_family::redisson_fair; break;
    case redisson_lock_type::read: c.family = lock_family::redisson_read; break;
    case redisson_lock_type::write: c.family = lock_family::redisson_write; break;
    case redisson_lock_type::spin: c.family = lock_family::redisson_spin; break;
    case redisson_lock_type::fenced: c.family = lock_family::redisson_fenced; break;
    case redisson_lock_type::faster_multi:
      // One hash for the group, a field per lock: threads holding different locks of one
      // group are several holders of the group's key, not an overlap.
      c.family = lock_family::redisson;
      c.shared = true;
      break;
  }
  c.shared = c.shared || c.family == lock_family::redisson_read;
  switch (s.role) {
    case redisson_role::acquire: c.op = script_op::acquire; break;
    case redisson_role::try_acquire:
      c.op = script_op::acquire;
      c.reply = acquire_reply::busy_one;
      break;
    case redisson_role::acquire_once:
      c.op = script_op::acquire;
      c.reply = acquire_reply::one_zero;
      break;
    case redisson_role::acquire_token:
      c.op = script_op::acquire;
      c.reply = acquire_reply::token_list;
      break;
    case redisson_role::unlock: c.op = script_op::unlock; break;
    case redisson_role::force_unlock:
      c.op = script_op::force_unlock;
      c.owner_argv = 0;
      c.lease_argv = 0;
      break;
    case redisson_role::renew: c.op = script_op::renew; break;
    case redisson_role::renew_batch:
      c.op = script_op::renew_batch;
      if (s.type == redisson_lock_type::read) {
        // 4.4+ counts each lock's owners (`lockNamesCount = tonumber(ARGV[argIdx])`).
        c.batch = s.text.find("lockNamesCount") != std::string_view::npos ? batch_layout::key_pairs_counted
                                                                          : batch_layout::key_pairs;
      }
      break;
    case redisson_role::acquire_failed:
      c.op = script_op::abandon;
      c.lock_key = 1;
      c.lease_argv = 0;
      break;
    case redisson_role::expire:
    case redisson_role::query:
      c = script_class{};
      break;
  }
  return c;
}

}  // namespace lockscope::locks
