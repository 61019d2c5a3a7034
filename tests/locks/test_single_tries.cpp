// A single try given up, its client on to another lock (the symfony/lock recording:
// `acquire(false)` once on orders, then once on stock, then orders again with the next
// Lock's token, 63 ms after the first try): the next value on the first lock begins a
// new wait rather than continuing the single try's as a fresh value would
// (waiter_of_fresh_value, timeline/waiters.hpp).
#include "helpers.hpp"
#include "timeline_fixture.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

void try_lock(fixture& f, std::string_view lock, std::string_view value, double at_ms, op_outcome outcome,
              std::uint64_t connection) {
  auto o = f.op(lock_op_kind::acquire, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = lock;
  o.lease_ms = 1000;
  f.timeline.on_operation(o);
}

void release_lock(fixture& f, std::string_view lock, std::string_view value, double at_ms, std::uint64_t connection) {
  auto o = f.op(lock_op_kind::unlock, op_outcome::ok, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = lock;
  f.timeline.on_operation(o);
}

// orders and stock held over connection 1; connection 2's client keeps one value for a
// wait's retries (an earlier wait of it, over, on another lock).
void orders_and_stock_held_values_kept(fixture& f) {
  try_lock(f, "orders", "holder-o", 0, op_outcome::ok, 1);
  try_lock(f, "stock", "holder-s", 1, op_outcome::ok, 1);
  try_lock(f, "other", "holder-x", 2, op_outcome::ok, 1);
  try_lock(f, "other", "k1", 3, op_outcome::contended, 2);
  try_lock(f, "other", "k1", 5, op_outcome::contended, 2);
  release_lock(f, "other", "holder-x", 6, 1);
  try_lock(f, "other", "k1", 7, op_outcome::ok, 2);
  release_lock(f, "other", "k1", 8, 2);
}

// Three calls side by side over connection 2, every 100 ms from `from_ms` to `to_ms`: a
// and b poll stock, x polls orders between them.
void three_calls_in_turn(fixture& f, int from_ms, int to_ms, int x_after_ms, int b_after_ms) {
  for (int t = from_ms; t <= to_ms; t += 100) {
    try_lock(f, "stock", "a", t, op_outcome::contended, 2);
    try_lock(f, "orders", "x", t + x_after_ms, op_outcome::contended, 2);
    try_lock(f, "stock", "b", t + b_after_ms, op_outcome::contended, 2);
  }
}

// stock's holder over connection 1 lets it go, `winner` takes it; the capture ends.
void stock_passes_to(fixture& f, std::string_view winner, double released_ms, double taken_ms) {
  release_lock(f, "stock", "holder-s", released_ms, 1);
  try_lock(f, "stock", winner, taken_ms, op_outcome::ok, 2);
  f.timeline.finish(at(5000));
}

const recorded_event* event_of(const event_recorder& rec, std::string_view name, std::string_view lock,
                               std::string_view owner) {
  for (const recorded_event& e : rec.events) {
    if (e.event == name && e.lock == lock && e.owner == owner) return &e;
  }
  return nullptr;
}

// `owner`'s give-up on `lock`, said at `said_us` as its one try's: it ended at that try's reply.
void gave_up_at_its_try(const fixture& f, std::string_view lock, std::string_view owner, std::int64_t said_us) {
  const recorded_event* e = event_of(f.events, "gave_up", lock, owner);
  REQUIRE(e != nullptr);
  CHECK(e->ended == locks::wait_end::new_wait);
  CHECK(e->wait_us == 100);
  CHECK(e->wait_at_most_us < 0);
  CHECK(e->ts_us == said_us);
}

// `winner` took stock at `taken_ms` after one wait from its first try at `first_ms`,
// never given up.
void one_wait_on_stock(const fixture& f, std::string_view winner, double first_ms, double taken_ms) {
  CHECK(event_of(f.events, "gave_up", "stock", winner) == nullptr);
  const recorded_event* won = event_of(f.events, "acquired", "stock", winner);
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(taken_ms) + 100 - at(first_ms));
}

}  // namespace

TEST_CASE("single tries: a refused try, then a refusal on another lock, then a new value: a give-up and a new wait",
          "[timeline][waiter][fresh]") {
  fixture f;
  orders_and_stock_held_values_kept(f);
  try_lock(f, "orders", "t1", 10, op_outcome::contended, 2);  // one try, given up
  try_lock(f, "stock", "s1", 20, op_outcome::contended, 2);   // one try, given up
  try_lock(f, "orders", "t2", 80, op_outcome::contended, 2);  // the next task's wait
  try_lock(f, "orders", "t2", 180, op_outcome::contended, 2);
  release_lock(f, "orders", "holder-o", 200, 1);
  try_lock(f, "orders", "t2", 280, op_outcome::ok, 2);
  f.timeline.finish(at(5000));
  // Said once t2, begun after it, tried again first (not at t2's first try: a wait beside
  // t1's could have begun there).
  gave_up_at_its_try(f, "orders", "t1", at(180) + 100);
  const recorded_event* won = event_of(f.events, "acquired", "orders", "t2");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(280) + 100 - at(80));
}

TEST_CASE("single tries: a fresh-value poller's next value, nothing between, still continues its wait",
          "[timeline][waiter][fresh]") {
  fixture f;
  try_lock(f, "orders", "holder-o", 0, op_outcome::ok, 1);
  try_lock(f, "orders", "v1", 10, op_outcome::contended, 2);
  try_lock(f, "orders", "v2", 80, op_outcome::contended, 2);
  release_lock(f, "orders", "holder-o", 100, 1);
  try_lock(f, "orders", "v3", 150, op_outcome::ok, 2);
  f.timeline.finish(at(5000));
  CHECK(f.events.count("gave_up") == 0);
  const recorded_event* won = event_of(f.events, "acquired", "orders", "v3");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(150) + 100 - at(10));
}

TEST_CASE("single tries: on a connection carrying tasks side by side, a new value after a single try is a wait of its own",
          "[timeline][waiter][fresh]") {
  // Calls side by side over one connection (a Nest service's requests sharing its client),
  // each with a value of its own: a polls stock while b polls orders (the connection
  // multiplexes); then s, one call's single try, is refused report once, and t, the next
  // call, takes report at its first attempt.
  fixture f;
  try_lock(f, "orders", "holder-o", 0, op_outcome::ok, 1);
  try_lock(f, "stock", "holder-s", 1, op_outcome::ok, 1);
  try_lock(f, "report", "holder-r", 2, op_outcome::ok, 1);
  for (int t = 10; t <= 160; t += 50) {
    try_lock(f, "stock", "a", t, op_outcome::contended, 2);
    try_lock(f, "orders", "b", t + 10, op_outcome::contended, 2);
  }
  try_lock(f, "report", "s", 200, op_outcome::contended, 2);
  release_lock(f, "report", "holder-r", 220, 1);
  try_lock(f, "report", "t", 230, op_outcome::ok, 2);
  f.timeline.finish(at(5000));
  const recorded_event* won = event_of(f.events, "acquired", "report", "t");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us < 0);  // no wait: its first attempt
  const recorded_event* gave_up = event_of(f.events, "gave_up", "report", "s");
  REQUIRE(gave_up != nullptr);
  CHECK(gave_up->wait_us <= 1000);
}

TEST_CASE("single tries: a value refused again after another value's try on its lock over its connection keeps its own wait",
          "[timeline][waiter][fresh]") {
  // Three calls at once over one connection (@meta-1/nest-common's WithLock in a Nest
  // service), each polling with a uuid of its own: a and b poll stock, x polls orders
  // between them. b's first try after a's, with x's refusal between, reads as a's single
  // try given up and the next call's wait; a's value refused again 100 ms on says both
  // still wait side by side: from then on neither one's try ends the other's wait. a's
  // single try's give-up is not said at b's try, so a's one wait runs from its first try.
  fixture f;
  orders_and_stock_held_values_kept(f);
  three_calls_in_turn(f, 10, 410, 5, 8);
  stock_passes_to(f, "b", 460, 468);
  one_wait_on_stock(f, "b", 18, 468);
  REQUIRE(f.events.count("gave_up") == 2);  // a's and x's, at the capture's end
  const recorded_event* a_stopped = event_of(f.events, "gave_up", "stock", "a");
  REQUIRE(a_stopped != nullptr);
  CHECK(a_stopped->ended != locks::wait_end::new_wait);
  CHECK(a_stopped->wait_us == at(410) + 100 - at(10));
}

namespace {

// a tries stock once over connection 2, x is refused orders there, then b tries stock:
// a's single try reads as given up at b's (a client on to its next task), not said yet.
void single_try_then_another_value(fixture& f) {
  orders_and_stock_held_values_kept(f);
  try_lock(f, "stock", "a", 10, op_outcome::contended, 2);
  try_lock(f, "orders", "x", 15, op_outcome::contended, 2);
  try_lock(f, "stock", "b", 18, op_outcome::contended, 2);
}

}  // namespace

TEST_CASE("single tries: a single try read as given up at another value's try is said at its connection's close",
          "[timeline][waiter][fresh]") {
  fixture f;
  single_try_then_another_value(f);
  f.timeline.on_connection_end(2, at(60));
  gave_up_at_its_try(f, "stock", "a", at(60));
  const recorded_event* b = event_of(f.events, "gave_up", "stock", "b");
  REQUIRE(b != nullptr);
  CHECK(b->ended == locks::wait_end::connection_closed);
}

TEST_CASE("single tries: a single try read as given up at another value's try is said at its deadline",
          "[timeline][waiter][fresh]") {
  fixture f;
  single_try_then_another_value(f);
  f.timeline.advance_to(at(60'000));
  const recorded_event* b = event_of(f.events, "gave_up", "stock", "b");
  REQUIRE(b != nullptr);
  CHECK(b->ended == locks::wait_end::last_attempt);
  gave_up_at_its_try(f, "stock", "a", b->ts_us);  // both found due in one pass
}

TEST_CASE("single tries: a single try read as given up at another value's try is said at the capture's end",
          "[timeline][waiter][fresh]") {
  fixture f;
  single_try_then_another_value(f);
  f.timeline.finish(at(300));
  gave_up_at_its_try(f, "stock", "a", at(300));
}

TEST_CASE("single tries: a try refused by a hold over its own connection marks the connection as carrying waits side by side",
          "[timeline][waiter][fresh]") {
  // Calls side by side over one connection (@meta-1/nest-common's WithLock): h holds
  // orders while x, another call over the same connection, is refused there; a is
  // refused stock once, then x again, then b tries stock. One task at a time does not
  // wait for a lock it holds itself, so a's one try is no single try given up at b's:
  // a's value keeps its wait from its first try.
  fixture f;
  try_lock(f, "stock", "holder-s", 0, op_outcome::ok, 1);
  try_lock(f, "orders", "h", 2, op_outcome::ok, 2);
  three_calls_in_turn(f, 8, 308, 4, 12);
  stock_passes_to(f, "a", 330, 335);
  one_wait_on_stock(f, "a", 8, 335);
}

TEST_CASE("single tries: while a single try on another lock is held as cut, a new value after a single try is a wait of its own",
          "[timeline][waiter][fresh]") {
  // A new connection's first burst (@meta-1/nest-common's WithLock, three calls queued
  // while it connected): a tries stock, y orders, b stock at once (a's single try held as
  // cut at b's). 25 ms on, w, the next call, tries orders: y's single try is held too, not
  // joined with w as a fresh value's retry. w's retry first says y had stopped, at its try;
  // a's value back says a still waits beside b.
  fixture f;
  try_lock(f, "orders", "holder-o", 0, op_outcome::ok, 1);
  try_lock(f, "stock", "holder-s", 1, op_outcome::ok, 1);
  try_lock(f, "stock", "a", 10, op_outcome::contended, 3);
  try_lock(f, "orders", "y", 10.2, op_outcome::contended, 3);
  try_lock(f, "stock", "b", 10.4, op_outcome::contended, 3);
  try_lock(f, "orders", "w", 35, op_outcome::contended, 3);
  try_lock(f, "orders", "w", 85, op_outcome::contended, 3);
  try_lock(f, "stock", "a", 110, op_outcome::contended, 3);
  release_lock(f, "orders", "holder-o", 120, 1);
  try_lock(f, "orders", "w", 135, op_outcome::ok, 3);
  f.timeline.finish(at(5000));
  gave_up_at_its_try(f, "orders", "y", at(85) + 100);
  const recorded_event* won = event_of(f.events, "acquired", "orders", "w");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(135) + 100 - at(35));
  const recorded_event* a = event_of(f.events, "gave_up", "stock", "a");  // one wait, stopped by the end
  REQUIRE(a != nullptr);
  CHECK(a->wait_us == at(110) + 100 - at(10));
}

namespace {

// A try as the connection's `sequence`-th exchange (its other exchanges between are not
// lock operations: a cache's GETs and DELs).
void try_lock_as_exchange(fixture& f, std::string_view lock, std::string_view value, double at_ms, op_outcome outcome,
                          std::uint64_t connection, std::uint32_t sequence) {
  auto o = f.op(lock_op_kind::acquire, outcome, value, at_ms, connection);
  o.family = lock_family::set_based;
  o.lock = lock;
  o.lease_ms = 1000;
  o.connection_sequence = sequence;
  f.timeline.on_operation(o);
}

}  // namespace

TEST_CASE("single tries: a refused try, the client's other work, then a new value: a give-up and a new wait",
          "[timeline][waiter][fresh]") {
  // dogpile.cache over redis-py's Lock: a stale value's non-blocking try refused, the value
  // served, the next round's GET, DEL and GET, then a blocking acquire with a new token.
  fixture f;
  orders_and_stock_held_values_kept(f);
  try_lock_as_exchange(f, "orders", "t1", 10, op_outcome::contended, 2, 10);  // one try, given up
  try_lock_as_exchange(f, "orders", "t2", 160, op_outcome::contended, 2, 14);  // 3 other exchanges between
  try_lock_as_exchange(f, "orders", "t2", 260, op_outcome::contended, 2, 15);
  release_lock(f, "orders", "holder-o", 300, 1);
  try_lock_as_exchange(f, "orders", "t2", 360, op_outcome::ok, 2, 16);
  f.timeline.finish(at(5000));
  gave_up_at_its_try(f, "orders", "t1", at(260) + 100);
  const recorded_event* won = event_of(f.events, "acquired", "orders", "t2");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(360) + 100 - at(160));
}

TEST_CASE("single tries: a new value with nothing between its try and the one before continues the wait",
          "[timeline][waiter][fresh]") {
  // The same client, its next try the connection's very next exchange: a value redrawn, not
  // a new call after other work.
  fixture f;
  orders_and_stock_held_values_kept(f);
  try_lock_as_exchange(f, "orders", "t1", 10, op_outcome::contended, 2, 10);
  try_lock_as_exchange(f, "orders", "t2", 110, op_outcome::contended, 2, 11);
  release_lock(f, "orders", "holder-o", 150, 1);
  try_lock_as_exchange(f, "orders", "t2", 210, op_outcome::ok, 2, 12);
  f.timeline.finish(at(5000));
  CHECK(event_of(f.events, "gave_up", "orders", "t1") == nullptr);
  const recorded_event* won = event_of(f.events, "acquired", "orders", "t2");
  REQUIRE(won != nullptr);
  CHECK(won->wait_us == at(210) + 100 - at(10));
}
