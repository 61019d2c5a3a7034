// The scripts/naming module the client and the analyzer share, and the URL/duration
// parsing. The SCRIPT LOAD check needs redis-server; the rest needs nothing.
#include <charconv>
#include <optional>
#include <random>
#include <string>

#include <catch2/catch.hpp>

#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"

using namespace std::chrono_literals;
namespace lock = lockscope::lock;

// Copied by hand from seed 000 §4.2.1 / §4.2.3 / §4.2.2 and §2.2, independently of
// scripts.hpp, so that a typo there cannot hide.
static const std::string seed_acquire =
    "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
static const std::string seed_unlock =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";
static const std::string seed_renew =
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;";
static const std::string seed_force_unlock =
    "if (redis.call('del', KEYS[1]) == 1) then redis.call('publish', KEYS[2], ARGV[1]); return 1 else return 0 end";

// Seed 001's RedissonFairLock.tryLockInnerAsync with the Java `"..." +` concatenation
// resolved and the comments dropped (1453 bytes).
static const std::string seed_fair_acquire =
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false the"
    "n break;end;local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout <= to"
    "number(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);else br"
    "eak;end;end;if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or (re"
    "dis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS"
    "[3], ARGV[2]);local keys = redis.call('zrange', KEYS[3], 0, -1);for i = 1, #keys, 1 do redis.call('z"
    "incrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);end;redis.call('hset', KEYS[1], ARGV[2], 1);redis.cal"
    "l('pexpire', KEYS[1], ARGV[1]);return nil;end;if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then r"
    "edis.call('hincrby', KEYS[1], ARGV[2],1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;loca"
    "l timeout = redis.call('zscore', KEYS[3], ARGV[2]);if timeout ~= false then return timeout - tonumbe"
    "r(ARGV[3]) - tonumber(ARGV[4]);end;local lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;"
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] then ttl = tonumber(redis.call('zscore', KEYS[3"
    "], lastThreadId)) - tonumber(ARGV[4]);else ttl = redis.call('pttl', KEYS[1]);end;local timeout = ttl"
    " + tonumber(ARGV[3]) + tonumber(ARGV[4]);if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then "
    "redis.call('rpush', KEYS[2], ARGV[2]);end;return ttl;";

TEST_CASE("the fair acquire is seed 001's, byte for byte", "[lock][scripts]") {
  CHECK(lock::scripts::fair_acquire == seed_fair_acquire);
  CHECK(lock::scripts::fair_acquire.size() == 1453);
  const auto& s = lock::script(lock::script_kind::fair_acquire);
  CHECK(s.key_count == 3);
  CHECK(s.arg_count == 4);
  CHECK(lock::script(lock::script_kind::fair_unlock).key_count == 4);
  CHECK(lock::script(lock::script_kind::fair_force_unlock).key_count == 4);
  CHECK(lock::script(lock::script_kind::fair_acquire_failed).key_count == 2);
}

TEST_CASE("scripts are byte-identical to the seed", "[lock][scripts]") {
  CHECK(lock::scripts::acquire == seed_acquire);
  CHECK(lock::scripts::acquire.size() == 339);
  CHECK(lock::scripts::unlock == seed_unlock);
  CHECK(lock::scripts::unlock.size() == 305);
  CHECK(lock::scripts::renew == seed_renew);
  CHECK(lock::scripts::renew.size() == 120);
  CHECK(lock::scripts::force_unlock == seed_force_unlock);
  CHECK(lock::script(lock::script_kind::acquire).key_count == 1);
  CHECK(lock::script(lock::script_kind::unlock).key_count == 2);
  CHECK(lock::script(lock::script_kind::renew).key_count == 1);
  CHECK(lock::script(lock::script_kind::force_unlock).key_count == 2);
}

// RedissonFencedLock.tryLockInnerAsync's EVAL_LONG_LIST form, copied from Redisson's
// Java source with the concatenation resolved, independently of scripts.hpp.
static const std::string redisson_fenced_acquire =
    "if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then local token = redis.call('incr', KEYS[2]);redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; return {redis.call('pttl', KEYS[1]), -1};";

TEST_CASE("the fenced acquire is Redisson's", "[lock][scripts]") {
  CHECK(lock::scripts::fenced_acquire == redisson_fenced_acquire);
  CHECK(lock::script(lock::script_kind::fenced_acquire).key_count == 2);
  CHECK(lock::script(lock::script_kind::fenced_acquire).arg_count == 2);
}

// RedissonReadLock / RedissonWriteLock (3.11 source), one line each, concatenation
// resolved, independently of scripts.hpp's line breaks.
static const std::string redisson_read_acquire =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'read'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('set', KEYS[2] .. ':1', 1); redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); local key = KEYS[2] .. ':' .. ind;redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]); local remainTime = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); return nil; end;return redis.call('pttl', KEYS[1]);";
static const std::string redisson_read_unlock =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); return 1; end; local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); if (lockExists == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end;redis.call('del', KEYS[3] .. ':' .. (counter+1)); if (redis.call('hlen', KEYS[1]) > 1) then local maxRemainTime = -3; local keys = redis.call('hkeys', KEYS[1]); for n, key in ipairs(keys) do counter = tonumber(redis.call('hget', KEYS[1], key)); if type(counter) == 'number' then for i=counter, 1, -1 do local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); maxRemainTime = math.max(remainTime, maxRemainTime);end; end; end; if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); return 0; end;if mode == 'write' then return 0;end; end; redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; ";
static const std::string redisson_read_renew =
    "local counter = redis.call('hget', KEYS[1], ARGV[2]); if (counter ~= false) then redis.call('pexpire', KEYS[1], ARGV[1]); if (redis.call('hlen', KEYS[1]) > 1) then local keys = redis.call('hkeys', KEYS[1]); for n, key in ipairs(keys) do counter = tonumber(redis.call('hget', KEYS[1], key)); if type(counter) == 'number' then for i=counter, 1, -1 do redis.call('pexpire', KEYS[2] .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[1]); end; end; end; end; return 1; end; return 0;";
static const std::string redisson_read_force_unlock =
    "if (redis.call('hget', KEYS[1], 'mode') == 'read') then redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return 0; ";
static const std::string redisson_write_acquire =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'write') then if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); local currentExpire = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil; end; end;return redis.call('pttl', KEYS[1]);";
static const std::string redisson_write_unlock =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); return 1; end;if (mode == 'write') then local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); if (lockExists == 0) then return nil;else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('hdel', KEYS[1], ARGV[3]); if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); else redis.call('hset', KEYS[1], 'mode', 'read'); end; return 1; end; end; end; return nil;";
static const std::string redisson_write_force_unlock =
    "if (redis.call('hget', KEYS[1], 'mode') == 'write') then redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return 0; ";

TEST_CASE("the read/write lock scripts are Redisson's", "[lock][scripts]") {
  CHECK(lock::scripts::read_acquire == redisson_read_acquire);
  CHECK(lock::scripts::read_unlock == redisson_read_unlock);
  CHECK(lock::scripts::read_renew == redisson_read_renew);
  CHECK(lock::scripts::read_force_unlock == redisson_read_force_unlock);
  CHECK(lock::scripts::write_acquire == redisson_write_acquire);
  CHECK(lock::scripts::write_unlock == redisson_write_unlock);
  CHECK(lock::scripts::write_force_unlock == redisson_write_force_unlock);
  CHECK(lock::script(lock::script_kind::read_unlock).key_count == 4);
  CHECK(lock::script(lock::script_kind::write_unlock).arg_count == 3);
}

TEST_CASE("script SHA1s match OpenSSL and are recognised", "[lock][scripts]") {
  REQUIRE(lock::all_scripts().size() == 18);
  std::size_t index = 0;
  for (const auto& s : lock::all_scripts()) {
    INFO(s.name);
    CHECK(static_cast<std::size_t>(s.kind) == index++);
    CHECK(s.sha1 == lock::sha1_hex(s.text));
    CHECK(lock::find_script_by_text(s.text) == &s);
    CHECK(lock::find_script_by_sha1(s.sha1) == &s);
    std::string upper(s.sha1);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(lock::find_script_by_sha1(upper) == &s);
  }
  CHECK(lock::sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");  // FIPS 180 vector
  CHECK(lock::find_script_by_text(seed_acquire + " ") == nullptr);
  CHECK(lock::find_script_by_sha1("dad0f8d619e548e04f21fb48d50be5034df3adaf") == nullptr);
  CHECK(lock::find_script_by_sha1("dad0") == nullptr);
}

TEST_CASE("script SHA1s match redis-server's SCRIPT LOAD", "[lock][scripts][redis]") {
  LOCKSCOPE_REQUIRE_REDIS_SERVER();
  lockscope::test::redis_server server;
  lockscope::test::resp_connection c(server.host(), server.port());
  for (const auto& s : lock::all_scripts()) {
    INFO(s.name);
    CHECK(c.command("SCRIPT", "LOAD", s.text).text == s.sha1);
  }
}

TEST_CASE("channel naming", "[lock][naming]") {
  CHECK(lock::channel_name("myLock") == "redisson_lock__channel:{myLock}");
  CHECK(lock::channel_name("a{b}") == "redisson_lock__channel:a{b}");
  CHECK(lock::prefixed_name("redisson_lock_queue", "q") == "redisson_lock_queue:{q}");
  CHECK(lock::lock_name_from_channel("redisson_lock__channel:{myLock}") == "myLock");
  CHECK(lock::lock_name_from_channel("redisson_lock__channel:a{b}") == "a{b}");
  CHECK_FALSE(lock::lock_name_from_channel("redisson_rwlock:{x}"));
  CHECK_FALSE(lock::lock_name_from_channel("redisson_lock__channel:"));
  CHECK(lock::unlock_message == "0");
}

TEST_CASE("owner ids", "[lock][naming]") {
  const std::string seed_owner = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
  auto parts = lock::parse_owner_id(seed_owner);
  REQUIRE(parts);
  CHECK(parts->client_id == "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767");
  CHECK(parts->thread_id == "12");
  CHECK(parts->thread_number == 12);
  CHECK(lock::make_owner_id("80e6bb0b-b3bb-4ce0-b120-9c7ce917b767", 12) == seed_owner);
  CHECK_FALSE(lock::parse_owner_id("80e6bb0b-b3bb-4ce0-b120-9c7ce917b767"));
  CHECK_FALSE(lock::parse_owner_id("80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:"));
  CHECK_FALSE(lock::parse_owner_id("80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:1x"));
  CHECK_FALSE(lock::parse_owner_id("80e6bb0b-b3bb-4ce0-b120-9c7ce917b76:12"));
  CHECK_FALSE(lock::parse_owner_id("80e6bb0bxb3bb-4ce0-b120-9c7ce917b767:12"));
  CHECK_FALSE(lock::parse_owner_id("worker-7"));
  // is_uuid (by table): upper and lower case hex, the four dashes in place, nothing else.
  CHECK(lock::is_uuid("80E6BB0B-B3BB-4CE0-B120-9C7CE917B767"));
  CHECK_FALSE(lock::is_uuid("80e6bb0b-b3bb-4ce0-b120-9c7ce917b76g"));
  CHECK_FALSE(lock::is_uuid("80e6bb0b-b3bb-4ce0-b120-9c7ce917b76-"));
  CHECK_FALSE(lock::is_uuid("80e6bb0b0b3bb-4ce0-b120-9c7ce917b767"));
  CHECK_FALSE(lock::is_uuid(std::string_view("80e6bb0b-b3bb-4ce0-b120-9c7ce917b7\0\x80", 36)));
  CHECK(lock::not_owner_message(seed_owner) ==
        "attempt to unlock lock, not locked by current thread by node id: "
        "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767 thread-id: 12");
}

// parse_owner_id looks for the colon at 36 only; the plain reading takes the last colon.
// Random texts made of owner ids' parts, cut, joined and altered, must read the same both ways.
TEST_CASE("owner ids read as the last colon's split does", "[lock][naming]") {
  const auto reference = [](std::string_view owner) -> std::optional<lock::owner_id_parts> {
    const std::size_t colon = owner.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    lock::owner_id_parts parts;
    parts.client_id = owner.substr(0, colon);
    parts.thread_id = owner.substr(colon + 1);
    if (!lock::is_uuid(parts.client_id) || parts.thread_id.empty()) return std::nullopt;
    const char* end = parts.thread_id.data() + parts.thread_id.size();
    const auto [ptr, ec] = std::from_chars(parts.thread_id.data(), end, parts.thread_number);
    if (ec != std::errc{} || ptr != end) return std::nullopt;
    return parts;
  };
  std::mt19937 rng(43);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::string pieces[] = {"80e6bb0b-b3bb-4ce0-b120-9c7ce917b767", ":", "12", "0", "18446744073709551616",
                                "-3", "+4", "432e4278a93f3add0769aeb1a836436c", "x", "", "::", "-"};
  const std::string alphabet = "0123456789abcdefABCDEF-:xz ";
  std::size_t parsed = 0;
  for (int round = 0; round < 200000; ++round) {
    std::string owner;
    if (pick(2) == 0) owner = pieces[0] + ":" + std::to_string(rng() % 100000);  // an owner id, altered or not
    for (std::size_t n = pick(owner.empty() ? 5 : 2); n > 0; --n) owner += pieces[pick(std::size(pieces))];
    for (std::size_t n = pick(3); n > 0 && !owner.empty(); --n) {
      const std::size_t at = pick(owner.size());
      switch (pick(3)) {
        case 0: owner[at] = alphabet[pick(alphabet.size())]; break;
        case 1: owner.erase(at, 1); break;
        default: owner.insert(at, 1, alphabet[pick(alphabet.size())]); break;
      }
    }
    const auto expected = reference(owner);
    const auto got = lock::parse_owner_id(owner);
    INFO(owner);
    REQUIRE(got.has_value() == expected.has_value());
    if (!got) continue;
    ++parsed;
    CHECK(got->client_id.data() == expected->client_id.data());
    CHECK(got->client_id.size() == expected->client_id.size());
    CHECK(got->thread_id.data() == expected->thread_id.data());
    CHECK(got->thread_id.size() == expected->thread_id.size());
    CHECK(got->thread_number == expected->thread_number);
  }
  CHECK(parsed > 20000);  // both sides of the answer seen often
}

TEST_CASE("Redis URLs", "[lock][config]") {
  auto parse = [](std::string_view url) { return lock::client_config::from_url(url); };
  auto c = parse("redis://127.0.0.1");
  CHECK(c.host == "127.0.0.1");
  CHECK(c.port == 6379);
  CHECK_FALSE(c.password);
  c = parse("redis://:Root%40123@db.example:6001/2");
  CHECK(c.host == "db.example");
  CHECK(c.port == 6001);
  CHECK(c.username.empty());
  CHECK(c.password == "Root@123");
  CHECK(c.database == 2);
  c = parse("redis://app:s3cret@[::1]:7000");
  CHECK(c.host == "::1");
  CHECK(c.port == 7000);
  CHECK(c.username == "app");
  CHECK(c.password == "s3cret");
  c = parse("redis://justpass@h");
  CHECK(c.password == "justpass");
  CHECK_FALSE(c.tls.enabled);
  c = parse("rediss://:pw@redis.example:6380/1");
  CHECK(c.tls.enabled);
  CHECK(c.tls.verify_peer);
  CHECK(c.host == "redis.example");
  CHECK(c.port == 6380);
  CHECK(c.password == "pw");
  CHECK(c.database == 1);

  auto error_of = [](std::string_view url) {
    lock::client_config cfg;
    std::string why;
    const std::error_code ec = lock::parse_url(url, cfg, &why);
    return std::make_pair(ec, why);
  };
  CHECK(error_of("http://h").first == lock::errc::invalid_url);
  CHECK(error_of("http://h").second ==
        "'http://h' does not start with redis://, rediss://, redis-sentinel://, rediss-sentinel://, redis-cluster:// "
        "or rediss-cluster://");
  CHECK(error_of("rediss://").first == lock::errc::invalid_url);
  CHECK(error_of("redis://h:0").first == lock::errc::invalid_url);
  CHECK(error_of("redis://h:99999").second == "port '99999' is not a number in 1..65535");
  CHECK(error_of("redis://h:").first == lock::errc::invalid_url);
  CHECK(error_of("redis://h/x").first == lock::errc::invalid_url);
  CHECK(error_of("redis://:%zz@h").first == lock::errc::invalid_url);
  CHECK(error_of("redis://").first == lock::errc::invalid_url);
  CHECK_THROWS_AS(parse("rediss://h:x"), lock::lock_error);
  try {
    parse("rediss://h:x");
  } catch (const lock::lock_error& e) {
    CHECK(std::string(e.what()) == "port 'x' is not a number in 1..65535");
    CHECK(e.code() == lock::errc::invalid_url);
  }
  // parse_url over an existing config: a redis:// URL turns TLS off again.
  lock::client_config cfg;
  REQUIRE_FALSE(lock::parse_url("rediss://h", cfg));
  REQUIRE_FALSE(lock::parse_url("redis://h", cfg));
  CHECK_FALSE(cfg.tls.enabled);
}

TEST_CASE("durations", "[lock][config]") {
  CHECK(lock::parse_duration("500ms") == 500ms);
  CHECK(lock::parse_duration("10s") == 10s);
  CHECK(lock::parse_duration("2m") == 2min);
  CHECK(lock::parse_duration("1h") == 1h);
  CHECK(lock::parse_duration("0") == 0ms);
  CHECK(lock::parse_duration("0s") == 0ms);
  CHECK_FALSE(lock::parse_duration(""));
  CHECK_FALSE(lock::parse_duration("10"));
  CHECK_FALSE(lock::parse_duration("-1s"));
  CHECK_FALSE(lock::parse_duration("1.5s"));
  CHECK_FALSE(lock::parse_duration("5x"));
  CHECK_FALSE(lock::parse_duration("s"));
  CHECK_FALSE(lock::parse_duration("99999999999999999999ms"));
}
