// The sandbox (see lua_sandbox.hpp). Lua 5.1 reports errors with longjmp, which skips
// C++ destructors: every C function here keeps its C++ objects in the run's context
// (which outlives the interpreter) and calls into Lua only with trivially destructible
// locals alive.
#include "recognize/lua_sandbox.hpp"

#include "recognize/lua_codecs.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

#include "lockscope/lock/scripts.hpp"
#include "lockscope/locks/command_words.hpp"

namespace lockscope::locks::effect {

std::string score_text(double score) {
  if (std::isinf(score)) return score > 0 ? "inf" : "-inf";
  char buf[40];
  if (score == std::floor(score) && std::fabs(score) < 1e17) {
    std::snprintf(buf, sizeof buf, "%.0f", score);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, score);
    if (std::strtod(buf, nullptr) == score) break;
  }
  return buf;
}

namespace {

struct alignas(16) run_block {
  run_block* prev;
  run_block* next;
};

struct context {
  shadow_store* store = nullptr;
  shadow_journal* journal = nullptr;
  const sandbox_limits* limits = nullptr;
  run_result* result = nullptr;
  std::size_t heap = 0;
  std::size_t peak_heap = 0;  // the most the heap would have held after a growing allocation
  std::uint64_t executed = 0;
  // The interpreter's blocks inside a kept interpreter's arena (see interpreter_image):
  // never handed to free or realloc. While the image is made, `image_used` is set and
  // every block is carved from the arena.
  std::byte* arena = nullptr;
  std::size_t arena_size = 0;
  std::size_t* image_used = nullptr;
  // A run from the image keeps its other blocks listed, so that its end frees them
  // without lua_close's walk over every object of the image; cjson's configuration, the
  // one object that holds memory of its own, is finalized then unless the run did.
  run_block* blocks = nullptr;
  bool listing = false;
  void* codec_config = nullptr;
  lua_CFunction codec_finalizer = nullptr;
  std::chrono::nanoseconds deadline{};  // in the thread's CPU time
  int hooks_to_clock = 0;
  bool limit_hit = false;
  bool unsupported = false;
  std::size_t store_bytes = 0;
  // One redis.call's arguments and answer.
  std::vector<std::string> args;
  lua_reply answer;
  std::string failure;  // an error answer's text
};

context& ctx_of(lua_State* L) {
  void* ud = nullptr;
  lua_getallocf(L, &ud);
  return *static_cast<context*>(ud);
}

bool in_arena(const context& c, const void* p) {
  return c.arena != nullptr && static_cast<const std::byte*>(p) >= c.arena && static_cast<const std::byte*>(p) < c.arena + c.arena_size;
}

void link(context& c, run_block* b) {
  b->prev = nullptr;
  b->next = c.blocks;
  if (c.blocks != nullptr) c.blocks->prev = b;
  c.blocks = b;
}

void unlink(context& c, run_block* b) {
  if (b->prev != nullptr) b->prev->next = b->next;
  else c.blocks = b->next;
  if (b->next != nullptr) b->next->prev = b->prev;
}

void* listed_realloc(context& c, void* ptr, std::size_t nsize) {
  run_block* b = ptr != nullptr ? static_cast<run_block*>(ptr) - 1 : nullptr;
  if (b != nullptr) unlink(c, b);
  auto* moved = static_cast<run_block*>(std::realloc(b, sizeof(run_block) + nsize));
  if (moved == nullptr) {
    if (b != nullptr) link(c, b);
    return nullptr;
  }
  link(c, moved);
  return moved + 1;
}

void release(context& c, void* ptr) {
  if (in_arena(c, ptr)) return;
  if (!c.listing) {
    std::free(ptr);
  } else if (ptr != nullptr) {
    run_block* b = static_cast<run_block*>(ptr) - 1;
    unlink(c, b);
    std::free(b);
  }
}

void free_listed(context& c) {
  while (c.blocks != nullptr) {
    run_block* b = c.blocks;
    c.blocks = b->next;
    std::free(b);
  }
}

// A block of the arena is left where it is when freed or shrunk (the next run copies the
// image back over it) and copied out to the heap when it grows.
void* reallocate(context& c, void* ptr, std::size_t osize, std::size_t nsize) {
  if (c.image_used != nullptr) {
    if (ptr != nullptr && nsize <= osize) return ptr;
    const std::size_t at = (*c.image_used + 15) & ~std::size_t{15};
    if (at > c.arena_size || nsize > c.arena_size - at) return nullptr;
    *c.image_used = at + nsize;
    if (ptr != nullptr) std::memcpy(c.arena + at, ptr, osize);
    return c.arena + at;
  }
  if (!in_arena(c, ptr)) return c.listing ? listed_realloc(c, ptr, nsize) : std::realloc(ptr, nsize);
  if (nsize <= osize) return ptr;
  void* p = c.listing ? listed_realloc(c, nullptr, nsize) : std::malloc(nsize);
  if (p != nullptr) std::memcpy(p, ptr, osize);
  return p;
}

void* bounded_alloc(void* ud, void* ptr, std::size_t osize, std::size_t nsize) {
  auto& c = *static_cast<context*>(ud);
  if (nsize == 0) {
    release(c, ptr);
    c.heap -= osize;
    return nullptr;
  }
  if (nsize > osize) {
    c.peak_heap = std::max(c.peak_heap, c.heap - osize + nsize);
    if (c.heap - osize + nsize > c.limits->memory_bytes) {
      c.limit_hit = true;
      return nullptr;  // Lua raises "not enough memory"
    }
  }
  void* p = reallocate(c, ptr, osize, nsize);
  if (p != nullptr) {
    c.heap = c.heap - osize + nsize;
    c.executed += nsize / 64;  // copying costs time the instruction count does not see
  }
  return p;
}

constexpr int hook_every = 100;
// The CPU clock is a system call (no vDSO for a thread's clock): read at every 16th hook,
// every 1,600 instructions, it costs the runs about 1%.
constexpr int hooks_per_clock_read = 16;

void count_hook(lua_State* L, lua_Debug*) {
  context& c = ctx_of(L);
  c.executed += hook_every;
  const bool read_clock = --c.hooks_to_clock <= 0;
  if (read_clock) c.hooks_to_clock = hooks_per_clock_read;
  if (c.executed > c.limits->instructions || c.limit_hit || (read_clock && thread_cpu_time() > c.deadline)) {
    c.limit_hit = true;
    // From now on every instruction fails, so a pcall loop cannot outlive the budget.
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    luaL_error(L, "instruction limit reached");
  }
}

// ---- The shadow's commands ----

bool parse_i64(std::string_view s, std::int64_t& v) { return parse_wire_int(s, v); }

std::string_view upper_name(std::string& s) {
  for (char& ch : s) ch = static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
  return s;
}

lua_reply integer(std::int64_t v) {
  lua_reply r;
  r.type = lua_reply::kind::integer;
  r.integer = v;
  return r;
}
lua_reply status(std::string_view s) {
  lua_reply r;
  r.type = lua_reply::kind::status;
  r.text = s;
  return r;
}
lua_reply bulk(std::string_view s) {
  lua_reply r;
  r.type = lua_reply::kind::bulk;
  r.text = s;
  return r;
}

// The most items a range command answers into the script (bounded: each is a Lua value).
constexpr std::size_t max_answer_items = 4096;

shadow_key string_key(const std::string& value, std::int64_t pttl_ms) {
  shadow_key k;
  k.value = value;
  k.pttl_ms = pttl_ms;
  return k;
}

class shadow_commands {
 public:
  explicit shadow_commands(context& c) : c_(c), keys_(c.store->keys) {}

  // Runs c.args; the answer in c.answer, or false with c.failure set.
  bool run() {
    auto& a = c_.args;
    if (a.empty()) return fail("Please specify at least one argument for this redis lib call");
    std::string name = a[0];
    const std::string_view cmd = upper_name(name);
    const std::size_t n = a.size();
    if (c_.journal != nullptr && !reads_only(cmd)) {
      // The keys it may change: the first, RPOPLPUSH's and LMOVE's destination too, and
      // every key DEL names.
      const bool every = cmd == "DEL" || cmd == "UNLINK";
      const std::size_t last = every ? n - 1 : cmd == "RPOPLPUSH" || cmd == "LMOVE" ? 2 : 1;
      for (std::size_t i = 1; i <= last && i < n; ++i) remember(a[i]);
    }
    if (cmd == "GET" && n == 2) return get(a[1]);
    if (cmd == "MGET" && n >= 2) return mget();
    if (cmd == "SET" && n >= 3) return set(a);
    if (cmd == "SETNX" && n == 3) return setnx(a[1], a[2]);
    if ((cmd == "SETEX" || cmd == "PSETEX") && n == 4) return setex(a[1], a[2], a[3], cmd == "SETEX");
    if ((cmd == "DEL" || cmd == "UNLINK") && n >= 2) return del();
    if (cmd == "DELEX" && (n == 2 || n == 4)) return delex(a[1], n == 4 ? a[2] : std::string(), n == 4 ? a[3] : std::string());
    if (cmd == "DELIFEQ" && n == 3) return delex(a[1], "IFEQ", a[2]);
    if (cmd == "DIGEST" && n == 2) return digest_of(a[1]);
    if (cmd == "EXISTS" && n >= 2) return exists();
    if ((cmd == "PEXPIRE" || cmd == "EXPIRE") && n >= 3) return expire(a[1], a[2], cmd == "EXPIRE", n > 3 ? a[3] : "");
    if ((cmd == "PTTL" || cmd == "TTL") && n == 2) return ttl(a[1], cmd == "TTL");
    if (cmd == "PERSIST" && n == 2) return persist(a[1]);
    if ((cmd == "HSET" || cmd == "HMSET") && n >= 4 && n % 2 == 0) return hset(cmd == "HMSET");
    if (cmd == "HSETNX" && n == 4) return hsetnx(a[1], a[2], a[3]);
    if (cmd == "HGET" && n == 3) return hget(a[1], a[2]);
    if (cmd == "HMGET" && n >= 3) return hmget();
    if (cmd == "HEXISTS" && n == 3) return hexists(a[1], a[2]);
    if (cmd == "HINCRBY" && n == 4) return hincrby(a[1], a[2], a[3]);
    if (cmd == "HDEL" && n >= 3) return hdel();
    if (cmd == "HLEN" && n == 2) return hlen(a[1]);
    if ((cmd == "SADD" || cmd == "SREM") && n >= 3) return set_change(cmd == "SADD");
    if (cmd == "SISMEMBER" && n == 3) return set_has(a[1], a[2]);
    if (cmd == "SCARD" && n == 2) return set_size(a[1]);
    if (cmd == "SMEMBERS" && n == 2) return set_members(a[1]);
    if ((cmd == "HGETALL" || cmd == "HKEYS" || cmd == "HVALS") && n == 2) return hall(a[1], cmd);
    if ((cmd == "INCR" || cmd == "DECR") && n == 2) return incrby(a[1], cmd == "INCR" ? 1 : -1);
    if ((cmd == "INCRBY" || cmd == "DECRBY") && n == 3) {
      std::int64_t by = 0;
      if (!parse_i64(a[2], by) || by == INT64_MIN) return fail("ERR value is not an integer or out of range");
      return incrby(a[1], cmd == "INCRBY" ? by : -by);
    }
    if ((cmd == "LPUSH" || cmd == "RPUSH") && n >= 3) return push(cmd == "LPUSH");
    if ((cmd == "LPOP" || cmd == "RPOP") && n == 2) return pop(a[1], cmd == "LPOP");
    // A job queue's move of the next job id from its wait list to its active list.
    if (cmd == "RPOPLPUSH" && n == 3) return move(a[1], a[2], false, true);
    if (cmd == "LMOVE" && n == 5) {
      std::string from = a[3], to = a[4];
      const std::string_view f = upper_name(from), t = upper_name(to);
      if ((f != "LEFT" && f != "RIGHT") || (t != "LEFT" && t != "RIGHT")) return fail("ERR syntax error");
      return move(a[1], a[2], f == "LEFT", t == "LEFT");
    }
    if (cmd == "LREM" && n == 4) return lrem(a[1], a[2], a[3]);
    // A queue kept beside a lock (a capped list: RPUSH then LTRIM) must run to its end,
    // or a script that is no lock would be left to inference.
    if ((cmd == "LTRIM" || cmd == "LRANGE") && n == 4) return range(a[1], a[2], a[3], cmd == "LTRIM");
    if (cmd == "LINDEX" && n == 3) return index(a[1], a[2]);
    if (cmd == "LLEN" && n == 2) {
      const shadow_key* k = find(a[1]);
      if (k != nullptr && k->kind != shadow_key::type::list) return wrong_type();
      return answer(integer(k == nullptr ? 0 : static_cast<std::int64_t>(k->items.size())));
    }
    if ((cmd == "PUBLISH" || cmd == "SPUBLISH") && n == 3) {
      if (!record(shadow_write::what::publish, a[1], a[2])) return false;
      return answer(integer(0));
    }
    if (cmd[0] == 'Z') {
      bool known = false;
      const bool ok = sorted_set_command(cmd, known);
      if (known) return ok;
    }
    if ((cmd == "PEXPIREAT" || cmd == "EXPIREAT") && n >= 3) return expire_at(a[1], a[2], cmd == "EXPIREAT", n > 3 ? a[3] : "");
    if ((cmd == "PEXPIRETIME" || cmd == "EXPIRETIME") && n == 2) return expire_time(a[1], cmd == "EXPIRETIME");
    // A stream of events beside the keys (a job queue's): written, never read back, so
    // not kept; XADD answers an id from the shadow's clock.
    if (cmd == "XADD" && n >= 5) {
      lua_reply id = bulk(std::to_string(c_.store->now_ms) + "-" + std::to_string(c_.result->writes.size()));
      return answer(std::move(id));
    }
    if (cmd == "XTRIM" && n >= 4) return answer(integer(0));
    if (cmd == "SELECT" && n == 2) return answer(status("OK"));
    if (cmd == "PING") return answer(status("PONG"));
    if (cmd == "TIME" && n == 1) {
      lua_reply r;
      r.type = lua_reply::kind::array;
      const std::int64_t now = c_.store->now_ms;
      r.items = {bulk(std::to_string(now / 1000)), bulk(std::to_string(now % 1000 * 1000))};
      return answer(std::move(r));
    }
    if (cmd == "TYPE" && n == 2) {
      const shadow_key* k = find(a[1]);
      return answer(status(k == nullptr                             ? "none"
                           : k->kind == shadow_key::type::hash ? "hash"
                           : k->kind == shadow_key::type::list ? "list"
                           : k->kind == shadow_key::type::zset ? "zset"
                           : k->kind == shadow_key::type::set  ? "set"
                                                               : "string"));
    }
    c_.unsupported = true;
    return fail("ERR the shadow does not model " + std::string(cmd));
  }

 private:
  static bool reads_only(std::string_view cmd) {
    static constexpr std::string_view readers[] = {
        "GET",   "MGET",   "EXISTS", "PTTL",   "TTL",     "HGET",   "HMGET",     "HEXISTS",   "HLEN",
        "HGETALL", "HKEYS", "HVALS", "SISMEMBER", "SCARD", "SMEMBERS", "LRANGE", "LINDEX",    "LLEN",
        "ZSCORE", "ZRANK", "ZREVRANK", "ZMSCORE", "ZCARD", "ZCOUNT", "ZRANGE",  "ZREVRANGE", "ZRANGEBYSCORE",
        "ZREVRANGEBYSCORE", "PEXPIRETIME", "EXPIRETIME", "SELECT", "PING", "TIME", "TYPE", "PUBLISH", "SPUBLISH",
        "XADD",  "XTRIM", "DIGEST"};
    return std::find(std::begin(readers), std::end(readers), cmd) != std::end(readers);
  }
  void remember(const std::string& key) {
    auto& before = c_.journal->before;
    for (const auto& [k, v] : before) {
      if (k == key) return;
    }
    const shadow_key* now = find(key);
    before.emplace_back(key, now == nullptr ? std::nullopt : std::optional<shadow_key>(*now));
  }
  bool fail(std::string why) {
    c_.failure = std::move(why);
    return false;
  }
  bool answer(lua_reply r) {
    c_.answer = std::move(r);
    return true;
  }
  bool wrong_type() { return fail("WRONGTYPE Operation against a key holding the wrong kind of value"); }
  shadow_key* find(const std::string& key) {
    const auto it = keys_.find(key);
    return it == keys_.end() ? nullptr : &it->second;
  }
  bool record(shadow_write::what kind, std::string_view key, std::string_view value, std::string_view ttl = {},
              bool seconds = false) {
    if (c_.result->writes.size() >= c_.limits->writes) {
      c_.limit_hit = true;
      return fail("ERR shadow write limit reached");
    }
    c_.result->writes.push_back(shadow_write{kind, std::string(key), std::string(value), std::string(ttl), seconds});
    return true;
  }
  bool grow(std::size_t bytes) {
    c_.store_bytes += bytes;
    if (c_.store_bytes > c_.limits->store_bytes) {
      c_.limit_hit = true;
      return fail("ERR shadow store limit reached");
    }
    return true;
  }
  // A TTL argument in ms; false when it is not a positive integer (Redis's error).
  bool ttl_ms(std::string_view arg, bool seconds, std::int64_t& ms) {
    if (!parse_i64(arg, ms) || ms <= 0 || ms > INT64_MAX / 1000) return fail("ERR invalid expire time in 'set' command");
    if (seconds) ms *= 1000;
    return true;
  }

  void read_of(run_result::state_read::what kind, const std::string& key, const std::string& name = {}) {
    if (c_.result->state_reads.size() < 128) c_.result->state_reads.push_back({kind, key, name});
  }
  bool get(const std::string& key) {
    read_of(run_result::state_read::what::value, key);
    const shadow_key* k = find(key);
    if (k == nullptr) return answer(lua_reply{});
    if (k->kind != shadow_key::type::string) return wrong_type();
    return answer(bulk(k->value));
  }
  // Each key's value, nil for one absent or not a string (as Redis answers MGET):
  // @redis-kit/lock's extend MGETs its keys and re-SETs them only when all hold its token.
  bool mget() {
    lua_reply r;
    r.type = lua_reply::kind::array;
    for (std::size_t i = 1; i < c_.args.size(); ++i) {
      const shadow_key* k = find(c_.args[i]);
      r.items.push_back(k == nullptr || k->kind != shadow_key::type::string ? lua_reply{} : bulk(k->value));
    }
    return answer(std::move(r));
  }
  // DIGEST's answer for a value: a fixed 16 hex digits per value (FNV-1a, not the
  // server's XXH3: a script only hands it back to IFDEQ/IFDNE, which compare it here).
  static std::string digest_text(std::string_view value) {
    std::uint64_t h = 14695981039346656037ull;
    for (const char ch : value) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
  bool digest_of(const std::string& key) {
    read_of(run_result::state_read::what::value, key);
    const shadow_key* k = find(key);
    if (k == nullptr) return answer(lua_reply{});
    if (k->kind != shadow_key::type::string) return wrong_type();
    return answer(bulk(digest_text(k->value)));
  }
  // Whether a string key's value meets IFEQ/IFNE/IFDEQ/IFDNE `compared` (a missing key:
  // only the NE forms); false with `known` unset for another word.
  static bool meets(const shadow_key* k, std::string_view condition, const std::string& compared, bool& known) {
    known = true;
    if (condition == "IFEQ") return k != nullptr && k->value == compared;
    if (condition == "IFNE") return k == nullptr || k->value != compared;
    if (condition == "IFDEQ") return k != nullptr && digest_text(k->value) == compared;
    if (condition == "IFDNE") return k == nullptr || digest_text(k->value) != compared;
    known = false;
    return false;
  }
  bool delex(const std::string& key, std::string condition, const std::string& compared) {
    shadow_key* k = find(key);
    if (k != nullptr && k->kind != shadow_key::type::string && !condition.empty()) return wrong_type();
    if (!condition.empty()) {
      bool known = false;
      const bool met = meets(k, upper_name(condition), compared, known);
      if (!known) return fail("ERR syntax error");
      if (k == nullptr || !met) return answer(integer(0));
    }
    if (k == nullptr) return answer(integer(0));
    if (!record(shadow_write::what::del, key, {})) return false;
    keys_.erase(key);
    return answer(integer(1));
  }
  bool set(const std::vector<std::string>& a) {
    bool nx = false, xx = false, get_old = false, keep = false, seconds = false;
    std::string_view ttl_arg;
    std::string condition;  // IFEQ, IFNE, IFDEQ, IFDNE
    std::string compared;
    for (std::size_t i = 3; i < a.size(); ++i) {
      std::string opt = a[i];
      const std::string_view o = upper_name(opt);
      if (o == "NX") nx = true;
      else if (o == "XX") xx = true;
      else if ((o == "IFEQ" || o == "IFNE" || o == "IFDEQ" || o == "IFDNE") && i + 1 < a.size() && condition.empty()) {
        condition = o;
        compared = a[++i];
      }
      else if (o == "GET") get_old = true;
      else if (o == "KEEPTTL") keep = true;
      else if ((o == "PX" || o == "EX") && i + 1 < a.size() && ttl_arg.empty()) {
        seconds = o == "EX";
        ttl_arg = a[++i];
      } else if ((o == "PXAT" || o == "EXAT") && i + 1 < a.size()) {
        ++i;  // an absolute deadline: kept as "some expiry"
        ttl_arg = "";
        keep = false;
      } else {
        return fail("ERR syntax error");
      }
    }
    if ((nx && xx) || (!condition.empty() && (nx || xx))) return fail("ERR syntax error");
    std::int64_t ms = -1;
    if (!ttl_arg.empty() && !ttl_ms(ttl_arg, seconds, ms)) return false;
    shadow_key* k = find(a[1]);
    if (get_old && k != nullptr && k->kind != shadow_key::type::string) return wrong_type();
    lua_reply old = k == nullptr || !get_old ? lua_reply{} : bulk(k->value);
    if (!condition.empty() && k != nullptr && k->kind != shadow_key::type::string) return wrong_type();
    bool known = false;
    const bool refused = !condition.empty() && !meets(k, condition, compared, known);
    if ((nx && k != nullptr) || (xx && k == nullptr) || refused) return answer(get_old ? std::move(old) : lua_reply{});
    if (!grow(a[1].size() + a[2].size())) return false;
    if (!record(shadow_write::what::set, a[1], a[2], ttl_arg, seconds)) return false;
    const std::int64_t kept = keep && k != nullptr ? k->pttl_ms : -1;
    shadow_key& w = keys_[a[1]];
    w = shadow_key{};
    w.value = a[2];
    w.pttl_ms = ms >= 0 ? ms : kept;
    return answer(get_old ? std::move(old) : status("OK"));
  }
  bool setnx(const std::string& key, const std::string& value) {
    if (find(key) != nullptr) return answer(integer(0));
    if (!grow(key.size() + value.size()) || !record(shadow_write::what::set, key, value)) return false;
    keys_[key] = string_key(value, -1);
    return answer(integer(1));
  }
  bool setex(const std::string& key, const std::string& ttl, const std::string& value, bool seconds) {
    std::int64_t ms = 0;
    if (!ttl_ms(ttl, seconds, ms)) return false;
    if (!grow(key.size() + value.size()) || !record(shadow_write::what::set, key, value, ttl, seconds)) return false;
    keys_[key] = string_key(value, ms);
    return answer(status("OK"));
  }
  bool del() {
    std::int64_t removed = 0;
    for (std::size_t i = 1; i < c_.args.size(); ++i) {
      const auto it = keys_.find(c_.args[i]);
      if (it == keys_.end()) continue;
      if (!record(shadow_write::what::del, c_.args[i], {})) return false;
      keys_.erase(it);
      ++removed;
    }
    return answer(integer(removed));
  }
  bool exists() {
    std::int64_t n = 0;
    for (std::size_t i = 1; i < c_.args.size(); ++i) {
      read_of(run_result::state_read::what::key, c_.args[i]);
      n += find(c_.args[i]) != nullptr ? 1 : 0;
    }
    return answer(integer(n));
  }
  // EXPIRE's NX/XX/GT/LT: whether the condition leaves the key's TTL as it is (a key
  // without a TTL counts as infinite for GT and LT, as Redis counts it).
  static bool refused_by_condition(const shadow_key& k, std::int64_t ms, std::string_view condition) {
    std::string cond(condition);
    const std::string_view cd = upper_name(cond);
    return (cd == "NX" && k.pttl_ms >= 0) || (cd == "XX" && k.pttl_ms < 0) || (cd == "GT" && (k.pttl_ms < 0 || ms <= k.pttl_ms)) ||
           (cd == "LT" && k.pttl_ms >= 0 && ms >= k.pttl_ms);
  }
  bool expire(const std::string& key, const std::string& ttl, bool seconds, std::string_view condition) {
    std::int64_t ms = 0;
    if (!parse_i64(ttl, ms) || ms > INT64_MAX / 1000) return fail("ERR value is not an integer or out of range");
    if (seconds) ms *= 1000;
    shadow_key* k = find(key);
    if (k == nullptr) return answer(integer(0));
    if (refused_by_condition(*k, ms, condition)) return answer(integer(0));
    if (!record(shadow_write::what::expire, key, {}, ttl, seconds)) return false;
    if (ms <= 0) keys_.erase(key);
    else k->pttl_ms = ms;
    return answer(integer(1));
  }
  bool ttl(const std::string& key, bool seconds) {
    const shadow_key* k = find(key);
    if (k == nullptr) return answer(integer(-2));
    if (k->pttl_ms < 0) return answer(integer(-1));
    return answer(integer(seconds ? (k->pttl_ms + 500) / 1000 : k->pttl_ms));
  }
  bool persist(const std::string& key) {
    shadow_key* k = find(key);
    if (k == nullptr || k->pttl_ms < 0) return answer(integer(0));
    if (!record(shadow_write::what::expire, key, {}, "-1")) return false;
    k->pttl_ms = -1;
    return answer(integer(1));
  }
  // The hash at `key`, made when absent and `make`; nullptr (and a failure) on a string.
  shadow_key* hash(const std::string& key, bool make, bool& wrong) {
    wrong = false;
    shadow_key* k = find(key);
    if (k != nullptr && k->kind != shadow_key::type::hash) {
      wrong = true;
      wrong_type();
      return nullptr;
    }
    if (k == nullptr && make) {
      k = &keys_[key];
      k->kind = shadow_key::type::hash;
    }
    return k;
  }
  // A set (tooz's group index: SADD, SISMEMBER, SREM beside its group hash), its
  // members in insertion order; an empty one is dropped, as Redis does.
  shadow_key* set_of(const std::string& key, bool make, bool& wrong) {
    wrong = false;
    shadow_key* k = find(key);
    if (k != nullptr && k->kind != shadow_key::type::set) {
      wrong = true;
      wrong_type();
      return nullptr;
    }
    if (k == nullptr && make) {
      k = &keys_[key];
      k->kind = shadow_key::type::set;
    }
    return k;
  }
  bool set_change(bool add) {
    bool wrong = false;
    shadow_key* k = set_of(c_.args[1], add, wrong);
    if (wrong) return false;
    std::int64_t changed = 0;
    for (std::size_t i = 2; k != nullptr && i < c_.args.size(); ++i) {
      const auto it = std::find(k->items.begin(), k->items.end(), c_.args[i]);
      if ((it != k->items.end()) == add) continue;  // already there / not there
      if (!grow(c_.args[i].size()) ||
          !record(add ? shadow_write::what::set_add : shadow_write::what::set_del, c_.args[1], c_.args[i])) {
        return false;
      }
      if (add) k->items.push_back(c_.args[i]);
      else k->items.erase(it);
      ++changed;
    }
    if (k != nullptr && k->items.empty()) keys_.erase(c_.args[1]);
    return answer(integer(changed));
  }
  bool set_has(const std::string& key, const std::string& member) {
    read_of(run_result::state_read::what::set_member, key, member);
    bool wrong = false;
    const shadow_key* k = set_of(key, false, wrong);
    if (wrong) return false;
    return answer(integer(k != nullptr && std::find(k->items.begin(), k->items.end(), member) != k->items.end() ? 1 : 0));
  }
  bool set_size(const std::string& key) {
    bool wrong = false;
    const shadow_key* k = set_of(key, false, wrong);
    if (wrong) return false;
    return answer(integer(k == nullptr ? 0 : static_cast<std::int64_t>(k->items.size())));
  }
  // Redis keeps a small set of integers as an intset, which SMEMBERS reads in ascending
  // order (a job queue's set of job ids); any other set in insertion order, as a listpack
  // (Redis 7.2+) reads; a hash table's order cannot be known, and the reply check tells.
  static bool intset_member(const std::string& m, std::int64_t& v) {
    const auto [end, ec] = std::from_chars(m.data(), m.data() + m.size(), v);
    return ec == std::errc() && end == m.data() + m.size() && std::to_string(v) == m;
  }
  bool set_members(const std::string& key) {
    bool wrong = false;
    const shadow_key* k = set_of(key, false, wrong);
    if (wrong) return false;
    lua_reply r;
    r.type = lua_reply::kind::array;
    if (k == nullptr) return answer(std::move(r));
    constexpr std::size_t intset_entries = 512;  // set-max-intset-entries' default
    std::vector<std::pair<std::int64_t, std::size_t>> numbers;
    bool intset = k->items.size() <= intset_entries;
    for (std::size_t i = 0; intset && i < k->items.size(); ++i) {
      std::int64_t v = 0;
      intset = intset_member(k->items[i], v);
      numbers.emplace_back(v, i);
    }
    if (intset) {
      std::sort(numbers.begin(), numbers.end());
      for (const auto& [v, i] : numbers) {
        if (r.items.size() >= max_reply_items) break;
        r.items.push_back(bulk(k->items[i]));
      }
      return answer(std::move(r));
    }
    for (std::size_t i = 0; i < k->items.size() && r.items.size() < max_reply_items; ++i) {
      r.items.push_back(bulk(k->items[i]));
    }
    return answer(std::move(r));
  }
  static std::string* field(shadow_key& h, std::string_view f) {
    for (auto& [name, value] : h.fields) {
      if (name == f) return &value;
    }
    return nullptr;
  }
  bool hset(bool hmset) {
    bool wrong = false;
    shadow_key* h = hash(c_.args[1], true, wrong);
    if (h == nullptr) return false;
    std::int64_t added = 0;
    for (std::size_t i = 2; i + 1 < c_.args.size(); i += 2) {
      if (!grow(c_.args[i].size() + c_.args[i + 1].size())) return false;
      if (!record(shadow_write::what::hash_set, c_.args[1], c_.args[i])) return false;
      if (std::string* v = field(*h, c_.args[i])) *v = c_.args[i + 1];
      else {
        h->fields.emplace_back(c_.args[i], c_.args[i + 1]);
        ++added;
      }
    }
    return answer(hmset ? status("OK") : integer(added));
  }
  bool hsetnx(const std::string& key, const std::string& f, const std::string& value) {
    bool wrong = false;
    shadow_key* h = hash(key, false, wrong);
    if (wrong) return false;
    if (h != nullptr && field(*h, f) != nullptr) return answer(integer(0));
    if (!grow(f.size() + value.size()) || !record(shadow_write::what::hash_set, key, f)) return false;
    h = hash(key, true, wrong);
    h->fields.emplace_back(f, value);
    return answer(integer(1));
  }
  bool hget(const std::string& key, const std::string& f) {
    if (c_.result->hash_reads.size() < 64) c_.result->hash_reads.emplace_back(key, f);
    read_of(run_result::state_read::what::field, key, f);
    bool wrong = false;
    shadow_key* h = hash(key, false, wrong);
    if (wrong) return false;
    const std::string* v = h == nullptr ? nullptr : field(*h, f);
    return answer(v == nullptr ? lua_reply{} : bulk(*v));
  }
  bool hmget() {
    bool wrong = false;
    shadow_key* h = hash(c_.args[1], false, wrong);
    if (wrong) return false;
    lua_reply r;
    r.type = lua_reply::kind::array;
    for (std::size_t i = 2; i < c_.args.size() && r.items.size() < max_reply_items; ++i) {
      read_of(run_result::state_read::what::field, c_.args[1], c_.args[i]);
      const std::string* v = h == nullptr ? nullptr : field(*h, c_.args[i]);
      r.items.push_back(v == nullptr ? lua_reply{} : bulk(*v));
    }
    return answer(std::move(r));
  }
  bool hexists(const std::string& key, const std::string& f) {
    read_of(run_result::state_read::what::field, key, f);
    bool wrong = false;
    shadow_key* h = hash(key, false, wrong);
    if (wrong) return false;
    return answer(integer(h != nullptr && field(*h, f) != nullptr ? 1 : 0));
  }
  bool hincrby(const std::string& key, const std::string& f, const std::string& by_text) {
    std::int64_t by = 0;
    if (!parse_i64(by_text, by)) return fail("ERR value is not an integer or out of range");
    bool wrong = false;
    shadow_key* h = hash(key, true, wrong);
    if (h == nullptr) return false;
    std::string* v = field(*h, f);
    std::int64_t now = 0;
    if (v != nullptr && !parse_i64(*v, now)) return fail("ERR hash value is not an integer");
    if ((by > 0 && now > INT64_MAX - by) || (by < 0 && now < INT64_MIN - by)) return fail("ERR increment or decrement would overflow");
    now += by;
    if (!grow(f.size() + 20) || !record(shadow_write::what::hash_incr, key, f, by_text)) return false;
    if (v != nullptr) *v = std::to_string(now);
    else h->fields.emplace_back(f, std::to_string(now));
    return answer(integer(now));
  }
  bool hdel() {
    bool wrong = false;
    shadow_key* h = hash(c_.args[1], false, wrong);
    if (wrong) return false;
    std::int64_t removed = 0;
    for (std::size_t i = 2; h != nullptr && i < c_.args.size(); ++i) {
      const auto it = std::find_if(h->fields.begin(), h->fields.end(), [&](const auto& p) { return p.first == c_.args[i]; });
      if (it == h->fields.end()) continue;
      if (!record(shadow_write::what::hash_del, c_.args[1], c_.args[i])) return false;
      h->fields.erase(it);
      ++removed;
    }
    if (h != nullptr && h->fields.empty()) keys_.erase(c_.args[1]);  // Redis drops an empty hash
    return answer(integer(removed));
  }
  bool hlen(const std::string& key) {
    bool wrong = false;
    shadow_key* h = hash(key, false, wrong);
    if (wrong) return false;
    return answer(integer(h == nullptr ? 0 : static_cast<std::int64_t>(h->fields.size())));
  }
  bool hall(const std::string& key, std::string_view cmd) {
    bool wrong = false;
    shadow_key* h = hash(key, false, wrong);
    if (wrong) return false;
    lua_reply r;
    r.type = lua_reply::kind::array;
    for (std::size_t i = 0; h != nullptr && i < h->fields.size() && r.items.size() + 2 <= max_reply_items; ++i) {
      if (cmd != "HVALS") r.items.push_back(bulk(h->fields[i].first));
      if (cmd != "HKEYS") r.items.push_back(bulk(h->fields[i].second));
    }
    return answer(std::move(r));
  }
  bool push(bool head) {
    shadow_key* k = find(c_.args[1]);
    if (k != nullptr && k->kind != shadow_key::type::list) return wrong_type();
    if (k == nullptr) {
      k = &keys_[c_.args[1]];
      k->kind = shadow_key::type::list;
    }
    for (std::size_t i = 2; i < c_.args.size(); ++i) {
      if (!grow(c_.args[i].size() + 8) || !record(shadow_write::what::push, c_.args[1], c_.args[i])) return false;
      if (head) k->items.insert(k->items.begin(), c_.args[i]);
      else k->items.push_back(c_.args[i]);
    }
    return answer(integer(static_cast<std::int64_t>(k->items.size())));
  }
  // Redis's list range: negative positions count from the end, out of range clamps.
  static bool list_span(std::size_t size, std::int64_t start, std::int64_t stop, std::size_t& from, std::size_t& to) {
    const auto n = static_cast<std::int64_t>(size);
    if (start < 0) start = std::max<std::int64_t>(n + start, 0);
    if (stop < 0) stop += n;
    if (stop >= n) stop = n - 1;
    if (start > stop || start >= n) return false;
    from = static_cast<std::size_t>(start);
    to = static_cast<std::size_t>(stop) + 1;
    return true;
  }
  bool range(const std::string& key, const std::string& start_arg, const std::string& stop_arg, bool trim) {
    std::int64_t start = 0, stop = 0;
    if (!parse_i64(start_arg, start) || !parse_i64(stop_arg, stop)) {
      return fail("ERR value is not an integer or out of range");
    }
    shadow_key* k = find(key);
    if (k != nullptr && k->kind != shadow_key::type::list) return wrong_type();
    std::size_t from = 0, to = 0;
    const bool some = k != nullptr && list_span(k->items.size(), start, stop, from, to);
    if (!trim) {
      lua_reply r;
      r.type = lua_reply::kind::array;
      for (std::size_t i = from; some && i < to && r.items.size() < max_reply_items; ++i) r.items.push_back(bulk(k->items[i]));
      return answer(std::move(r));
    }
    if (k != nullptr && (!some || from > 0 || to < k->items.size())) {
      if (!record(shadow_write::what::pop, key, {})) return false;
      if (!some) keys_.erase(key);  // Redis drops an empty list
      else k->items = std::vector<std::string>(k->items.begin() + static_cast<std::ptrdiff_t>(from),
                                               k->items.begin() + static_cast<std::ptrdiff_t>(to));
    }
    return answer(status("OK"));
  }
  bool index(const std::string& key, const std::string& at_arg) {
    std::int64_t at = 0;
    if (!parse_i64(at_arg, at)) return fail("ERR value is not an integer or out of range");
    const shadow_key* k = find(key);
    if (k == nullptr) return answer(lua_reply{});
    if (k->kind != shadow_key::type::list) return wrong_type();
    std::size_t from = 0, to = 0;
    if (!list_span(k->items.size(), at, at, from, to)) return answer(lua_reply{});
    return answer(bulk(k->items[from]));
  }
  bool pop(const std::string& key, bool head) {
    shadow_key* k = find(key);
    if (k == nullptr) return answer(lua_reply{});
    if (k->kind != shadow_key::type::list) return wrong_type();
    if (!record(shadow_write::what::pop, key, {})) return false;
    lua_reply r = bulk(head ? k->items.front() : k->items.back());
    if (head) k->items.erase(k->items.begin());
    else k->items.pop_back();
    if (k->items.empty()) keys_.erase(key);  // Redis drops an empty list
    return answer(std::move(r));
  }
  // RPOPLPUSH / LMOVE: one item from one end of `from` to one end of `to` (the same
  // list too: a rotation).
  bool move(const std::string& from, const std::string& to, bool from_head, bool to_head) {
    shadow_key* src = find(from);
    if (src == nullptr) return answer(lua_reply{});
    const shadow_key* dst = find(to);
    if (src->kind != shadow_key::type::list || (dst != nullptr && dst->kind != shadow_key::type::list)) return wrong_type();
    if (!grow(src->items.front().size() + 8) || !record(shadow_write::what::pop, from, {})) return false;
    std::string item = from_head ? src->items.front() : src->items.back();
    if (from_head) src->items.erase(src->items.begin());
    else src->items.pop_back();
    if (src->items.empty()) keys_.erase(from);  // Redis drops an empty list
    if (!record(shadow_write::what::push, to, item)) return false;
    shadow_key& d = keys_[to];
    d.kind = shadow_key::type::list;
    if (to_head) d.items.insert(d.items.begin(), item);
    else d.items.push_back(item);
    return answer(bulk(item));
  }
  // LREM: up to |count| items equal to `value`, from the head (count > 0), the tail
  // (count < 0) or all (0).
  bool lrem(const std::string& key, const std::string& count_arg, const std::string& value) {
    std::int64_t count = 0;
    if (!parse_i64(count_arg, count)) return fail("ERR value is not an integer or out of range");
    shadow_key* k = find(key);
    if (k == nullptr) return answer(integer(0));
    if (k->kind != shadow_key::type::list) return wrong_type();
    if (!charge(k->items.size())) return false;
    std::int64_t removed = 0;
    const std::uint64_t most = count == 0 ? UINT64_MAX : count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
    auto& items = k->items;
    if (count >= 0) {
      for (auto it = items.begin(); it != items.end() && static_cast<std::uint64_t>(removed) < most;) {
        if (*it == value) {
          it = items.erase(it);
          ++removed;
        } else {
          ++it;
        }
      }
    } else {
      for (std::size_t i = items.size(); i-- > 0 && static_cast<std::uint64_t>(removed) < most;) {
        if (items[i] == value) {
          items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
          ++removed;
        }
      }
    }
    if (removed > 0 && !record(shadow_write::what::pop, key, value)) return false;
    if (items.empty()) keys_.erase(key);  // Redis drops an empty list
    return answer(integer(removed));
  }
  bool incrby(const std::string& key, std::int64_t by) {
    shadow_key* k = find(key);
    std::int64_t now = 0;
    if (k != nullptr && (k->kind != shadow_key::type::string || !parse_i64(k->value, now))) {
      return fail("ERR value is not an integer or out of range");
    }
    if ((by > 0 && now > INT64_MAX - by) || (by < 0 && now < INT64_MIN - by)) return fail("ERR increment or decrement would overflow");
    now += by;
    if (!grow(key.size() + 20) || !record(shadow_write::what::incr, key, std::to_string(now))) return false;
    if (k == nullptr) k = &keys_[key];
    k->value = std::to_string(now);
    return answer(integer(now));
  }

  // ---- Sorted sets. Members are kept ordered by (score, member), as Redis orders them.

  // Work done in C++ (a scan of the set), charged to the instruction budget so that a
  // loop of cheap calls on a large set is stopped like a loop that computes.
  bool charge(std::size_t work) {
    c_.executed += work / 4 + 1;
    if (c_.executed > c_.limits->instructions) {
      c_.limit_hit = true;
      return fail("ERR instruction limit reached");
    }
    return true;
  }
  static bool parse_score(std::string_view s, double& v) {
    if (s.empty() || s.size() > 64) return false;
    char buf[72];
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = 0;
    for (char& ch : buf) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    if (std::strcmp(buf, "inf") == 0 || std::strcmp(buf, "+inf") == 0) {
      v = HUGE_VAL;
      return true;
    }
    if (std::strcmp(buf, "-inf") == 0) {
      v = -HUGE_VAL;
      return true;
    }
    if (buf[0] == ' ' || buf[0] == '\t' || buf[0] == '\n') return false;
    char* end = nullptr;
    v = std::strtod(buf, &end);
    return end == buf + s.size() && !std::isnan(v) && std::isfinite(v);
  }
  struct score_bound {
    double value = 0;
    bool open = false;  // "(": exclusive
  };
  static bool parse_bound(std::string_view s, score_bound& b) {
    b.open = !s.empty() && s.front() == '(';
    if (b.open) s.remove_prefix(1);
    return parse_score(s, b.value);
  }
  static bool above_min(double v, const score_bound& min) { return min.open ? v > min.value : v >= min.value; }
  static bool below_max(double v, const score_bound& max) { return max.open ? v < max.value : v <= max.value; }
  static bool ordered_before(const std::pair<std::string, double>& a, double score, std::string_view member) {
    return a.second < score || (a.second == score && std::string_view(a.first) < member);
  }
  // The sorted set at `key`; nullptr when absent (wrong: it holds another type, failure set).
  shadow_key* zset(const std::string& key, bool& wrong) {
    wrong = false;
    shadow_key* k = find(key);
    if (k != nullptr && k->kind != shadow_key::type::zset) {
      wrong = true;
      wrong_type();
      return nullptr;
    }
    return k;
  }
  static std::vector<std::pair<std::string, double>>::iterator member_at(shadow_key& z, std::string_view m) {
    return std::find_if(z.members.begin(), z.members.end(), [&](const auto& p) { return p.first == m; });
  }
  void place(shadow_key& z, std::string member, double score) {
    const auto at = std::find_if(z.members.begin(), z.members.end(),
                                 [&](const auto& p) { return !ordered_before(p, score, member); });
    z.members.emplace(at, std::move(member), score);
  }
  void drop_if_empty(const std::string& key, const shadow_key* z) {
    if (z != nullptr && z->members.empty()) keys_.erase(key);  // Redis drops an empty set
  }
  bool remove_member(const std::string& key, shadow_key& z, std::size_t i) {
    if (!record(shadow_write::what::member_del, key, z.members[i].first)) return false;
    z.members.erase(z.members.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  }
  // A list of members (and their scores) as Redis answers a range.
  bool answer_members(const shadow_key* z, const std::vector<std::size_t>& picked, bool with_scores) {
    lua_reply r;
    r.type = lua_reply::kind::array;
    for (std::size_t i : picked) {
      r.items.push_back(bulk(z->members[i].first));
      if (with_scores) r.items.push_back(bulk(score_text(z->members[i].second)));
    }
    return answer(std::move(r));
  }

  bool sorted_set_command(std::string_view cmd, bool& known) {
    auto& a = c_.args;
    const std::size_t n = a.size();
    known = true;
    if (cmd == "ZADD" && n >= 4) return zadd(2, false);
    if (cmd == "ZINCRBY" && n == 4) return zadd(2, true);
    if ((cmd == "ZSCORE" || cmd == "ZRANK" || cmd == "ZREVRANK") && n == 3) return zscore(cmd);
    if (cmd == "ZMSCORE" && n >= 3) return zmscore();
    if (cmd == "ZCARD" && n == 2) {
      bool wrong = false;
      const shadow_key* z = zset(a[1], wrong);
      if (wrong) return false;
      return answer(integer(z == nullptr ? 0 : static_cast<std::int64_t>(z->members.size())));
    }
    if ((cmd == "ZCOUNT" || cmd == "ZREMRANGEBYSCORE") && n == 4) return zby_score(a[2], a[3], cmd == "ZREMRANGEBYSCORE");
    if (cmd == "ZREMRANGEBYRANK" && n == 4) return zremrangebyrank();
    if ((cmd == "ZRANGE" || cmd == "ZREVRANGE" || cmd == "ZRANGEBYSCORE" || cmd == "ZREVRANGEBYSCORE") && n >= 4) {
      return zrange(cmd);
    }
    if (cmd == "ZREM" && n >= 3) return zrem();
    if ((cmd == "ZPOPMIN" || cmd == "ZPOPMAX") && (n == 2 || n == 3)) return zpop(cmd == "ZPOPMAX");
    if ((cmd == "ZINTERSTORE" || cmd == "ZUNIONSTORE" || cmd == "ZDIFFSTORE") && n >= 4) {
      return zstore(cmd == "ZINTERSTORE" ? combine::inter : cmd == "ZUNIONSTORE" ? combine::union_ : combine::diff);
    }
    known = false;
    return false;
  }
  bool zadd(std::size_t from, bool zincrby) {
    auto& a = c_.args;
    bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = zincrby;
    std::size_t i = from;
    for (; !zincrby && i < a.size(); ++i) {
      std::string opt = a[i];
      const std::string_view o = upper_name(opt);
      if (o == "NX") nx = true;
      else if (o == "XX") xx = true;
      else if (o == "GT") gt = true;
      else if (o == "LT") lt = true;
      else if (o == "CH") ch = true;
      else if (o == "INCR") incr = true;
      else break;
    }
    const std::size_t pairs_from = i;
    const std::size_t left = a.size() - pairs_from;
    if (left == 0 || left % 2 != 0) return fail("ERR syntax error");
    if (nx && xx) return fail("ERR XX and NX options at the same time are not compatible");
    if ((gt && nx) || (lt && nx) || (gt && lt)) return fail("ERR GT, LT, and/or NX options at the same time are not compatible");
    if (incr && left != 2) return fail("ERR INCR option supports a single increment-element pair");
    for (std::size_t j = pairs_from; j < a.size(); j += 2) {
      double v = 0;
      if (!parse_score(a[j], v)) return fail("ERR value is not a valid float");
    }
    bool wrong = false;
    shadow_key* z = zset(a[1], wrong);
    if (wrong) return false;
    if (!charge((z == nullptr ? 0 : z->members.size()) * (left / 2))) return false;
    std::int64_t added = 0, changed = 0;
    bool skipped = false;
    double last = 0;
    for (std::size_t j = pairs_from; j < a.size(); j += 2) {
      double score = 0;
      parse_score(a[j], score);
      const std::string& member = a[j + 1];
      auto it = z == nullptr ? std::vector<std::pair<std::string, double>>::iterator{} : member_at(*z, member);
      const bool exists = z != nullptr && it != z->members.end();
      if (exists) {
        const double old = it->second;
        if (nx) {
          skipped = true;
          continue;
        }
        if (incr) score += old;
        if (std::isnan(score)) return fail("ERR resulting score is not a number (NaN)");
        if ((gt && score <= old) || (lt && score >= old)) {
          skipped = true;
          last = old;
          continue;
        }
        if (!record(shadow_write::what::member_add, a[1], member, score_text(score))) return false;
        if (score != old) {
          ++changed;
          z->members.erase(it);
          place(*z, member, score);
        }
      } else {
        if (xx) {
          skipped = true;
          continue;
        }
        if (!grow(member.size() + 16) || !record(shadow_write::what::member_add, a[1], member, score_text(score))) return false;
        if (z == nullptr) {
          z = &keys_[a[1]];
          z->kind = shadow_key::type::zset;
        }
        place(*z, member, score);
        ++added;
      }
      last = score;
    }
    if (incr) return answer(skipped ? lua_reply{} : bulk(score_text(last)));
    return answer(integer(ch ? added + changed : added));
  }
  bool zscore(std::string_view cmd) {
    auto& a = c_.args;
    if (c_.result->member_reads.size() < 64) c_.result->member_reads.emplace_back(a[1], a[2]);
    read_of(run_result::state_read::what::member, a[1], a[2]);
    bool wrong = false;
    shadow_key* z = zset(a[1], wrong);
    if (wrong) return false;
    if (z == nullptr) return answer(lua_reply{});
    if (!charge(z->members.size())) return false;
    const auto it = member_at(*z, a[2]);
    if (it == z->members.end()) return answer(lua_reply{});
    if (cmd == "ZSCORE") return answer(bulk(score_text(it->second)));
    const auto rank = static_cast<std::int64_t>(it - z->members.begin());
    return answer(integer(cmd == "ZRANK" ? rank : static_cast<std::int64_t>(z->members.size()) - 1 - rank));
  }
  bool zmscore() {
    auto& a = c_.args;
    bool wrong = false;
    shadow_key* z = zset(a[1], wrong);
    if (wrong) return false;
    lua_reply r;
    r.type = lua_reply::kind::array;
    for (std::size_t i = 2; i < a.size(); ++i) {
      if (c_.result->member_reads.size() < 64) c_.result->member_reads.emplace_back(a[1], a[i]);
      read_of(run_result::state_read::what::member, a[1], a[i]);
      if (!charge(z == nullptr ? 0 : z->members.size())) return false;
      const auto it = z == nullptr ? std::vector<std::pair<std::string, double>>::iterator{} : member_at(*z, a[i]);
      r.items.push_back(z == nullptr || it == z->members.end() ? lua_reply{} : bulk(score_text(it->second)));
    }
    return answer(std::move(r));
  }
  bool zby_score(const std::string& min_arg, const std::string& max_arg, bool remove) {
    score_bound min, max;
    if (!parse_bound(min_arg, min) || !parse_bound(max_arg, max)) return fail("ERR min or max is not a float");
    bool wrong = false;
    shadow_key* z = zset(c_.args[1], wrong);
    if (wrong) return false;
    if (z == nullptr) return answer(integer(0));
    if (!charge(z->members.size())) return false;
    std::int64_t count = 0;
    for (std::size_t i = 0; i < z->members.size();) {
      const double v = z->members[i].second;
      if (!above_min(v, min) || !below_max(v, max)) {
        ++i;
        continue;
      }
      ++count;
      if (!remove) {
        ++i;
        continue;
      }
      if (!remove_member(c_.args[1], *z, i)) return false;
    }
    if (remove) drop_if_empty(c_.args[1], z);
    return answer(integer(count));
  }
  bool zremrangebyrank() {
    std::int64_t start = 0, stop = 0;
    if (!parse_i64(c_.args[2], start) || !parse_i64(c_.args[3], stop)) return fail("ERR value is not an integer or out of range");
    bool wrong = false;
    shadow_key* z = zset(c_.args[1], wrong);
    if (wrong) return false;
    if (z == nullptr) return answer(integer(0));
    if (!charge(z->members.size())) return false;
    std::size_t from = 0, to = 0;
    if (!list_span(z->members.size(), start, stop, from, to)) return answer(integer(0));
    for (std::size_t i = to; i > from; --i) {
      if (!remove_member(c_.args[1], *z, i - 1)) return false;
    }
    drop_if_empty(c_.args[1], z);
    return answer(integer(static_cast<std::int64_t>(to - from)));
  }
  // ZRANGE (by rank, or BYSCORE; REV; LIMIT; WITHSCORES), ZREVRANGE, ZRANGEBYSCORE,
  // ZREVRANGEBYSCORE.
  bool zrange(std::string_view cmd) {
    auto& a = c_.args;
    bool by_score = cmd == "ZRANGEBYSCORE" || cmd == "ZREVRANGEBYSCORE";
    bool rev = cmd == "ZREVRANGE" || cmd == "ZREVRANGEBYSCORE";
    bool with_scores = false, limited = false;
    std::int64_t offset = 0, count = -1;
    for (std::size_t i = 4; i < a.size(); ++i) {
      std::string opt = a[i];
      const std::string_view o = upper_name(opt);
      if (o == "WITHSCORES") with_scores = true;
      else if (o == "BYSCORE" && cmd == "ZRANGE") by_score = true;
      else if (o == "REV" && cmd == "ZRANGE") rev = true;
      else if (o == "BYLEX" && cmd == "ZRANGE") {
        c_.unsupported = true;
        return fail("ERR the shadow does not model ZRANGE BYLEX");
      } else if (o == "LIMIT" && i + 2 < a.size()) {
        if (!parse_i64(a[i + 1], offset) || !parse_i64(a[i + 2], count)) return fail("ERR value is not an integer or out of range");
        limited = true;
        i += 2;
      } else {
        return fail("ERR syntax error");
      }
    }
    if (limited && !by_score) return fail("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    bool wrong = false;
    shadow_key* z = zset(a[1], wrong);
    if (wrong) return false;
    std::vector<std::size_t> picked;
    if (z == nullptr) return answer_members(z, picked, with_scores);
    if (!charge(z->members.size())) return false;
    const std::size_t size = z->members.size();
    if (by_score) {
      // (ZRANGE … BYSCORE REV and ZREVRANGEBYSCORE take max first.)
      score_bound min, max;
      const std::string& lo = rev ? a[3] : a[2];
      const std::string& hi = rev ? a[2] : a[3];
      if (!parse_bound(lo, min) || !parse_bound(hi, max)) return fail("ERR min or max is not a float");
      if (offset < 0) return answer_members(z, picked, with_scores);
      std::int64_t skipped = 0;
      for (std::size_t j = 0; j < size; ++j) {
        const std::size_t i = rev ? size - 1 - j : j;
        const double v = z->members[i].second;
        if (!above_min(v, min) || !below_max(v, max)) continue;
        if (skipped < offset) {
          ++skipped;
          continue;
        }
        if (count >= 0 && static_cast<std::int64_t>(picked.size()) >= count) break;
        if (picked.size() >= max_answer_items) break;
        picked.push_back(i);
      }
      return answer_members(z, picked, with_scores);
    }
    std::int64_t start = 0, stop = 0;
    if (!parse_i64(a[2], start) || !parse_i64(a[3], stop)) return fail("ERR value is not an integer or out of range");
    std::size_t from = 0, to = 0;
    if (list_span(size, start, stop, from, to)) {
      for (std::size_t j = from; j < to && picked.size() < max_answer_items; ++j) picked.push_back(rev ? size - 1 - j : j);
    }
    return answer_members(z, picked, with_scores);
  }
  bool zrem() {
    for (std::size_t i = 2; i < c_.args.size() && c_.result->member_reads.size() < 64; ++i) {
      c_.result->member_reads.emplace_back(c_.args[1], c_.args[i]);
    }
    bool wrong = false;
    shadow_key* z = zset(c_.args[1], wrong);
    if (wrong) return false;
    std::int64_t removed = 0;
    for (std::size_t i = 2; z != nullptr && i < c_.args.size(); ++i) {
      if (!charge(z->members.size())) return false;
      const auto it = member_at(*z, c_.args[i]);
      if (it == z->members.end()) continue;
      if (!remove_member(c_.args[1], *z, static_cast<std::size_t>(it - z->members.begin()))) return false;
      ++removed;
    }
    drop_if_empty(c_.args[1], z);
    return answer(integer(removed));
  }
  enum class combine : std::uint8_t { inter, union_, diff };
  // ZINTERSTORE / ZUNIONSTORE / ZDIFFSTORE dest numkeys key... [WEIGHTS w...] [AGGREGATE
  // SUM|MIN|MAX], as Redis does them: a plain set's members score 1, a weighted score
  // that is NaN (inf times 0) counts 0, a sum of inf and -inf is 0; the destination is
  // replaced (without its TTL) or, empty, deleted. Only what changed in it is written, so a
  // holder's member carried over with its score is not taken for a renewal.
  bool zstore(combine how) {
    const auto& a = c_.args;
    std::int64_t count = 0;
    if (!parse_i64(a[2], count)) return fail("ERR value is not an integer or out of range");
    if (count <= 0) {
      std::string name = a[0];
      for (char& ch : name) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
      return fail("ERR at least 1 input key is needed for '" + name + "' command");
    }
    if (static_cast<std::uint64_t>(count) > a.size() - 3) return fail("ERR syntax error");
    const auto sources = static_cast<std::size_t>(count);
    std::vector<double> weights(sources, 1.0);
    enum class aggregate : std::uint8_t { sum, min, max } agg = aggregate::sum;
    for (std::size_t i = 3 + sources; i < a.size();) {
      std::string opt = a[i];
      const std::string_view o = upper_name(opt);
      if (o == "WEIGHTS" && how != combine::diff && a.size() - i - 1 >= sources) {
        for (std::size_t j = 0; j < sources; ++j) {
          if (!parse_score(a[i + 1 + j], weights[j])) return fail("ERR weight value is not a float");
        }
        i += 1 + sources;
      } else if (o == "AGGREGATE" && how != combine::diff && i + 1 < a.size()) {
        std::string name = a[i + 1];
        const std::string_view v = upper_name(name);
        if (v == "SUM") agg = aggregate::sum;
        else if (v == "MIN") agg = aggregate::min;
        else if (v == "MAX") agg = aggregate::max;
        else return fail("ERR syntax error");
        i += 2;
      } else {
        return fail("ERR syntax error");
      }
    }
    // Each source as (member, score) pairs; an absent key is empty.
    std::vector<std::vector<std::pair<std::string, double>>> in(sources);
    std::size_t work = 0;
    for (std::size_t j = 0; j < sources; ++j) {
      const shadow_key* k = find(a[3 + j]);
      if (k == nullptr) continue;
      if (k->kind == shadow_key::type::zset) in[j] = k->members;
      else if (k->kind == shadow_key::type::set) {
        for (const std::string& m : k->items) in[j].emplace_back(m, 1.0);
      } else {
        return wrong_type();
      }
      work += in[j].size();
    }
    if (!charge(work * sources)) return false;
    const auto weighted = [&](std::size_t j, double score) {
      const double v = score * weights[j];
      return std::isnan(v) ? 0.0 : v;
    };
    const auto merge = [&](double acc, double v) {
      if (agg == aggregate::min) return std::min(acc, v);
      if (agg == aggregate::max) return std::max(acc, v);
      const double sum = acc + v;
      return std::isnan(sum) ? 0.0 : sum;
    };
    const auto score_in = [&](std::size_t j, const std::string& m) -> const double* {
      for (const auto& [name, score] : in[j]) {
        if (name == m) return &score;
      }
      return nullptr;
    };
    std::vector<std::pair<std::string, double>> out;
    for (std::size_t j = 0; j < sources; ++j) {
      if (how != combine::union_ && j > 0) break;  // inter and diff start from the first
      for (const auto& [member, score] : in[j]) {
        const std::string_view member_name = member;  // (clang 14 cannot capture a structured binding)
        if (std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.first == member_name; })) continue;
        double acc = weighted(j, score);
        bool keep = true;
        for (std::size_t o = 0; o < sources && keep; ++o) {
          if (o == j) continue;
          const double* s = score_in(o, member);
          if (how == combine::inter) keep = s != nullptr;
          else if (how == combine::diff) keep = s == nullptr;
          if (s != nullptr && how != combine::diff && (how == combine::inter || o > j)) acc = merge(acc, weighted(o, *s));
          else if (s != nullptr && how == combine::union_ && o < j) keep = false;  // counted from its first source
        }
        if (keep) out.emplace_back(member, acc);
      }
    }
    const std::string& dest = a[1];
    shadow_key* old = find(dest);
    // What changed in the destination: members dropped, added or re-scored.
    if (old != nullptr && old->kind == shadow_key::type::zset) {
      for (const auto& [member, score] : old->members) {
        const std::string_view member_name = member;
        if (std::none_of(out.begin(), out.end(), [&](const auto& p) { return p.first == member_name; }) &&
            !record(shadow_write::what::member_del, dest, member)) {
          return false;
        }
      }
    } else if (old != nullptr && !record(shadow_write::what::del, dest, {})) {
      return false;
    }
    for (const auto& [member, score] : out) {
      const double* before = nullptr;
      if (old != nullptr && old->kind == shadow_key::type::zset) {
        const auto it = member_at(*old, member);
        if (it != old->members.end()) before = &it->second;
      }
      if ((before == nullptr || *before != score) &&
          (!grow(member.size() + 16) || !record(shadow_write::what::member_add, dest, member, score_text(score)))) {
        return false;
      }
    }
    const auto stored = static_cast<std::int64_t>(out.size());
    if (out.empty()) {
      keys_.erase(dest);
      return answer(integer(0));
    }
    shadow_key fresh;
    fresh.kind = shadow_key::type::zset;
    for (auto& [member, score] : out) place(fresh, std::move(member), score);
    keys_[dest] = std::move(fresh);
    return answer(integer(stored));
  }
  bool zpop(bool max) {
    std::int64_t count = 1;
    if (c_.args.size() == 3 && (!parse_i64(c_.args[2], count) || count < 0)) return fail("ERR value is out of range, must be positive");
    bool wrong = false;
    shadow_key* z = zset(c_.args[1], wrong);
    if (wrong) return false;
    lua_reply r;
    r.type = lua_reply::kind::array;
    while (z != nullptr && !z->members.empty() && count-- > 0 && r.items.size() < max_answer_items) {
      const std::size_t i = max ? z->members.size() - 1 : 0;
      r.items.push_back(bulk(z->members[i].first));
      r.items.push_back(bulk(score_text(z->members[i].second)));
      if (!remove_member(c_.args[1], *z, i)) return false;
    }
    drop_if_empty(c_.args[1], z);
    return answer(std::move(r));
  }

  // PEXPIREAT / EXPIREAT: the deadline against the store's clock; one already passed
  // deletes the key, as Redis does.
  bool expire_at(const std::string& key, const std::string& when, bool seconds, std::string_view condition) {
    std::int64_t at = 0;
    if (!parse_i64(when, at) || (seconds && (at > INT64_MAX / 1000 || at < INT64_MIN / 1000))) {
      return fail("ERR value is not an integer or out of range");
    }
    const std::int64_t at_ms = seconds ? at * 1000 : at;
    const std::int64_t now = c_.store->now_ms;
    const std::int64_t ms = at_ms < now ? -1 : at_ms - now;
    shadow_key* k = find(key);
    if (k == nullptr) return answer(integer(0));
    if (refused_by_condition(*k, ms, condition)) return answer(integer(0));
    if (ms <= 0) {
      if (!record(shadow_write::what::del, key, {})) return false;
      keys_.erase(key);
      return answer(integer(1));
    }
    if (!record(shadow_write::what::expire, key, {}, std::to_string(seconds ? (ms + 999) / 1000 : ms), seconds)) return false;
    k->pttl_ms = ms;
    return answer(integer(1));
  }
  bool expire_time(const std::string& key, bool seconds) {
    const shadow_key* k = find(key);
    if (k == nullptr) return answer(integer(-2));
    if (k->pttl_ms < 0) return answer(integer(-1));
    const std::int64_t at = c_.store->now_ms + k->pttl_ms;
    return answer(integer(seconds ? at / 1000 : at));
  }

  context& c_;
  std::map<std::string, shadow_key, std::less<>>& keys_;
};

// ---- Lua <-> Redis values (only trivially destructible locals while Lua may throw) ----

void push_reply(lua_State* L, const lua_reply& r, int depth) {
  luaL_checkstack(L, 4, "reply too deep");
  switch (r.type) {
    case lua_reply::kind::nil: lua_pushboolean(L, 0); return;
    case lua_reply::kind::integer: lua_pushnumber(L, static_cast<lua_Number>(r.integer)); return;
    case lua_reply::kind::bulk: lua_pushlstring(L, r.text.data(), r.text.size()); return;
    case lua_reply::kind::status:
    case lua_reply::kind::error:
      lua_newtable(L);
      lua_pushstring(L, r.type == lua_reply::kind::status ? "ok" : "err");
      lua_pushlstring(L, r.text.data(), r.text.size());
      lua_settable(L, -3);
      return;
    case lua_reply::kind::array:
      lua_newtable(L);
      for (std::size_t i = 0; i < r.items.size() && depth < 4; ++i) {
        push_reply(L, r.items[i], depth + 1);
        lua_rawseti(L, -2, static_cast<int>(i + 1));
      }
      return;
  }
}

// Redis's conversion of a script's return value (or an array element).
void read_reply(lua_State* L, int index, lua_reply& out, int depth) {
  out = lua_reply{};
  switch (lua_type(L, index)) {
    case LUA_TNUMBER: {
      const lua_Number v = lua_tonumber(L, index);
      out.type = lua_reply::kind::integer;
      out.integer = std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<std::int64_t>(v) : 0;
      return;
    }
    case LUA_TSTRING: {
      std::size_t n = 0;
      const char* s = lua_tolstring(L, index, &n);
      out.type = lua_reply::kind::bulk;
      out.text.assign(s, std::min<std::size_t>(n, 1u << 16));
      return;
    }
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, index)) {
        out.type = lua_reply::kind::integer;
        out.integer = 1;
      }
      return;
    case LUA_TTABLE: {
      const int t = index < 0 ? lua_gettop(L) + index + 1 : index;
      for (const char* name : {"err", "ok"}) {
        lua_pushstring(L, name);
        lua_rawget(L, t);
        if (lua_isstring(L, -1)) {
          std::size_t n = 0;
          const char* s = lua_tolstring(L, -1, &n);
          out.type = name[0] == 'e' ? lua_reply::kind::error : lua_reply::kind::status;
          out.text.assign(s, std::min<std::size_t>(n, 1024));
          lua_pop(L, 1);
          return;
        }
        lua_pop(L, 1);
      }
      out.type = lua_reply::kind::array;
      if (depth >= 4) return;
      for (int i = 1; i <= static_cast<int>(max_reply_items); ++i) {
        lua_rawgeti(L, t, i);
        if (lua_isnil(L, -1)) {
          lua_pop(L, 1);
          break;
        }
        out.items.emplace_back();
        read_reply(L, -1, out.items.back(), depth + 1);
        lua_pop(L, 1);
      }
      return;
    }
    default: return;  // nil and anything else: a nil reply
  }
}

// redis.call / redis.pcall. The arguments are read into the context without calling
// anything that can raise; the command runs in C++; the answer is pushed afterwards.
int redis_command(lua_State* L, bool protected_call) {
  context& c = ctx_of(L);
  const int n = lua_gettop(L);
  bool bad_argument = n == 0;
  c.args.clear();
  for (int i = 1; i <= n && !bad_argument; ++i) {
    const int t = lua_type(L, i);
    if (t == LUA_TSTRING) {
      std::size_t len = 0;
      const char* s = lua_tolstring(L, i, &len);
      c.args.emplace_back(s, len);
    } else if (t == LUA_TNUMBER) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(lua_tonumber(L, i)));
      c.args.emplace_back(buf);
    } else {
      bad_argument = true;
    }
  }
  bool ok = false;
  if (bad_argument) c.failure = "ERR Lua redis lib command arguments must be strings or integers";
  else ok = shadow_commands(c).run();
  if (ok) {
    push_reply(L, c.answer, 0);
    return 1;
  }
  if (protected_call && !c.limit_hit && !c.unsupported) {
    lua_newtable(L);
    lua_pushstring(L, "err");
    lua_pushlstring(L, c.failure.data(), c.failure.size());
    lua_settable(L, -3);
    return 1;
  }
  lua_pushlstring(L, c.failure.data(), c.failure.size());
  return lua_error(L);
}
int redis_call(lua_State* L) { return redis_command(L, false); }
int redis_pcall(lua_State* L) { return redis_command(L, true); }

int redis_status_reply(lua_State* L) {
  luaL_checkstring(L, 1);
  lua_newtable(L);
  lua_pushstring(L, "ok");
  lua_pushvalue(L, 1);
  lua_settable(L, -3);
  return 1;
}
int redis_error_reply(lua_State* L) {
  luaL_checkstring(L, 1);
  lua_newtable(L);
  lua_pushstring(L, "err");
  lua_pushvalue(L, 1);
  lua_settable(L, -3);
  return 1;
}
void charge_codec_work(lua_State* L, std::size_t units) {
  context& c = ctx_of(L);
  c.executed += units;
  if (c.executed > c.limits->instructions) {
    c.limit_hit = true;
    luaL_error(L, "instruction limit reached");
  }
}

int redis_nothing(lua_State*) { return 0; }
int redis_true(lua_State* L) {
  lua_pushboolean(L, 1);
  return 1;
}
int redis_sha1hex(lua_State* L) {
  std::size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  char hex[41];
  {
    const std::string h = lock::sha1_hex(std::string_view(s, n));
    std::memcpy(hex, h.data(), 40);
  }
  lua_pushlstring(L, hex, 40);
  return 1;
}

// string.rep with a bounded result (the library's loops n times even for "").
int checked_rep(lua_State* L) {
  std::size_t len = 0;
  const char* s = luaL_checklstring(L, 1, &len);
  const lua_Number n = luaL_checknumber(L, 2);
  if (!(n > 0)) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (n > 1e6 || static_cast<double>(len) * n > static_cast<double>(1u << 20)) return luaL_error(L, "string.rep: result too large");
  context& c = ctx_of(L);
  c.executed += static_cast<std::uint64_t>(static_cast<double>(len) * n / 16) + 1;
  if (c.executed > c.limits->instructions) {
    c.limit_hit = true;
    return luaL_error(L, "instruction limit reached");
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (long i = 0; i < static_cast<long>(n); ++i) luaL_addlstring(&b, s, len);
  luaL_pushresult(&b);
  return 1;
}

// The pattern functions, refused when backtracking could run too long in C (where the
// instruction hook cannot stop it): at most about (length + 1)^(quantifiers + 1) steps
// (one start position less when anchored), each charged as two instructions, so that a
// loop of calls that each pass is stopped by the budget too. (A step of the matcher takes
// about as long as a few VM instructions: a probe of a 1,050-byte subject with one `.-`
// took 26 ms a call, hundreds of times over one script's probes, before this charge.)
int checked_pattern(lua_State* L) {
  std::size_t len = 0, plen = 0;
  luaL_checklstring(L, 1, &len);
  const char* p = luaL_checklstring(L, 2, &plen);
  int quantifiers = 0;
  for (std::size_t i = 0; i < plen; ++i) {
    if (p[i] == '%') ++i;
    else if (p[i] == '*' || p[i] == '+' || p[i] == '-' || p[i] == '?') ++quantifiers;
  }
  const bool plain = lua_toboolean(L, lua_upvalueindex(2)) && lua_gettop(L) >= 4 && lua_toboolean(L, 4);
  const bool anchored = plen > 0 && p[0] == '^';
  const double steps = plain ? static_cast<double>(len) + static_cast<double>(plen)
                             : std::pow(static_cast<double>(len) + 1, quantifiers + (anchored ? 0 : 1));
  if (steps > 2e7) return luaL_error(L, "pattern too costly for the sandbox");
  charge_codec_work(L, static_cast<std::size_t>(steps * 2) + 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

void set_global_table_field(lua_State* L, const char* table, const char* name, lua_CFunction f) {
  lua_getglobal(L, table);
  lua_pushstring(L, name);
  if (f == nullptr) lua_pushnil(L);
  else lua_pushcfunction(L, f);
  lua_settable(L, -3);
  lua_pop(L, 1);
}

struct setup_args {
  std::span<const std::string_view> keys, argv;
};

// What every run's interpreter has the same: the libraries, less what a script may not
// reach, and the redis table.
int setup_libraries(lua_State* L) {
  for (lua_CFunction open : {luaopen_base, luaopen_table, luaopen_string, luaopen_math}) {
    lua_pushcfunction(L, open);
    lua_pushstring(L, "");
    lua_call(L, 1, 0);
  }
  for (const char* name : {"dofile", "loadfile", "load", "loadstring", "require", "module", "print", "collectgarbage",
                           "getfenv", "setfenv", "newproxy", "coroutine", "gcinfo", "package", "debug", "io", "os"}) {
    lua_pushnil(L);
    lua_setglobal(L, name);
  }
  set_global_table_field(L, "string", "dump", nullptr);
  set_global_table_field(L, "string", "rep", checked_rep);
  for (const char* name : {"find", "match", "gmatch", "gsub"}) {
    lua_getglobal(L, "string");
    lua_pushstring(L, name);
    lua_pushstring(L, name);
    lua_rawget(L, -3);
    lua_pushboolean(L, std::strcmp(name, "find") == 0);  // only find's 4th argument is `plain`
    lua_pushcclosure(L, checked_pattern, 2);
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
  lua_newtable(L);
  const std::pair<const char*, lua_CFunction> fns[] = {
      {"call", redis_call},           {"pcall", redis_pcall},       {"status_reply", redis_status_reply},
      {"error_reply", redis_error_reply}, {"log", redis_nothing},   {"set_repl", redis_nothing},
      {"setresp", redis_nothing},     {"replicate_commands", redis_true}, {"sha1hex", redis_sha1hex},
      {"breakpoint", redis_nothing},  {"debug", redis_nothing},
  };
  for (const auto& [name, f] : fns) {
    lua_pushstring(L, name);
    lua_pushcfunction(L, f);
    lua_settable(L, -3);
  }
  for (const char* name : {"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING", "REPL_NONE", "REPL_AOF",
                           "REPL_SLAVE", "REPL_REPLICA", "REPL_ALL"}) {
    lua_pushstring(L, name);
    lua_pushnumber(L, 0);
    lua_settable(L, -3);
  }
  lua_setglobal(L, "redis");
  return 0;
}

// cjson's configuration's finalizer, run once: by the collector or at the run's end.
int finalize_codec_config(lua_State* L) {
  context& c = ctx_of(L);
  if (c.codec_finalizer == nullptr || lua_touserdata(L, 1) != c.codec_config) return 0;
  const lua_CFunction finalizer = c.codec_finalizer;
  c.codec_finalizer = nullptr;
  return finalizer(L);
}

// What each run opens for itself: the codecs (cjson keeps a buffer outside the
// interpreter's heap, which a copied image would share between runs), KEYS and ARGV.
int setup_run(lua_State* L) {
  const auto* a = static_cast<const setup_args*>(lua_touserdata(L, 1));
  open_codecs(L, charge_codec_work);
  // The configuration is the first upvalue of cjson's own encode, the second of the
  // charged one.
  lua_getglobal(L, "cjson");
  lua_getfield(L, -1, "encode");
  if (lua_getupvalue(L, -1, 2) != nullptr && lua_getupvalue(L, -1, 1) != nullptr && lua_isuserdata(L, -1) &&
      lua_getmetatable(L, -1)) {
    lua_getfield(L, -1, "__gc");
    context& c = ctx_of(L);
    c.codec_finalizer = lua_tocfunction(L, -1);
    c.codec_config = lua_touserdata(L, -3);
    lua_pop(L, 1);
    lua_pushcfunction(L, finalize_codec_config);
    lua_setfield(L, -2, "__gc");
  }
  lua_settop(L, 1);
  for (int which = 0; which < 2; ++which) {
    const auto& list = which == 0 ? a->keys : a->argv;
    lua_createtable(L, static_cast<int>(std::min<std::size_t>(list.size(), 1024)), 0);
    for (std::size_t i = 0; i < list.size(); ++i) {
      lua_pushlstring(L, list[i].data(), list[i].size());
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setglobal(L, which == 0 ? "KEYS" : "ARGV");
  }
  return 0;
}

// Opening the libraries was most of a short script's run (about 270k instructions of
// 370k: a closure and an interned name per library function, the collector stepping
// through them), and every run opens the same ones. So each thread builds that much of
// an interpreter once, in an arena of its own, and keeps a copy of the arena's bytes;
// a run copies them back and goes on from there. The arena does not move, so the copy
// is, byte for byte, the interpreter a fresh build has at that point (the heap counted
// and the bytes charged to the instruction budget included): the run that follows
// allocates the same sizes in the same order, collects at the same moments and answers
// the same.
struct interpreter_image {
  static constexpr std::size_t capacity = 256u << 10;
  std::unique_ptr<std::byte[]> arena, bytes;
  std::size_t used = 0;
  lua_State* L = nullptr;
  std::size_t heap = 0, peak_heap = 0;
  std::uint64_t executed = 0;
  bool tried = false;

  // The image, made on first use; nullptr when it could not be (the arena too small).
  const interpreter_image* get() {
    if (!tried) {
      tried = true;
      make();
    }
    return L != nullptr ? this : nullptr;
  }

 private:
  void make() {
    arena.reset(new std::byte[capacity]);
    static const sandbox_limits unbounded{.memory_bytes = SIZE_MAX};
    context c;
    c.limits = &unbounded;
    c.arena = arena.get();
    c.arena_size = capacity;
    c.image_used = &used;
    lua_State* built = lua_newstate(bounded_alloc, &c);
    if (built == nullptr || lua_cpcall(built, setup_libraries, nullptr) != 0) return;  // the arena stays unused
    bytes.reset(new std::byte[used]);
    std::memcpy(bytes.get(), arena.get(), used);
    L = built;
    heap = c.heap;
    peak_heap = c.peak_heap;
    executed = c.executed;
  }
};

// The interpreter a run starts from, as a fresh build would leave it after
// setup_libraries, whose status goes to `rc`; nullptr when there is no room for one.
lua_State* open_interpreter(context& c, int& rc) {
  rc = 0;
  thread_local interpreter_image image;
  const interpreter_image* kept = c.limits->fresh_interpreter ? nullptr : image.get();
  // Below the image's peak a fresh build would have failed somewhere inside it.
  if (kept != nullptr && c.limits->memory_bytes >= kept->peak_heap) {
    std::memcpy(image.arena.get(), kept->bytes.get(), kept->used);
    c.arena = image.arena.get();
    c.arena_size = interpreter_image::capacity;
    c.heap = kept->heap;
    c.executed = kept->executed;
    c.listing = true;
    lua_setallocf(kept->L, bounded_alloc, &c);
    return kept->L;
  }
  lua_State* L = lua_newstate(bounded_alloc, &c);
  if (L != nullptr) rc = lua_cpcall(L, setup_libraries, nullptr);
  return L;
}

}  // namespace

const shadow_key* shadow_journal::held_before(std::string_view key) const noexcept {
  for (const auto& [k, v] : before) {
    if (k == key) return v ? &*v : nullptr;
  }
  return nullptr;
}

void shadow_journal::restore(shadow_store& store) const {
  for (auto it = before.rbegin(); it != before.rend(); ++it) {
    if (it->second) store.keys.insert_or_assign(it->first, *it->second);
    else store.keys.erase(it->first);
  }
}

namespace {

// lua_dump's writer: the compiled chunk into a string (the text is bounded, and so is this).
int append_chunk(lua_State*, const void* p, std::size_t size, void* out) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(p), size);
  return 0;
}
constexpr std::size_t max_compiled_bytes = 4u << 20;

}  // namespace

std::chrono::nanoseconds thread_cpu_time() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

run_result run_script(std::string_view text, std::span<const std::string_view> keys,
                      std::span<const std::string_view> argv, shadow_store& store, const sandbox_limits& limits,
                      shadow_journal* journal, std::string* compiled) {
  run_result result;
  context c;
  c.store = &store;
  c.journal = journal;
  c.limits = &limits;
  c.result = &result;
  for (const auto& [name, k] : store.keys) {
    c.store_bytes += name.size() + k.value.size();
    for (const std::string& item : k.items) c.store_bytes += item.size();
    for (const auto& [f, v] : k.fields) c.store_bytes += f.size() + v.size();
    for (const auto& [m, score] : k.members) c.store_bytes += m.size() + 16;
  }
  if (!text.empty() && text.front() == LUA_SIGNATURE[0]) {
    result.outcome = run_result::status::not_lua;
    result.message = "a precompiled chunk";
    return result;
  }
  if (keys.size() > 100000 || argv.size() > 100000) {
    result.outcome = run_result::status::limit;
    result.message = "too many arguments";
    return result;
  }
  int rc = 0;
  lua_State* L = open_interpreter(c, rc);
  if (L == nullptr) {
    result.outcome = run_result::status::limit;
    result.message = "no memory for an interpreter";
    return result;
  }
  setup_args args{keys, argv};
  if (rc == 0) rc = lua_cpcall(L, setup_run, &args);
  const bool set_up = rc == 0;
  if (rc == 0) {
    if (compiled != nullptr && !compiled->empty()) {
      rc = luaL_loadbuffer(L, compiled->data(), compiled->size(), "@user_script");
    } else {
      rc = luaL_loadbuffer(L, text.data(), text.size(), "@user_script");
      if (rc == 0 && compiled != nullptr) {
        lua_dump(L, append_chunk, compiled);
        if (compiled->size() > max_compiled_bytes) compiled->clear();
      }
    }
    if (rc != 0) {
      result.outcome = c.limit_hit ? run_result::status::limit : run_result::status::not_lua;
    } else {
      c.deadline = thread_cpu_time() + std::chrono::milliseconds(limits.cpu_ms);
      c.hooks_to_clock = hooks_per_clock_read;
      lua_sethook(L, count_hook, LUA_MASKCOUNT, hook_every);
      rc = lua_pcall(L, 0, 1, 0);
      lua_sethook(L, nullptr, 0, 0);
      if (rc == 0 && !c.limit_hit) {
        read_reply(L, -1, result.reply, 0);
      } else {
        result.outcome = c.limit_hit     ? run_result::status::limit
                         : c.unsupported ? run_result::status::unsupported
                                         : run_result::status::script_error;
        result.reply.type = lua_reply::kind::error;
        if (lua_isstring(L, -1)) {
          std::size_t n = 0;
          const char* s = lua_tolstring(L, -1, &n);
          result.reply.text.assign(s, std::min<std::size_t>(n, 512));
        } else if (lua_istable(L, -1)) {
          read_reply(L, -1, result.reply, 3);
          result.reply.type = lua_reply::kind::error;
        }
      }
    }
  } else {
    result.outcome = run_result::status::limit;
  }
  if (result.outcome != run_result::status::ok && result.message.empty()) {
    result.message = result.reply.text.empty() && lua_gettop(L) > 0 && lua_isstring(L, -1) ? lua_tostring(L, -1) : result.reply.text;
  }
  if (c.listing && set_up) {
    // The image's objects need nothing; the run's blocks are listed.
    if (c.codec_finalizer != nullptr) {
      lua_settop(L, 0);
      lua_pushlightuserdata(L, c.codec_config);
      finalize_codec_config(L);
    }
    free_listed(c);
  } else {
    lua_close(L);
  }
  if (c.unsupported && result.outcome == run_result::status::ok) result.outcome = run_result::status::unsupported;
  result.executed = c.executed;
  return result;
}

}  // namespace lockscope::locks::effect
