// Replies on different connections captured in another order than the server ran
// their commands (issue 42 item 4), and read/write locks whose readers leave one by one
// (item 5): crafted captures of each race, each with a control that must still raise
// the anomaly, so that the tests can fail.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "capture_builder.hpp"
#include "helpers.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace reply_order_test {

constexpr std::string_view server_ip = "192.168.1.10";
constexpr std::int64_t ms = 1000;
constexpr std::int64_t race_t0 = 1717209303000000;
const std::string owner_a = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12";
const std::string owner_b = "5f1c3a9e-7d2b-4e8a-9c61-2b7e4d9a0f35:15";

std::vector<std::string> eval(lock::script_kind k, std::vector<std::string> keys, std::vector<std::string> argv) {
  std::vector<std::string> v{"EVAL", std::string(lock::script(k).text), std::to_string(keys.size())};
  v.insert(v.end(), keys.begin(), keys.end());
  v.insert(v.end(), argv.begin(), argv.end());
  return v;
}

struct temp_capture {
  std::filesystem::path path;
  explicit temp_capture(const capture_builder& b, std::string_view name) {
    path = std::filesystem::temp_directory_path() /
           ("lockscope-order-" + std::to_string(::getpid()) + "-" + std::string(name) + ".pcap");
    b.write(path.string());
  }
  // LOCKSCOPE_KEEP_CAPTURES=1 keeps them (to run another build's CLI on them).
  ~temp_capture() {
    if (std::getenv("LOCKSCOPE_KEEP_CAPTURES") == nullptr) std::filesystem::remove(path);
  }
};

// A Redisson holder (lease 30 s, watchdog) whose unlock (command connection) and
// watchdog renewal (another pooled connection) cross: the renewal's request leaves
// `renewal_after_us` after the unlock's; the server runs the unlock first, so the
// renewal answers 0, and that reply is captured first.
capture_builder crossed_unlock_and_renewal(bool unlock_follows, std::int64_t unlock_sent_after_refusal_us = 0) {
  capture_builder b;
  const int a1 = b.connect("192.168.1.21", 50001, server_ip, 6379, race_t0);
  const int a2 = b.connect("192.168.1.21", 50002, server_ip, 6379, race_t0 + 100);
  const std::string channel = lock::channel_name("myLock");
  b.command(a1, race_t0 + 10 * ms, eval(lock::script_kind::acquire, {"myLock"}, {"30000", owner_a}), std::string(resp_nil));
  b.command(a2, race_t0 + 10010 * ms, eval(lock::script_kind::renew, {"myLock"}, {"30000", owner_a}), resp_int(1));
  const std::int64_t t = race_t0 + 15000 * ms;
  b.command(a2, t + 50, eval(lock::script_kind::renew, {"myLock"}, {"30000", owner_a}), resp_int(0), 150);  // reply t+200
  if (unlock_follows) {
    // Sent at t (before the refusal's reply at t+200), answered at t+300; or, for the
    // control, sent after the refusal was captured and refused itself.
    const std::int64_t sent = unlock_sent_after_refusal_us > 0 ? t + 200 + unlock_sent_after_refusal_us : t;
    b.command(a1, sent, eval(lock::script_kind::unlock, {"myLock", channel}, {"0", "30000", owner_a}),
              unlock_sent_after_refusal_us > 0 ? std::string(resp_nil) : resp_int(1), 300);
  }
  b.close(a1, race_t0 + 20000 * ms);
  b.close(a2, race_t0 + 20000 * ms + 100);
  return b;
}

}  // namespace reply_order_test

using namespace reply_order_test;

TEST_CASE("order: an unlock and a watchdog renewal crossed on two connections raise nothing", "[order][race]") {
  const temp_capture cap(crossed_unlock_and_renewal(true), "crossed");
  const auto rec = events_of(cap.path.string());
  INFO(rec.names().size());
  CHECK(rec.count("renew_failed") == 1);
  CHECK(rec.count("released") == 1);
  CHECK(rec.count("anomaly:expired_while_held") == 0);
  CHECK(rec.count("expired") == 0);
  // The release is the hold's end: 15 s held.
  const recorded_event* released = rec.first("released");
  REQUIRE(released != nullptr);
  CHECK(released->held_us > 14'990 * ms);
  CHECK(released->owner == owner_a);
  // The same through the two-thread pipeline and its text.
  const std::string text = report_of(cap.path.string(), locks::report_format::text);
  CHECK(occurrences(text, "expired_while_held") == 0);
}

TEST_CASE("order: a renewal refused with no unlock of its owner is still a lost key", "[order][race]") {
  // Controls: the refusal stands alone; and the unlock was sent only after the refusal
  // was captured (the server ran the renewal first: the key was gone, the unlock too is refused).
  for (const std::int64_t later : {std::int64_t{-1}, std::int64_t{500}}) {
    INFO("unlock sent " << later << " us after the refusal");
    const temp_capture cap(crossed_unlock_and_renewal(later > 0, later > 0 ? later : 0), "refused");
    const auto rec = events_of(cap.path.string());
    CHECK(rec.count("renew_failed") == 1);
    CHECK(rec.count("anomaly:expired_while_held") == 1);
    const recorded_event* a = rec.first("anomaly:expired_while_held");
    REQUIRE(a != nullptr);
    CHECK(a->owner == owner_a);
    // Judged at the refusal (race_t0 + 15 s + 200 µs), reported once the order is certain.
    CHECK(a->ts_us >= race_t0 + 15000 * ms + 200);
    CHECK(a->ts_us <= race_t0 + 15000 * ms + 200 + locks::timeline_options{}.reply_skew_us);
  }
}

namespace reply_order_test {

// The other way round: the server ran the watchdog's renewal first (1), then the unlock;
// the unlock's reply is captured first. The watchdog's next renewal is refused (the key
// is gone), and another owner takes the lock.
capture_builder renewal_captured_after_unlock() {
  capture_builder b;
  const int a1 = b.connect("192.168.1.21", 50001, server_ip, 6379, race_t0);
  const int a2 = b.connect("192.168.1.21", 50002, server_ip, 6379, race_t0 + 100);
  const int c = b.connect("192.168.1.22", 50003, server_ip, 6379, race_t0 + 200);
  const std::string channel = lock::channel_name("myLock");
  b.command(a1, race_t0 + 10 * ms, eval(lock::script_kind::acquire, {"myLock"}, {"30000", owner_a}), std::string(resp_nil));
  const std::int64_t t = race_t0 + 15000 * ms;
  b.command(a2, t, eval(lock::script_kind::renew, {"myLock"}, {"30000", owner_a}), resp_int(1), 450);  // reply t+450
  b.command(a1, t + 100, eval(lock::script_kind::unlock, {"myLock", channel}, {"0", "30000", owner_a}), resp_int(1),
            200);  // reply t+300
  b.command(a2, t + 500 * ms, eval(lock::script_kind::renew, {"myLock"}, {"30000", owner_a}), resp_int(0));
  b.command(c, t + 800 * ms, eval(lock::script_kind::acquire, {"myLock"}, {"30000", owner_b}), std::string(resp_nil));
  b.close(a1, race_t0 + 20000 * ms);
  b.close(a2, race_t0 + 20000 * ms + 100);
  b.close(c, race_t0 + 20000 * ms + 200);
  return b;
}

}  // namespace reply_order_test

TEST_CASE("order: a renewal answered before the unlock but captured after it does not bring the holder back",
          "[order][race]") {
  const temp_capture cap(renewal_captured_after_unlock(), "renewal-after");
  const auto rec = events_of(cap.path.string());
  CHECK(rec.count("released") == 1);
  CHECK(rec.count("renewed") == 1);
  CHECK(rec.count("renew_failed") == 1);
  CHECK(rec.count("anomaly:expired_while_held") == 0);
  CHECK(rec.count("anomaly:overlapping_holders") == 0);
  CHECK(rec.count("acquired") == 2);
}

namespace reply_order_test {

// RedLock with SET NX PX over three servers. A tries all three: server 1 grants, 2 and 3
// refuse (C holds them), so A's quorum fails; it sends its
// release to server 1 while that server's acquire reply is still on its way (pipelined
// on one connection). B's acquisition on server 1 runs after A's release, but its reply
// is captured between A's two replies. `release_late`: the control, A's release sent
// only after B's reply was captured (then both held at once).
capture_builder failed_quorum_pipelined(bool release_late) {
  capture_builder b;
  const std::uint16_t ports[3] = {6379, 6380, 6381};
  int a[3], c[3];
  for (int i = 0; i < 3; ++i) {
    a[i] = b.connect("192.168.1.21", static_cast<std::uint16_t>(50131 + i), server_ip, ports[i], race_t0 + i * 100);
    c[i] = b.connect("192.168.1.23", static_cast<std::uint16_t>(50151 + i), server_ip, ports[i], race_t0 + 500 + i * 100);
  }
  const int bc = b.connect("192.168.1.22", 50141, server_ip, ports[0], race_t0 + 1 * ms);
  // C holds servers 2 and 3.
  for (int i = 1; i < 3; ++i) {
    b.command(c[i], race_t0 + 10 * ms + i * 200, {"SET", "rl:pay", "token-c", "NX", "PX", "30000"}, std::string(resp_ok));
  }
  const std::int64_t t = race_t0 + 2000 * ms;
  b.command(a[1], t, {"SET", "rl:pay", "token-a", "NX", "PX", "30000"}, std::string(resp_nil), 100);
  b.command(a[2], t + 10, {"SET", "rl:pay", "token-a", "NX", "PX", "30000"}, std::string(resp_nil), 100);
  const std::vector<std::string> release = {
      "EVAL", "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end",
      "1", "rl:pay", "token-a"};
  b.command(a[0], t + 20, {"SET", "rl:pay", "token-a", "NX", "PX", "30000"}, std::string(resp_ok), 380);  // reply t+400
  if (!release_late) b.command(a[0], t + 150, release, resp_int(1), 350);                               // reply t+500
  b.command(bc, t + 200, {"SET", "rl:pay", "token-b", "NX", "PX", "30000"}, std::string(resp_ok), 250);   // reply t+450
  if (release_late) b.command(a[0], t + 600, release, resp_int(1), 100);
  const std::vector<std::string> release_b = {release[0], release[1], "1", "rl:pay", "token-b"};
  b.command(bc, t + 3000 * ms, release_b, resp_int(1));
  for (int i = 0; i < 3; ++i) b.close(a[i], race_t0 + 6000 * ms + i * 100);
  b.close(bc, race_t0 + 6000 * ms + 500);
  return b;
}

}  // namespace reply_order_test

TEST_CASE("order: a failed quorum's pipelined release, another's acquisition captured between", "[order][race]") {
  const temp_capture cap(failed_quorum_pipelined(false), "quorum");
  const auto rec = events_of(cap.path.string());
  CHECK(rec.count("anomaly:overlapping_holders") == 0);
  CHECK(rec.count("anomaly:split_quorum") == 0);
  const std::string text = report_of(cap.path.string(), locks::report_format::text);
  CHECK(occurrences(text, "overlapping_holders") == 0);
  // The control: A released only after B's acquisition was answered: both held at once.
  const temp_capture late(failed_quorum_pipelined(true), "quorum-late");
  CHECK(events_of(late.path.string()).count("anomaly:overlapping_holders") == 1);
}

namespace reply_order_test {

// Redisson's read/write lock: readers R1 and R2 hold (R1 and R2 on their own command
// connections; acquired in the capture, or before it when `mid_stream`), writer W
// fails, subscribes and retries when the TTL it was given runs out; R1 leaves (0: R2
// still reads, nothing published), W's timer retry fails again, R2 leaves (1, published),
// W is notified and takes the write lock.
capture_builder readers_leave_one_by_one(bool mid_stream) {
  capture_builder b;
  const std::string r1 = "11111111-b3bb-4ce0-b120-9c7ce917b767:31";
  const std::string r2 = "22222222-7d2b-4e8a-9c61-2b7e4d9a0f35:32";
  const std::string w = "33333333-7d2b-4e8a-9c61-2b7e4d9a0f35:33:write";
  const std::string channel = "redisson_rwlock:{rw}";
  const int c1 = b.connect("192.168.1.21", 50201, server_ip, 6379, race_t0);
  const int c2 = b.connect("192.168.1.22", 50202, server_ip, 6379, race_t0 + 100);
  const int cw = b.connect("192.168.1.23", 50203, server_ip, 6379, race_t0 + 200);
  const int sw = b.connect("192.168.1.23", 50204, server_ip, 6379, race_t0 + 300);
  auto read_acquire = [&](const std::string& o) {
    return eval(lock::script_kind::read_acquire, {"rw", "{rw}:" + o + ":rwlock_timeout"}, {"30000", o, w});
  };
  auto read_unlock = [&](const std::string& o) {
    return eval(lock::script_kind::read_unlock, {"rw", channel, "{rw}:" + o + ":rwlock_timeout", "{rw}"}, {"0", o});
  };
  const auto write_acquire = eval(lock::script_kind::write_acquire, {"rw"}, {"30000", w});
  if (!mid_stream) {
    b.command(c1, race_t0 + 10 * ms, read_acquire(r1), std::string(resp_nil));
    b.command(c2, race_t0 + 20 * ms, read_acquire(r2), std::string(resp_nil));
  }
  b.command(cw, race_t0 + 100 * ms, write_acquire, resp_int(900));
  b.command(sw, race_t0 + 101 * ms, {"SUBSCRIBE", channel}, resp_array({"subscribe", channel}).replace(0, 2, "*3") + resp_int(1));
  b.command(cw, race_t0 + 102 * ms, write_acquire, resp_int(898));
  b.command(c1, race_t0 + 500 * ms, read_unlock(r1), resp_int(0));
  // The TTL it was given (0.9 s) ran out: W retries by its timer; the lock is still read.
  b.command(cw, race_t0 + 1002 * ms, write_acquire, resp_int(29000));
  b.command(c2, race_t0 + 1500 * ms, read_unlock(r2), resp_int(1));
  b.server_push(sw, race_t0 + 1500 * ms + 150, resp_array({"message", channel, "0"}));
  b.command(cw, race_t0 + 1500 * ms + 400, write_acquire, std::string(resp_nil));
  b.command(sw, race_t0 + 1500 * ms + 700, {"UNSUBSCRIBE", channel},
            resp_array({"unsubscribe", channel}).replace(0, 2, "*3") + resp_int(0));
  b.command(cw, race_t0 + 1800 * ms, eval(lock::script_kind::write_unlock, {"rw", channel}, {"0", "30000", w}), resp_int(1));
  b.close(c1, race_t0 + 2000 * ms);
  b.close(c2, race_t0 + 2000 * ms + 100);
  b.close(cw, race_t0 + 2000 * ms + 200);
  b.close(sw, race_t0 + 2000 * ms + 300);
  return b;
}

}  // namespace reply_order_test

TEST_CASE("read/write: one reader leaving while another reads does not free the lock", "[order][rwlock]") {
  for (const bool mid_stream : {false, true}) {
    INFO((mid_stream ? "readers acquired before the capture" : "readers acquired in the capture"));
    const temp_capture cap(readers_leave_one_by_one(mid_stream), mid_stream ? "rw-mid" : "rw");
    const auto rec = events_of(cap.path.string());
    std::string names;
    for (const auto& e : rec.events) names += e.event + " ";
    INFO(names);
    CHECK(rec.count("anomaly:woken_by_timeout") == 0);
    CHECK(rec.count("anomaly:idle_with_waiters") == 0);
    CHECK(rec.count("anomaly:subscription_lost") == 0);
    CHECK(rec.count("anomaly:overlapping_holders") == 0);
    // The writer's wait ends at its acquisition, after the last reader left.
    const recorded_event* last = nullptr;
    for (const auto& e : rec.events) {
      if (e.event == "acquired" && e.owner.find(":write") != std::string::npos) last = &e;
    }
    REQUIRE(last != nullptr);
    CHECK(last->ts_us >= race_t0 + 1500 * ms);
    CHECK(last->wait_us >= 1400 * ms);
  }
}
