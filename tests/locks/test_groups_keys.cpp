// Lock groups (lock_groups.cpp): what a MultiLock set is keyed by. A set is one owner on
// one connection (lock_groups.hpp); its owner and connection are compared as two texts,
// so two pairs whose texts would read the same once joined stay two sets, and an owner
// whose stream of locks overflowed marks only its own next set.
#include <string>
#include <string_view>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "lockscope/locks/lock_groups.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using namespace std::string_view_literals;
using locks::lock_event_kind;

namespace {

// Owner "R1\0x" on "10.0.0.1:50000" and owner "R1" on "x\0" "10.0.0.1:50000": joined
// with a NUL between them, both read "R1\0x\010.0.0.1:50000".
constexpr std::string_view nul_owner_a = "R1\0x"sv;
constexpr std::string_view nul_client_a = "10.0.0.1:50000"sv;
constexpr std::string_view nul_owner_b = "R1"sv;
constexpr std::string_view nul_client_b = "x\0" "10.0.0.1:50000"sv;

struct keyed_set_fixture {
  explicit keyed_set_fixture(locks::group_options o = {}) : groups(o, events) {}
  void acquire(std::string_view lock, std::string_view owner, std::string_view client, double at_ms) {
    groups.on_event(lock_event_of(lock_event_kind::acquired, 1'000'000 + static_cast<std::int64_t>(at_ms * 1000), lock,
                                  owner, client, s1));
  }
  std::vector<const recorded_event*> multilocks() const {
    std::vector<const recorded_event*> out;
    for (const auto& e : events.events) {
      if (e.event == "multilock") out.push_back(&e);
    }
    return out;
  }
  event_recorder events;
  locks::lock_groups groups;
};

}  // namespace

TEST_CASE("lock_groups: two owners whose texts would join into one are two sets, not one MultiLock",
          "[groups][sets]") {
  for (const bool shortcuts : {true, false}) {
    INFO("lookup shortcuts " << shortcuts);
    locks::group_options o;
    o.lookup_shortcuts = shortcuts;
    keyed_set_fixture f(o);
    f.acquire("k1", nul_owner_a, nul_client_a, 1);
    f.acquire("k2", nul_owner_b, nul_client_b, 2);
    f.groups.finish(10'000'000);
    CHECK(f.multilocks().empty());  // each took one key

    // The same owner on the same connection taking both is one (the check can fail).
    keyed_set_fixture g(o);
    g.acquire("k1", nul_owner_a, nul_client_a, 1);
    g.acquire("k2", nul_owner_a, nul_client_a, 2);
    g.groups.finish(10'000'000);
    REQUIRE(g.multilocks().size() == 1);
    CHECK(g.multilocks()[0]->owner == nul_owner_a);
    CHECK(g.multilocks()[0]->client == nul_client_a);
    CHECK(g.multilocks()[0]->tried == std::vector<std::string>{"k1", "k2"});
  }
}

TEST_CASE("lock_groups: a stream of locks marks its own owner's next set only", "[groups][sets]") {
  locks::group_options o;
  o.max_set_keys = 2;
  o.max_open = 1;  // each new set ends the one before: A's stream is noted when C's opens
  o.window_us = 100'000;
  keyed_set_fixture f(o);
  // Owner A takes three locks in a row: a stream, not a MultiLock.
  f.acquire("s1", nul_owner_a, nul_client_a, 0);
  f.acquire("s2", nul_owner_a, nul_client_a, 1);
  f.acquire("s3", nul_owner_a, nul_client_a, 2);
  f.acquire("c1", "C", "10.0.0.3:50000", 3);
  // Within a window of A's last lock: B's two locks are a MultiLock (reported when A's
  // next set ends B's), and A's next two are more of its stream.
  f.acquire("k1", nul_owner_b, nul_client_b, 4);
  f.acquire("k2", nul_owner_b, nul_client_b, 5);
  f.acquire("a1", nul_owner_a, nul_client_a, 6);
  f.acquire("a2", nul_owner_a, nul_client_a, 7);
  f.groups.finish(10'000'000);
  const auto sets = f.multilocks();
  REQUIRE(sets.size() == 1);
  CHECK(sets[0]->owner == nul_owner_b);
  CHECK(sets[0]->client == nul_client_b);
  CHECK(sets[0]->tried == std::vector<std::string>{"k1", "k2"});
}

TEST_CASE("lock_groups: keys taken one after another under a value several clients send are no MultiLock",
          "[groups][sets][shared_value]") {
  // One worker takes each queue's cleaning lock in turn with the value `1`; another
  // worker's try with `1` is refused while the first holds (the timeline marks it shared).
  for (const bool shared : {true, false}) {
    INFO("another client refused with the value: " << shared);
    keyed_set_fixture f;
    f.acquire("clean:orders", "1", "10.0.0.13:51417", 1);
    f.acquire("clean:stock", "1", "10.0.0.13:51417", 1.5);
    locks::lock_event refused =
        lock_event_of(lock_event_kind::contended, 1'000'000 + 150'000, "clean:orders", "1", "10.0.0.12:34997", s1);
    refused.owner_shared = shared;
    f.groups.on_event(refused);
    f.groups.finish(10'000'000);
    CHECK(f.multilocks().size() == (shared ? 0u : 1u));
  }
}
