#include "scenarios.hpp"

#include <stdexcept>

#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"

namespace lockscope::timeline_test {

namespace {

using lock::script;
using lock::script_kind;

constexpr std::string_view server_ip = "192.168.1.10";
constexpr std::uint16_t server_port = 16379;
constexpr std::string_view ip_a = "192.168.1.21";
constexpr std::string_view ip_b = "192.168.1.22";
constexpr std::int64_t ms = 1000;

std::string s(std::string_view v) { return std::string(v); }

// AUTH and PING at the start of a connection, as in §4.2.
int open(capture_builder& b, std::string_view ip, std::uint16_t port, std::int64_t t) {
  const int c = b.connect(ip, port, server_ip, server_port, t);
  b.command(c, t + 300, {"AUTH", "Root@123"}, resp_ok);
  b.command(c, t + 600, {"PING"}, "+PONG\r\n");
  return c;
}

void quit(capture_builder& b, int c, std::int64_t t) {
  b.command(c, t, {"QUIT"}, resp_ok);
  b.close(c, t + 300);
}

std::vector<std::string> eval(script_kind k, std::vector<std::string> keys_and_args, std::size_t keys) {
  std::vector<std::string> v{"EVAL", s(script(k).text), std::to_string(keys)};
  v.insert(v.end(), keys_and_args.begin(), keys_and_args.end());
  return v;
}
std::vector<std::string> evalsha(std::string_view sha, std::vector<std::string> keys_and_args, std::size_t keys) {
  std::vector<std::string> v{"EVALSHA", s(sha), std::to_string(keys)};
  v.insert(v.end(), keys_and_args.begin(), keys_and_args.end());
  return v;
}

std::vector<std::string> acquire(std::string_view owner, std::int64_t lease = 6000) {
  return eval(script_kind::acquire, {"myLock", std::to_string(lease), s(owner)}, 1);
}
std::vector<std::string> renew(std::string_view owner, std::int64_t lease = 6000) {
  return eval(script_kind::renew, {"myLock", std::to_string(lease), s(owner)}, 1);
}
std::vector<std::string> unlock(std::string_view owner, std::int64_t lease = 6000) {
  return eval(script_kind::unlock, {"myLock", lock::channel_name("myLock"), "0", std::to_string(lease), s(owner)}, 2);
}
std::string subscribe_reply(std::string_view kind, int count) {
  return resp_array({s(kind), lock::channel_name("myLock")}).replace(0, 2, "*3") + resp_int(count);
}
std::string message_push() { return resp_array({"message", lock::channel_name("myLock"), "0"}); }

// §4.1: A acquires, B fails and subscribes, A's watchdog renews, A unlocks and the
// message reaches B, B acquires and unsubscribes (Redisson unsubscribes in the
// `finally` after its acquire loop, §5.1.2).
void seed(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50001, t0);
  b.command(a, t0 + 10 * ms, acquire(owner_a), resp_nil);                       // [1][2]
  const int bc = open(b, ip_b, 50002, t0 + 200 * ms);
  b.command(bc, t0 + 250 * ms, acquire(owner_b), resp_int(5760));               // [3][4]
  const int bs = open(b, ip_b, 50003, t0 + 251 * ms);
  b.command(bs, t0 + 252 * ms, {"SUBSCRIBE", lock::channel_name("myLock")}, subscribe_reply("subscribe", 1));  // [5]
  b.command(a, t0 + 2010 * ms, renew(owner_a), resp_int(1));                    // watchdog, lease/3
  b.command(a, t0 + 3000 * ms, unlock(owner_a), resp_int(1));                   // [6][7]
  b.server_push(bs, t0 + 3000 * ms + 130, message_push());                      // [8]
  b.command(bc, t0 + 3000 * ms + 400, acquire(owner_b), resp_nil);              // [9]
  b.command(bs, t0 + 3000 * ms + 700, {"UNSUBSCRIBE", lock::channel_name("myLock")},
            subscribe_reply("unsubscribe", 0));
  quit(b, bs, t0 + 3100 * ms);
  quit(b, bc, t0 + 3200 * ms);
  quit(b, a, t0 + 3300 * ms);
}

// The holder (lease 1 s, no watchdog) unlocks after its lease ran out.
void expired_while_held(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50011, t0);
  b.command(a, t0 + 10 * ms, acquire(owner_a, 1000), resp_nil);
  b.command(a, t0 + 1500 * ms, unlock(owner_a, 1000), resp_nil);
  quit(b, a, t0 + 1600 * ms);
}

// Two SET NX owners at once (e.g. after a failover lost the first key).
void overlapping_holders(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50021, t0);
  const int c = open(b, ip_b, 50022, t0 + 1 * ms);
  b.command(a, t0 + 10 * ms, {"SET", "orders:lock", "token-a", "NX", "PX", "30000"}, resp_ok);
  b.command(c, t0 + 500 * ms, {"SET", "orders:lock", "token-b", "NX", "PX", "30000"}, resp_ok);
  quit(b, a, t0 + 600 * ms);
  quit(b, c, t0 + 700 * ms);
}

// Two clients of a Redis 8.4 / Valkey 9 lock that uses no script: SET NX PX takes it,
// SET IFEQ PX (its own value) renews it, DELEX IFEQ and DELIFEQ release it. A holds and
// renews twice, B polls; A releases, B takes it; A's stale second release is refused
// (0); B renews once, then stops (hung), and its lease runs out; A, polling meanwhile
// with a new value, takes it after the expiry and releases it.
void conditional_commands(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50121, t0);
  const int c = open(b, ip_b, 50122, t0 + 1 * ms);
  auto take = [&](int conn, std::string_view value, std::int64_t at, std::string_view reply) {
    b.command(conn, t0 + at * ms, {"SET", "jobs:lock", s(value), "NX", "PX", "3000"}, reply);
  };
  auto renew = [&](int conn, std::string_view value, std::int64_t at) {
    b.command(conn, t0 + at * ms, {"SET", "jobs:lock", s(value), "IFEQ", s(value), "PX", "3000"}, resp_ok);
  };
  take(a, "tok-a", 10, resp_ok);
  take(c, "tok-b", 20, resp_nil);
  renew(a, "tok-a", 1000);
  take(c, "tok-b", 1500, resp_nil);
  renew(a, "tok-a", 2000);
  b.command(a, t0 + 2500 * ms, {"DELEX", "jobs:lock", "IFEQ", "tok-a"}, resp_int(1));
  take(c, "tok-b", 2600, resp_ok);
  b.command(a, t0 + 3000 * ms, {"DELIFEQ", "jobs:lock", "tok-a"}, resp_int(0));  // stale: refused
  renew(c, "tok-b", 4000);
  take(a, "tok-a2", 5000, resp_nil);
  take(a, "tok-a2", 6000, resp_nil);
  take(a, "tok-a2", 7100, resp_ok);  // B's lease ran out at 7000
  b.command(a, t0 + 7500 * ms, {"DELIFEQ", "jobs:lock", "tok-a2"}, resp_int(1));
  quit(b, a, t0 + 8000 * ms);
  quit(b, c, t0 + 8100 * ms);
}

// A RedLock (SET NX PX with one token on three servers) by A; then two of the servers
// lose the key (a restart without persistence, a failover to a replica that had not
// got it: nothing on the wire says so) and B takes those two: each believes it holds a
// majority. Afterwards both release everywhere.
void split_quorum(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const std::uint16_t ports[3] = {6379, 6380, 6381};
  int a[3], c[3];
  for (int i = 0; i < 3; ++i) {
    a[i] = b.connect(ip_a, static_cast<std::uint16_t>(50131 + i), server_ip, ports[i], t0 + i * 100);
    c[i] = b.connect(ip_b, static_cast<std::uint16_t>(50141 + i), server_ip, ports[i], t0 + ms + i * 100);
  }
  for (int i = 0; i < 3; ++i) {
    b.command(a[i], t0 + 10 * ms + i * 200, {"SET", "rl:payment", "token-a", "NX", "PX", "30000"}, resp_ok);
  }
  for (int i = 0; i < 3; ++i) {
    b.command(c[i], t0 + 2000 * ms + i * 200, {"SET", "rl:payment", "token-b", "NX", "PX", "30000"},
              i < 2 ? resp_ok : resp_nil);
  }
  const std::vector<std::string> release_script = {
      "EVAL", "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end",
      "1", "rl:payment"};
  for (int i = 0; i < 3; ++i) {
    auto release_b = release_script;
    release_b.push_back("token-b");
    b.command(c[i], t0 + 3000 * ms + i * 200, release_b, i < 2 ? resp_int(1) : resp_int(0));
    auto release_a = release_script;
    release_a.push_back("token-a");
    b.command(a[i], t0 + 4000 * ms + i * 200, release_a, i < 2 ? resp_int(0) : resp_int(1));
  }
  for (int i = 0; i < 3; ++i) {
    b.close(a[i], t0 + 5000 * ms + i * 100);
    b.close(c[i], t0 + 5000 * ms + i * 100 + 50);
  }
}

// B unlocks A's lock: the script answers nil.
void unlock_by_non_owner(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50031, t0);
  const int c = open(b, ip_b, 50032, t0 + 1 * ms);
  b.command(a, t0 + 10 * ms, acquire(owner_a, 30000), resp_nil);
  b.command(c, t0 + 200 * ms, unlock(owner_b, 30000), resp_nil);
  b.command(a, t0 + 400 * ms, unlock(owner_a, 30000), resp_int(1));
  quit(b, a, t0 + 500 * ms);
  quit(b, c, t0 + 600 * ms);
}

// A unlocks, but the message never reaches B (its subscriber connection is silent):
// the lock sits free while B waits, until B's ttl wait ends.
void idle_with_waiters(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50041, t0);
  const int bc = open(b, ip_b, 50042, t0 + 1 * ms);
  const int bs = open(b, ip_b, 50043, t0 + 2 * ms);
  b.command(a, t0 + 10 * ms, acquire(owner_a), resp_nil);
  b.command(bc, t0 + 100 * ms, acquire(owner_b), resp_int(5910));
  b.command(bs, t0 + 102 * ms, {"SUBSCRIBE", lock::channel_name("myLock")}, subscribe_reply("subscribe", 1));
  b.command(bc, t0 + 104 * ms, acquire(owner_b), resp_int(5906));  // the retry after SUBSCRIBE
  b.command(a, t0 + 1000 * ms, unlock(owner_a), resp_int(1));     // published, but lost
  b.command(bc, t0 + 6010 * ms, acquire(owner_b), resp_nil);      // woke up when the ttl ran out
  b.command(bs, t0 + 6011 * ms, {"UNSUBSCRIBE", lock::channel_name("myLock")}, subscribe_reply("unsubscribe", 0));
  quit(b, bs, t0 + 6100 * ms);
  quit(b, bc, t0 + 6200 * ms);
  quit(b, a, t0 + 6300 * ms);
}

// A's lease (500 ms, no watchdog) runs out: expiry publishes nothing, so B wakes up
// by its ttl timeout and takes the lock at once.
void woken_by_timeout(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50051, t0);
  const int bc = open(b, ip_b, 50052, t0 + 1 * ms);
  const int bs = open(b, ip_b, 50053, t0 + 2 * ms);
  b.command(a, t0 + 10 * ms, acquire(owner_a, 500), resp_nil);
  b.command(bc, t0 + 100 * ms, acquire(owner_b, 500), resp_int(410));
  b.command(bs, t0 + 102 * ms, {"SUBSCRIBE", lock::channel_name("myLock")}, subscribe_reply("subscribe", 1));
  b.command(bc, t0 + 104 * ms, acquire(owner_b, 500), resp_int(406));
  b.command(bc, t0 + 512 * ms, acquire(owner_b, 500), resp_nil);
  b.command(bs, t0 + 513 * ms, {"UNSUBSCRIBE", lock::channel_name("myLock")}, subscribe_reply("unsubscribe", 0));
  b.command(bc, t0 + 600 * ms, unlock(owner_b, 500), resp_int(1));
  quit(b, bs, t0 + 700 * ms);
  quit(b, bc, t0 + 800 * ms);
  quit(b, a, t0 + 900 * ms);
}

// The watchdog (lease 3 s, renew every 1 s) stalls for 1.8 s once.
void late_renewal(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50061, t0);
  b.command(a, t0 + 10 * ms, acquire(owner_a, 3000), resp_nil);
  b.command(a, t0 + 1010 * ms, renew(owner_a, 3000), resp_int(1));
  b.command(a, t0 + 2810 * ms, renew(owner_a, 3000), resp_int(1));
  b.command(a, t0 + 3000 * ms, unlock(owner_a, 3000), resp_int(1));
  quit(b, a, t0 + 3100 * ms);
}

// Held for 70 s with the watchdog (30 s lease, renewals every 10 s): long_hold fires
// at 60 s (the default threshold).
void long_hold(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50071, t0);
  b.command(a, t0 + 10 * ms, acquire(owner_a, 30000), resp_nil);
  for (int i = 1; i <= 6; ++i) b.command(a, t0 + 10 * ms + i * 10000 * ms, renew(owner_a, 30000), resp_int(1));
  b.command(a, t0 + 70010 * ms, unlock(owner_a, 30000), resp_int(1));
  quit(b, a, t0 + 70100 * ms);
}

// 004_*.txt: setIfAbsent, then expire in a second command.
void non_atomic_acquire(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50081, t0);
  b.command(a, t0 + 10 * ms, {"SETNX", "user:1001", "1"}, resp_int(1));
  b.command(a, t0 + 11 * ms, {"EXPIRE", "user:1001", "15"}, resp_int(1));
  const int c = open(b, ip_b, 50082, t0 + 20 * ms);
  b.command(c, t0 + 30 * ms, {"SETNX", "user:1001", "1"}, resp_int(0));
  b.command(a, t0 + 500 * ms, {"DEL", "user:1001"}, resp_int(1));
  quit(b, a, t0 + 600 * ms);
  quit(b, c, t0 + 700 * ms);
}

// The seed flow with EVALSHA of the built-in SHA1s only (scripts loaded before the
// capture started): every operation is resolved, none inferred.
void evalsha_known(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const std::string ch = lock::channel_name("myLock");
  const int a = open(b, ip_a, 50091, t0);
  b.command(a, t0 + 10 * ms, evalsha(script(script_kind::acquire).sha1, {"myLock", "6000", s(owner_a)}, 1), resp_nil);
  const int bc = open(b, ip_b, 50092, t0 + 20 * ms);
  const int bs = open(b, ip_b, 50093, t0 + 21 * ms);
  b.command(bc, t0 + 30 * ms, evalsha(script(script_kind::acquire).sha1, {"myLock", "6000", s(owner_b)}, 1), resp_int(5970));
  b.command(bs, t0 + 32 * ms, {"SUBSCRIBE", ch}, subscribe_reply("subscribe", 1));
  b.command(a, t0 + 2010 * ms, evalsha(script(script_kind::renew).sha1, {"myLock", "6000", s(owner_a)}, 1), resp_int(1));
  b.command(a, t0 + 2500 * ms, evalsha(script(script_kind::unlock).sha1, {"myLock", ch, "0", "6000", s(owner_a)}, 2), resp_int(1));
  b.server_push(bs, t0 + 2500 * ms + 130, message_push());
  b.command(bc, t0 + 2501 * ms, evalsha(script(script_kind::acquire).sha1, {"myLock", "6000", s(owner_b)}, 1), resp_nil);
  b.command(bs, t0 + 2502 * ms, {"UNSUBSCRIBE", ch}, subscribe_reply("unsubscribe", 0));
  b.command(bc, t0 + 2600 * ms, evalsha(script(script_kind::force_unlock).sha1, {"myLock", ch, "0"}, 2), resp_int(1));
}

// The same flow with SHA1s of scripts the analyzer has never seen (another client's
// spelling, loaded before the capture): kinds are inferred from the arguments.
void evalsha_inferred(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const std::string ch = lock::channel_name("myLock");
  const std::string sha_acquire = "1111111111111111111111111111111111111111";
  const std::string sha_renew = "2222222222222222222222222222222222222222";
  const std::string sha_unlock = "3333333333333333333333333333333333333333";
  const int a = open(b, ip_a, 50101, t0);
  b.command(a, t0 + 10 * ms, evalsha(sha_acquire, {"myLock", "6000", s(owner_a)}, 1), resp_nil);
  const int bc = open(b, ip_b, 50102, t0 + 20 * ms);
  const int bs = open(b, ip_b, 50103, t0 + 21 * ms);
  b.command(bc, t0 + 30 * ms, evalsha(sha_acquire, {"myLock", "6000", s(owner_b)}, 1), resp_int(5970));
  b.command(bs, t0 + 32 * ms, {"SUBSCRIBE", ch}, subscribe_reply("subscribe", 1));
  b.command(a, t0 + 2010 * ms, evalsha(sha_renew, {"myLock", "6000", s(owner_a)}, 1), resp_int(1));
  b.command(a, t0 + 2500 * ms, evalsha(sha_unlock, {"myLock", ch, "0", "6000", s(owner_a)}, 2), resp_int(1));
  b.server_push(bs, t0 + 2500 * ms + 130, message_push());
  b.command(bc, t0 + 2501 * ms, evalsha(sha_acquire, {"myLock", "6000", s(owner_b)}, 1), resp_nil);
  b.command(bs, t0 + 2502 * ms, {"UNSUBSCRIBE", ch}, subscribe_reply("unsubscribe", 0));
  b.command(bc, t0 + 2600 * ms, evalsha(sha_unlock, {"myLock", ch, "0", "6000", s(owner_b)}, 2), resp_int(1));
}

// node-redisson (RESP3, a subscriber connection per client): B fails, retries at once,
// subscribes and waits up to the TTL; a stale timer of the same client UNSUBSCRIBEs
// the channel while B still waits; A's unlock publishes to nobody; B's timer retries
// 5.9 s later. The lock sat free all that time.
void subscription_lost(capture_builder& b) {
  const std::int64_t t0 = capture_epoch_us;
  const int a = open(b, ip_a, 50111, t0);
  const int bc = open(b, ip_b, 50112, t0 + 1 * ms);
  const int bs = open(b, ip_b, 50113, t0 + 2 * ms);
  b.command(a, t0 + 10 * ms, acquire(owner_a), resp_nil);
  b.command(bc, t0 + 100 * ms, acquire(owner_b), resp_int(5910));
  b.command(bc, t0 + 101 * ms, acquire(owner_b), resp_int(5909));
  b.command(bs, t0 + 102 * ms, {"SUBSCRIBE", lock::channel_name("myLock")}, subscribe_reply("subscribe", 1));
  b.command(bs, t0 + 400 * ms, {"UNSUBSCRIBE", lock::channel_name("myLock")}, subscribe_reply("unsubscribe", 0));
  b.command(a, t0 + 1000 * ms, unlock(owner_a), resp_int(1));   // published to nobody
  b.command(bs, t0 + 1001 * ms, {"UNSUBSCRIBE", lock::channel_name("myLock")},
            subscribe_reply("unsubscribe", 0));                  // not subscribed: no event
  b.command(bc, t0 + 6011 * ms, acquire(owner_b), resp_nil);     // B's timer
  b.command(bc, t0 + 6100 * ms, unlock(owner_b), resp_int(1));
  quit(b, bs, t0 + 6200 * ms);
  quit(b, bc, t0 + 6300 * ms);
  quit(b, a, t0 + 6400 * ms);
}

}  // namespace

const std::vector<scenario>& scenarios() {
  static const std::vector<scenario> all{
      {"seed-redisson", "the seed's documented flow (000 §4.1/§4.2): A acquires, B waits, renew, unlock → message → B", seed},
      {"crafted/expired_while_held", "unlock after the 1 s lease ran out", expired_while_held},
      {"crafted/overlapping_holders", "two SET NX owners at once", overlapping_holders},
      {"crafted/unlock_by_non_owner", "B unlocks A's lock", unlock_by_non_owner},
      {"crafted/idle_with_waiters", "the unlock message is lost; B waits out its ttl", idle_with_waiters},
      {"crafted/woken_by_timeout", "the lease expires; B wakes by its ttl", woken_by_timeout},
      {"crafted/late_renewal", "a watchdog renewal 1.8 s late (lease 3 s)", late_renewal},
      {"crafted/long_hold", "held 70 s with the watchdog", long_hold},
      {"crafted/non_atomic_acquire", "SETNX then EXPIRE (004_*.txt)", non_atomic_acquire},
      {"crafted/evalsha_known", "EVALSHA of the built-in SHA1s only", evalsha_known},
      {"crafted/evalsha_inferred", "EVALSHA of unknown SHA1s: kinds inferred", evalsha_inferred},
      {"crafted/subscription_lost", "node-redisson: B's subscriber leaves while B waits; the release goes unheard",
       subscription_lost},
      {"crafted/split_quorum", "a RedLock on 3 servers; 2 lose the key and another owner takes them",
       split_quorum},
      {"crafted/conditional_commands",
       "SET NX PX, SET IFEQ PX renewals, DELEX IFEQ and DELIFEQ releases (one refused), a lease left to expire",
       conditional_commands},
  };
  return all;
}

const scenario& find_scenario(std::string_view name) {
  for (const scenario& s : scenarios()) {
    if (s.name == name) return s;
  }
  throw std::invalid_argument("no scenario " + std::string(name));
}

}  // namespace lockscope::timeline_test
