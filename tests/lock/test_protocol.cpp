// The sans-I/O core, fed bytes by hand: no sockets, no server.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lockscope/lock/error.hpp"
#include "lockscope/lock/protocol.hpp"
#include "lockscope/lock/subscriptions.hpp"

using namespace std::chrono_literals;
using lockscope::lock::clock_type;
using lockscope::lock::errc;
using lockscope::lock::request_pipeline;
using lockscope::lock::subscription_registry;
using lockscope::resp::type;
using lockscope::resp::value;

namespace {

struct recorded {
  std::error_code ec;
  value reply;
};

// Queues a command whose completion appends to `into`.
void send(request_pipeline& p, std::vector<recorded>& into, std::string_view command,
          clock_type::time_point deadline = clock_type::now() + 10s) {
  p.send(deadline, [&into](std::error_code ec, value&& v) { into.push_back({ec, std::move(v)}); }, command);
}

// Feeds `bytes` one byte at a time: matching must not depend on how reads split.
std::error_code feed_bytewise(request_pipeline& p, std::string_view bytes) {
  for (char c : bytes) {
    if (auto ec = p.feed(std::string_view(&c, 1))) return ec;
  }
  return {};
}

}  // namespace

TEST_CASE("pipeline: many commands in flight, replies matched FIFO across any split", "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  send(p, done, "A");
  send(p, done, "B");
  send(p, done, "C");
  send(p, done, "D");
  CHECK(p.output() == "*1\r\n$1\r\nA\r\n*1\r\n$1\r\nB\r\n*1\r\n$1\r\nC\r\n*1\r\n$1\r\nD\r\n");
  CHECK(p.in_flight() == 4);

  REQUIRE_FALSE(feed_bytewise(p, "$-1\r\n:42\r\n+OK\r\n$5\r\nhel"));
  REQUIRE(done.size() == 3);
  CHECK(done[0].reply.is_null());
  CHECK(done[1].reply.type == type::integer);
  CHECK(done[1].reply.integer == 42);
  CHECK(done[2].reply.text == "OK");
  REQUIRE_FALSE(p.feed("lo\r\n"));
  REQUIRE(done.size() == 4);
  CHECK(done[3].reply.text == "hello");
  CHECK(p.in_flight() == 0);
  for (const auto& r : done) CHECK_FALSE(r.ec);
}

TEST_CASE("pipeline: an error reply carries Redis's own text", "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  send(p, done, "EVALSHA");
  send(p, done, "HGET");
  REQUIRE_FALSE(p.feed("-NOSCRIPT No matching script. Please use EVAL.\r\n"
                       "!65\r\nWRONGTYPE Operation against a key holding the wrong kind of value\r\n"));
  REQUIRE(done.size() == 2);
  CHECK(done[0].ec == errc::server_error);
  CHECK(done[0].reply.text == "NOSCRIPT No matching script. Please use EVAL.");
  CHECK(done[1].ec == errc::server_error);
  CHECK(done[1].reply.text == "WRONGTYPE Operation against a key holding the wrong kind of value");
}

TEST_CASE("pipeline: RESP3 pushes are routed apart from replies", "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  std::vector<value> pushes;
  p.set_push_handler([&](value&& v) { pushes.push_back(std::move(v)); });
  send(p, done, "GET");
  // A push arriving before the reply it interleaves with must not steal its slot.
  REQUIRE_FALSE(p.feed(">3\r\n$7\r\nmessage\r\n$31\r\nredisson_lock__channel:{myLock}\r\n$1\r\n0\r\n$3\r\nval\r\n"));
  REQUIRE(pushes.size() == 1);
  CHECK(pushes[0].elements.at(1).text == "redisson_lock__channel:{myLock}");
  REQUIRE(done.size() == 1);
  CHECK(done[0].reply.text == "val");
}

TEST_CASE("pipeline: RESP2 pub/sub arrays are pushes only on a subscriber connection", "[lock][protocol]") {
  const std::string message = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n";
  SECTION("subscriber") {
    request_pipeline p({.route_pubsub_arrays = true});
    std::vector<recorded> done;
    std::vector<value> pushes;
    p.set_push_handler([&](value&& v) { pushes.push_back(std::move(v)); });
    p.send_without_reply("*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n");
    send(p, done, "PING");
    REQUIRE_FALSE(p.feed("*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n" + message +
                         "*2\r\n$4\r\npong\r\n$0\r\n\r\n"));
    CHECK(pushes.size() == 2);
    REQUIRE(done.size() == 1);  // ["pong", ""] is PING's reply, not a push
    CHECK(done[0].reply.elements.at(0).text == "pong");
  }
  SECTION("command connection: an array is a reply") {
    request_pipeline p;
    std::vector<recorded> done;
    send(p, done, "LRANGE");
    REQUIRE_FALSE(p.feed(message));
    REQUIRE(done.size() == 1);
    CHECK(done[0].reply.elements.size() == 3);
  }
}

TEST_CASE("pipeline: commands are held until ready, then written in order", "[lock][protocol]") {
  request_pipeline p;
  p.set_ready(false);
  std::vector<recorded> done;
  send(p, done, "FIRST");
  CHECK(p.output().empty());
  CHECK(p.held() == 1);
  // The handshake goes first even though it was queued later.
  p.send_encoded_now("*1\r\n$4\r\nPING\r\n", clock_type::now() + 1s, [&](std::error_code ec, value&& v) {
    done.push_back({ec, std::move(v)});
  });
  CHECK(p.output() == "*1\r\n$4\r\nPING\r\n");
  p.set_ready(true);
  CHECK(p.output() == "*1\r\n$4\r\nPING\r\n*1\r\n$5\r\nFIRST\r\n");
  REQUIRE_FALSE(p.feed("+PONG\r\n+OK\r\n"));
  REQUIRE(done.size() == 2);
  CHECK(done[0].reply.text == "PONG");
  CHECK(done[1].reply.text == "OK");
}

TEST_CASE("pipeline: deadlines", "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  const auto now = clock_type::now();
  send(p, done, "SLOW", now + 1s);
  send(p, done, "FAST", now + 5s);
  CHECK(p.next_deadline() == now + 1s);
  CHECK(p.expire(now + 500ms) == 0);
  CHECK(p.expire(now + 1s) == 1);
  REQUIRE(done.size() == 1);
  CHECK(done[0].ec == errc::timeout);
  CHECK(p.next_deadline() == now + 5s);
  // The late reply of the expired command is swallowed; the next one gets its own.
  REQUIRE_FALSE(p.feed(":1\r\n:2\r\n"));
  REQUIRE(done.size() == 2);
  CHECK(done[1].reply.integer == 2);

  SECTION("held commands expire with the given error and text") {
    p.set_ready(false);
    send(p, done, "HELD", now + 1s);
    p.expire(now + 2s, errc::not_connected, "connect to 127.0.0.1:1: Connection refused");
    REQUIRE(done.size() == 3);
    CHECK(done[2].ec == errc::not_connected);
    CHECK(done[2].reply.text == "connect to 127.0.0.1:1: Connection refused");
    CHECK(p.held() == 0);
  }
}

TEST_CASE("pipeline: a lost connection fails what is in flight and keeps what is held", "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  send(p, done, "A");
  REQUIRE_FALSE(p.feed("$10\r\npart"));  // a reply cut in the middle
  p.set_ready(false);
  send(p, done, "B");
  p.fail_in_flight(errc::connection_lost);
  REQUIRE(done.size() == 1);
  CHECK(done[0].ec == errc::connection_lost);
  CHECK(p.output().empty());
  CHECK(p.held() == 1);
  // The new stream starts clean: the half reply is forgotten.
  p.set_ready(true);
  REQUIRE_FALSE(p.feed("+OK\r\n"));
  REQUIRE(done.size() == 2);
  CHECK(done[1].reply.text == "OK");
}

TEST_CASE("pipeline: held commands can be taken back at once, in order, in-flight ones untouched",
          "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  send(p, done, "A");  // written: in flight
  p.set_ready(false);
  send(p, done, "B");
  send(p, done, "C");
  REQUIRE(p.held() == 2);
  // A completion that queues again (the cluster router re-routing to the same node):
  // held anew, not lost and not failed in the same call.
  p.send(clock_type::now() + 10s,
         [&](std::error_code ec, value&& v) {
           done.push_back({ec, std::move(v)});
           send(p, done, "E");
         },
         "D");
  p.fail_held(errc::not_connected, "connect to 127.0.0.1:7002: Connection refused");
  REQUIRE(done.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(done[i].ec == errc::not_connected);
    CHECK(done[i].reply.text == "connect to 127.0.0.1:7002: Connection refused");
  }
  CHECK(p.held() == 1);
  CHECK(p.in_flight() == 1);
  REQUIRE_FALSE(p.feed("+A\r\n"));
  REQUIRE(done.size() == 4);
  CHECK(done[3].reply.text == "A");
  p.set_ready(true);
  CHECK(p.output().ends_with("*1\r\n$1\r\nE\r\n"));
}

TEST_CASE("pipeline: bytes out of step are a protocol error", "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  SECTION("a reply nobody asked for") { CHECK(p.feed("+OK\r\n") == errc::protocol_error); }
  SECTION("not RESP") {
    send(p, done, "A");
    CHECK(p.feed("HTTP/1.1 400 Bad Request\r\n") == errc::protocol_error);
  }
}

TEST_CASE("pipeline: a completion may queue more commands or drop the stream", "[lock][protocol]") {
  request_pipeline p;
  std::vector<recorded> done;
  int second = 0;
  p.send(clock_type::now() + 1s,
         [&](std::error_code, value&&) {
           p.send(clock_type::now() + 1s, [&](std::error_code, value&& v) { second = static_cast<int>(v.integer); }, "NEXT");
         },
         "FIRST");
  std::string written;
  p.swap_output(written);
  REQUIRE_FALSE(p.feed("+OK\r\n"));
  CHECK(p.output() == "*1\r\n$4\r\nNEXT\r\n");
  REQUIRE_FALSE(p.feed(":7\r\n"));
  CHECK(second == 7);

}

TEST_CASE("pipeline: dropping the stream inside a completion stops the walk", "[lock][protocol]") {
  request_pipeline q;
  std::vector<recorded> after;
  q.send(clock_type::now() + 1s, [&](std::error_code, value&&) { q.fail_in_flight(errc::connection_lost); }, "Z");
  send(q, after, "W");
  REQUIRE_FALSE(q.feed("+first\r\n+second\r\n"));
  REQUIRE(after.size() == 1);
  CHECK(after[0].ec == errc::connection_lost);  // failed, not given "+second"
}

TEST_CASE("handshake plan follows the config", "[lock][protocol]") {
  using lockscope::lock::client_config;
  using lockscope::lock::handshake_plan;
  auto names = [](const client_config& c, std::string_view client_name) {
    std::vector<std::string> out;
    for (const auto& s : handshake_plan(c, client_name)) out.push_back(s.name + " " + s.command);
    return out;
  };
  client_config c;
  CHECK(names(c, "").empty());
  c.password = "Root@123";
  // Seed §4.2: *2 $4 AUTH $8 Root@123
  CHECK(names(c, "") == std::vector<std::string>{"AUTH *2\r\n$4\r\nAUTH\r\n$8\r\nRoot@123\r\n"});
  c.username = "app";
  c.database = 3;
  CHECK(names(c, "me") ==
        std::vector<std::string>{"HELLO *5\r\n$5\r\nHELLO\r\n$1\r\n2\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$8\r\nRoot@123\r\n",
                                 "SELECT *2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n",
                                 "CLIENT SETNAME *3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$2\r\nme\r\n"});
  client_config resp3;
  resp3.protocol = 3;
  CHECK(names(resp3, "") == std::vector<std::string>{"HELLO *2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"});
  CHECK(handshake_plan(c, "")[0].error_code == errc::auth_failed);
}

// --- subscription registry --------------------------------------------------------

namespace {

struct fake_waiter : lockscope::lock::subscription_listener {
  int subscribed = 0;
  std::vector<std::string> messages;
  void on_subscribed() override { ++subscribed; }
  void on_message(std::string_view payload) override { messages.emplace_back(payload); }
};

value confirmation(std::string_view kind, std::string_view channel, std::int64_t count) {
  return value::aggregate(type::push, {value::bulk(kind), value::bulk(channel), value::number(count)});
}
value message(std::string_view channel, std::string_view payload) {
  return value::aggregate(type::push, {value::bulk("message"), value::bulk(channel), value::bulk(payload)});
}

const std::string ch = "redisson_lock__channel:{myLock}";
const std::string subscribe_ch = "*2\r\n$9\r\nSUBSCRIBE\r\n$31\r\nredisson_lock__channel:{myLock}\r\n";
const std::string unsubscribe_ch = "*2\r\n$11\r\nUNSUBSCRIBE\r\n$31\r\nredisson_lock__channel:{myLock}\r\n";

}  // namespace

TEST_CASE("registry: SUBSCRIBE on the first waiter, UNSUBSCRIBE when the last leaves", "[lock][subscriptions]") {
  subscription_registry r;
  std::string out;
  r.on_connected(out);
  CHECK(out.empty());
  fake_waiter a, b;
  auto ida = r.add(ch, a, out);
  CHECK(out == subscribe_ch);  // byte-identical to seed §4.2.4
  CHECK_FALSE(ida.subscribed);
  out.clear();
  auto idb = r.add(ch, b, out);
  CHECK(out.empty());  // one SUBSCRIBE for both
  r.on_push(confirmation("subscribe", ch, 1));
  CHECK(a.subscribed == 1);
  CHECK(b.subscribed == 1);
  CHECK(r.subscribed(ch));

  r.on_push(message(ch, "0"));
  CHECK(a.messages == std::vector<std::string>{"0"});
  CHECK(b.messages == std::vector<std::string>{"0"});

  r.remove(ch, ida.id, out);
  CHECK(out.empty());  // b still waits: the channel stays subscribed
  CHECK(r.subscribed(ch));
  r.remove(ch, idb.id, out);
  CHECK(out == unsubscribe_ch);  // seed §4.2.6
  r.on_push(confirmation("unsubscribe", ch, 0));
  CHECK(r.channels() == 0);
}

TEST_CASE("registry: a waiter joining a subscribed channel is ready at once", "[lock][subscriptions]") {
  subscription_registry r;
  std::string out;
  r.on_connected(out);
  fake_waiter a, b;
  r.add(ch, a, out);
  r.on_push(confirmation("subscribe", ch, 1));
  out.clear();
  auto added = r.add(ch, b, out);
  CHECK(added.subscribed);
  CHECK(out.empty());
  CHECK(b.subscribed == 0);  // told by the return value, not called back
}

TEST_CASE("registry: a stale confirmation from an older cycle is not taken for the current one",
          "[lock][subscriptions]") {
  subscription_registry r;
  std::string out;
  r.on_connected(out);
  fake_waiter a, b;
  auto ida = r.add(ch, a, out);  // SUBSCRIBE #1
  r.remove(ch, ida.id, out);     // UNSUBSCRIBE before #1 was even confirmed
  r.add(ch, b, out);             // SUBSCRIBE #2
  CHECK(out == subscribe_ch + unsubscribe_ch + subscribe_ch);
  r.on_push(confirmation("subscribe", ch, 1));  // for #1
  CHECK(b.subscribed == 0);
  CHECK_FALSE(r.subscribed(ch));
  r.on_push(confirmation("unsubscribe", ch, 0));
  CHECK(b.subscribed == 0);
  r.on_push(confirmation("subscribe", ch, 1));  // for #2: now it really is subscribed
  CHECK(b.subscribed == 1);
  CHECK(r.subscribed(ch));
  CHECK(a.subscribed == 0);  // a left: never called
}

TEST_CASE("registry: resubscribe after a reconnect and wake the waiters", "[lock][subscriptions]") {
  subscription_registry r;
  std::string out;
  fake_waiter a;
  // Added while disconnected: nothing is sent yet.
  r.add(ch, a, out);
  CHECK(out.empty());
  r.on_connected(out);
  CHECK(out == subscribe_ch);
  r.on_push(confirmation("subscribe", ch, 1));
  CHECK(a.subscribed == 1);

  r.on_disconnected();
  CHECK_FALSE(r.subscribed(ch));
  out.clear();
  r.on_connected(out);
  CHECK(out == subscribe_ch);
  r.on_push(confirmation("subscribe", ch, 1));
  CHECK(a.subscribed == 2);  // told again: it must retry, a message may have been lost
}

TEST_CASE("registry: channels are independent, other messages are ignored", "[lock][subscriptions]") {
  subscription_registry r;
  std::string out;
  r.on_connected(out);
  fake_waiter a, b;
  r.add("redisson_lock__channel:{x}", a, out);
  r.add("redisson_lock__channel:{y}", b, out);
  r.on_push(message("redisson_lock__channel:{x}", "0"));
  r.on_push(message("elsewhere", "0"));
  r.on_push(value::aggregate(type::push, {value::bulk("invalidate"), value::aggregate(type::array, {})}));
  CHECK(a.messages.size() == 1);
  CHECK(b.messages.empty());
}

TEST_CASE("registry: a listener may leave while being notified", "[lock][subscriptions]") {
  subscription_registry r;
  std::string out;
  r.on_connected(out);
  struct leaving : fake_waiter {
    subscription_registry* registry = nullptr;
    subscription_registry::waiter_id other = 0;
    void on_message(std::string_view p) override {
      fake_waiter::on_message(p);
      std::string o;
      registry->remove(ch, other, o);  // removes the next waiter mid-notification
    }
  } first;
  fake_waiter second;
  first.registry = &r;
  r.add(ch, first, out);
  first.other = r.add(ch, second, out).id;
  r.on_push(message(ch, "0"));
  CHECK(first.messages.size() == 1);
  CHECK(second.messages.empty());  // it had left: not called
}
