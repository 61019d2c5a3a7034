// Replies written in another order than the server ran the commands: Redis writes the
// replies of one event-loop pass to the clients' sockets last-served first, so a SET NX
// that ran just after another connection's DEL of the key can have its +OK captured
// before the DEL's :1. A key-creating acquire cannot succeed while the key exists: a
// holder acquired, over another connection, after the DEL was sent, while an older hold
// was still live, took the key after the DEL ran. The DEL ends the older hold only.
// (Seen on redis-mutex and ioredis-mutex, whose processes share one value; see
// docs/reference/clients.md, "Held out, fifth set".)
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

// A plain `DEL A` over `connection`, sent at request_ms and answered 1 at reply_ms.
void plain_del(fixture& f, double request_ms, double reply_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::del, op_outcome::ok, "", request_ms, connection);
  o.family = lock_family::unknown;
  o.lock = "A";
  o.reply_us = at(reply_ms);
  f.timeline.on_operation(o);
}

// `SET A value NX PX lease` answered OK, sent at request_ms and answered at reply_ms.
void set_nx_ok(fixture& f, std::string_view value, double request_ms, double reply_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::acquire, op_outcome::ok, value, request_ms, connection);
  o.family = lock_family::set_based;
  o.lock = "A";
  o.lease_ms = 500;
  o.reply_us = at(reply_ms);
  f.timeline.on_operation(o);
}

}  // namespace

TEST_CASE("del ran first: an acquire answered between another connection's DEL and its reply keeps the lock",
          "[timeline][reply-order]") {
  for (const std::string_view second : {std::string_view("mutex"), std::string_view("other")}) {
    INFO("the second holder's value: " << second);
    fixture f;
    set_nx_ok(f, "mutex", 0, 0.1, 1);
    // The DEL reaches the server first; the SET NX's +OK is captured 20 µs before its :1.
    set_nx_ok(f, second, 100.1, 100.23, 2);
    plain_del(f, 100.0, 100.25, 1);
    plain_del(f, 150.0, 150.1, 2);  // the second holder's own release
    f.timeline.finish(at(300));
    CHECK(f.events.count("acquired") == 2);
    CHECK(f.events.count("released") == 2);
    CHECK(f.events.count("expired") == 0);
    CHECK(f.events.count("anomaly:overlapping_holders") == 0);
    CHECK(f.events.count("anomaly:released_other_owner") == 0);
  }
}

TEST_CASE("del ran first: a DEL whose reply came before the next acquire's still ends every hold",
          "[timeline][reply-order]") {
  fixture f;
  set_nx_ok(f, "mutex", 0, 0.1, 1);
  plain_del(f, 100.0, 100.1, 1);
  set_nx_ok(f, "mutex", 100.2, 100.3, 2);
  // A DEL over connection 1 sent after connection 2's acquisition was answered: it
  // removes connection 2's key (whoever's it was).
  plain_del(f, 120.0, 120.1, 1);
  plain_del(f, 150.0, 150.1, 2);  // finds nothing held
  f.timeline.finish(at(300));
  CHECK(f.events.count("released") == 2);
}
