// A lock's waiters found by key (waiter_keys: by subscriber connection and client) and
// their earliest deadline kept, for a lock with more waiters than a scan is used for:
// each message must name the waiter a scan of them all would (its subscriber's client's
// earliest still waiting), through waiters leaving and a client moving its subscription
// to a new connection; the earliest deadline must follow a waiter moving its own later;
// a connection's end must give up the waiters a scan of them all would (those whose latest
// attempt came over it, in their order), and a SUBSCRIBE on a waiter's own connection name
// the first of them, through waiters retrying over other connections of a pool; a
// subscriber's end must give up the waiters a scan would; the latest attempts kept must
// answer a SUBSCRIBE's episode check as a look at every waiter does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "timeline_fixture.hpp"
#include "timeline/waiter_keys.hpp"

namespace lockscope::timeline_test {
namespace {

constexpr int clients = 3, threads = 15;  // 45 waiters: more than scanned_waiters (32)

std::string uuid_of(int c) { return "0000000" + std::to_string(c) + "-1111-2222-3333-444444444444"; }
std::string owner_of(int c, int k) { return uuid_of(c) + ":" + std::to_string(k + 1); }
std::string ip_of(int c) { return "10.0.1." + std::to_string(c + 1); }
std::uint64_t command_of(int c) { return 10 + static_cast<std::uint64_t>(c); }

}  // namespace

TEST_CASE("waiter keys: a herd's messages name each subscriber's earliest waiter, through leaves and a new subscriber",
          "[timeline][waiters]") {
  fixture f;
  std::map<int, std::uint64_t> subscriber;  // client -> its subscriber connection
  for (int c = 0; c < clients; ++c) {
    subscriber[c] = 20 + static_cast<std::uint64_t>(c);
    f.opened[command_of(c)] = t0 - 1000;
    f.opened[subscriber[c]] = t0 - 1000;
  }
  f.acquire("h:1", 0, 30'000);
  double t = 1;
  // The clients' threads fail in turn: their waits interleave, and each client's come in
  // thread order (its earliest first).
  for (int k = 0; k < threads; ++k) {
    for (int c = 0; c < clients; ++c, t += 0.01) {
      f.acquire(owner_of(c, k), t, 30'000, op_outcome::contended, command_of(c), ip_of(c), 29'000);
    }
  }
  for (int c = 0; c < clients; ++c, t += 0.5) {
    f.acquire(owner_of(c, 0), t, 30'000, op_outcome::contended, command_of(c), ip_of(c), 29'000);
    f.pubsub(lock_op_kind::subscribe, t + 0.1, subscriber[c], ip_of(c));
  }
  std::vector<int> next(clients, 0);  // each client's earliest thread still waiting
  std::string holder = "h:1";
  std::uint64_t holder_conn = 1;
  int checked = 0;
  for (int round = 0; round < 2 * clients * 3; ++round) {
    t += 10;
    if (round == clients * 3) {
      // Client 1 moves its subscription to a new connection (its old one ends).
      f.timeline.on_connection_end(subscriber[1], t0 + static_cast<std::int64_t>(t * 1000));
      subscriber[1] = 31;
      f.opened[31] = t0 + static_cast<std::int64_t>(t * 1000) - 1000;
      f.acquire(owner_of(1, next[1]), t + 0.2, 30'000, op_outcome::contended, command_of(1), ip_of(1), 29'000);
      f.pubsub(lock_op_kind::subscribe, t + 0.3, 31, ip_of(1));
      t += 1;
    }
    f.unlock(holder, t, op_outcome::ok, holder_conn);  // publishes
    const std::size_t before = f.events.events.size();
    for (int c = 0; c < clients; ++c) f.pubsub(lock_op_kind::message, t + 0.2 + 0.01 * c, subscriber[c], ip_of(c));
    std::map<std::string, std::string> named;  // subscriber connection ("ip:port") -> owner its message named
    for (std::size_t i = before; i < f.events.events.size(); ++i) {
      const recorded_event& e = f.events.events[i];
      if (e.event == "notified") named[e.client] = e.owner;
    }
    for (int c = 0; c < clients; ++c) {
      INFO("round " << round << ", client " << c);
      const std::string sub = ip_of(c) + ":" + std::to_string(40000 + subscriber[c]);
      REQUIRE(named.count(sub) == 1);
      CHECK(named[sub] == owner_of(c, next[c]));
      ++checked;
    }
    // One client's earliest acquires (round robin), and holds until the next round.
    const int winner = round % clients;
    holder = owner_of(winner, next[winner]++);
    holder_conn = command_of(winner);
    f.acquire(holder, t + 1, 30'000, op_outcome::ok, holder_conn, ip_of(winner));
  }
  CHECK(checked == 2 * clients * 3 * clients);
}

TEST_CASE("waiter keys: the earliest waiter deadline follows a waiter that moves its own later", "[timeline][waiters]") {
  // 40 waiters; the first is told a short TTL (its deadline the earliest), then retries
  // and is told a long one: the next earliest is then another's, which gives up at it.
  fixture f;
  f.acquire("h:1", 0, 600'000);
  f.acquire("w0:1", 1, 600'000, op_outcome::contended, 10, "10.0.0.2", 1'000);  // deadline ~1 s + margin
  for (int i = 1; i < 40; ++i) {
    f.acquire("w" + std::to_string(i) + ":1", 1 + i * 0.01, 600'000, op_outcome::contended, 10 + static_cast<std::uint64_t>(i),
              "10.0.0.2", i == 1 ? 5'000 : 60'000);
  }
  f.acquire("w0:1", 500, 600'000, op_outcome::contended, 10, "10.0.0.2", 60'000);  // now later than w1's
  f.timeline.advance_to(t0 + 20'000 * ms);
  std::vector<std::string> gave_up;
  for (const auto& e : f.events.events) {
    if (e.event == "gave_up") gave_up.push_back(e.owner);
  }
  REQUIRE(gave_up.size() == 1);
  CHECK(gave_up[0] == "w1:1");
  const recorded_event* g = f.events.first("gave_up");
  // At its deadline: its attempt's reply + the TTL it was given + the margin (2 s).
  CHECK(g->ts_us == t0 + 1'010 + 100 + 5'000'000 + 2'000'000);
}

// The waiters of a herd's lock are found by the connection of their latest attempt and
// by its address. Against a model of the waiters (a scan of them all): a connection's end
// gives up those whose latest attempt came over it, in their order; a SUBSCRIBE on a
// waiter's command connection (RESP3) names the first of them; a SUBSCRIBE from another
// connection of a host, well after the attempts (no wake-up to learn from), names the
// waiter of that host that failed last and neither polls (three attempts) nor listens
// already. Waiters retry over any connection of their host's pool (a value from another
// address is another client's).
TEST_CASE("waiter keys by connection and address: a connection's end and a SUBSCRIBE find what a scan finds",
          "[timeline][waiters]") {
  std::mt19937_64 random(4315);
  for (int round = 0; round < 6; ++round) {
    fixture f;
    f.acquire("h:1", 0, 600'000);
    struct model_waiter {
      std::string owner;
      std::uint64_t conn;
      int attempts = 1;
      double last_ms = 0;
      bool linked = false;
    };
    constexpr std::size_t hosts = 4;  // pool slot k is host k % hosts's
    std::map<std::uint64_t, std::size_t> host;  // connection -> its host
    const auto host_of = [&](std::uint64_t conn) { return "10.0.1." + std::to_string(host.at(conn) + 1); };
    std::vector<model_waiter> waiting;  // in the order of their first attempts
    std::vector<std::uint64_t> pool;    // the open connections the waiters attempt over
    for (std::uint64_t c = 100; c < 112; ++c) {
      host[c] = pool.size() % hosts;
      pool.push_back(c);
    }
    const auto pool_conn = [&](std::size_t h) {  // a connection of host h's
      for (;;) {
        const std::size_t k = random() % pool.size();
        if (k % hosts == h) return pool[k];
      }
    };
    std::uint64_t next_conn = 112;
    int next_owner = 0, ends = 0, gave_up = 0;
    double t = 1;
    // A TTL of 5,000 s: a deadline too far for a dormant record (every waiter stays full,
    // as a herd's subscribed ones) and beyond the test.
    constexpr std::int64_t ttl = 5'000'000;
    const auto attempt = [&](const std::string& owner, std::uint64_t conn) {
      f.acquire(owner, t, 600'000, op_outcome::contended, conn, host_of(conn), ttl);
    };
    for (int step = 0; step < 700; ++step) {
      t += 0.05;
      const unsigned op = static_cast<unsigned>(random() % 100);
      if (op < 35 || waiting.size() < 40) {
        // Each its own client (a UUID: a new value over a connection is no retry of another's).
        char owner[48];
        std::snprintf(owner, sizeof owner, "%08x-1111-2222-3333-444444444444:1", next_owner++);
        waiting.push_back({owner, pool_conn(random() % hosts), 1, t});
        attempt(waiting.back().owner, waiting.back().conn);
      } else if (op < 90) {  // a retry, over any connection of the pool
        model_waiter& w = waiting[random() % waiting.size()];
        w.conn = pool_conn(host.at(w.conn));
        ++w.attempts;
        w.last_ms = t;
        attempt(w.owner, w.conn);
      } else {  // a connection of the pool ends; a new one takes its place
        const std::size_t k = random() % pool.size();
        const std::uint64_t ended = pool[k];
        pool[k] = next_conn++;
        host[pool[k]] = k % hosts;
        std::vector<std::string> expected;
        for (const model_waiter& w : waiting) {
          if (w.conn == ended) expected.push_back(w.owner);
        }
        std::erase_if(waiting, [&](const model_waiter& w) { return w.conn == ended; });
        const std::size_t before = f.events.events.size();
        f.timeline.on_connection_end(ended, t0 + static_cast<std::int64_t>(t * 1000));
        std::vector<std::string> got;
        for (std::size_t i = before; i < f.events.events.size(); ++i) {
          if (f.events.events[i].event == "gave_up") got.push_back(f.events.events[i].owner);
        }
        INFO("round " << round << ", step " << step << ", connection " << ended);
        REQUIRE(got == expected);
        ++ends;
        gave_up += static_cast<int>(got.size());
      }
    }
    CHECK(ends > 30);
    CHECK(gave_up > 100);
    // A SUBSCRIBE on a command connection (RESP3) is its first waiter's there.
    const auto subscribe = [&](std::uint64_t conn) {
      t += 0.05;
      const std::size_t before = f.events.events.size();
      f.pubsub(lock_op_kind::subscribe, t, conn, host_of(conn));
      std::string named = "(none)";
      for (std::size_t i = before; i < f.events.events.size(); ++i) {
        if (f.events.events[i].event == "subscribed") named = f.events.events[i].owner;
      }
      return named;
    };
    for (const std::uint64_t conn : pool) {
      const auto first = std::find_if(waiting.begin(), waiting.end(), [&](const model_waiter& w) { return w.conn == conn; });
      if (first == waiting.end()) continue;
      INFO("round " << round << ", connection " << conn);
      CHECK(subscribe(conn) == first->owner);
      first->linked = true;
    }
    t += 100;  // past the wake window of every attempt, within the link window
    int named_some = 0;
    for (int pass = 0; pass < 3; ++pass) {
      for (std::size_t h = 0; h < hosts; ++h) {
        const std::uint64_t conn = next_conn++;  // a new subscriber of host h
        host[conn] = h;
        model_waiter* expected = nullptr;
        for (model_waiter& w : waiting) {
          if (host.at(w.conn) != h || w.linked || w.attempts >= 3) continue;
          if (expected == nullptr || w.last_ms > expected->last_ms) expected = &w;
        }
        INFO("round " << round << ", host " << h << ", pass " << pass);
        CHECK(subscribe(conn) == (expected == nullptr ? std::string() : expected->owner));
        if (expected != nullptr) {
          expected->linked = true;
          ++named_some;
        }
      }
    }
    CHECK(named_some >= 4);
  }
}

}  // namespace lockscope::timeline_test

namespace lockscope::timeline_test {

// waiter_keys::recent, a lock's latest attempts: when it says it holds every waiter whose
// latest attempt came after a time, a look at its entries finds another client's attempt
// in a window wherever a look at every waiter finds one. Against a model of the waiters
// (their clients and latest attempts), attempts noted a little out of order (replies
// captured in no order the server guarantees), waiters leaving.
TEST_CASE("waiter keys' latest attempts find what a look at every waiter finds", "[timeline][waiters]") {
  std::mt19937_64 random(5150);
  locks::timeline_detail::waiter_keys keys;
  struct model_waiter {
    std::uint64_t client;
    std::int64_t last_us;
  };
  std::map<std::uint64_t, model_waiter> waiting;  // seq -> waiter
  std::uint64_t next_seq = 0;
  std::int64_t now = 1'000'000;
  int held = 0, found = 0, not_found = 0;
  for (int step = 0; step < 20'000; ++step) {
    now += static_cast<std::int64_t>(random() % 50 == 0 ? random() % 20'000 : random() % 40);  // bursts, pauses
    const unsigned op = static_cast<unsigned>(random() % 100);
    const std::int64_t at = now - static_cast<std::int64_t>(random() % 100);  // a little out of order
    if (op < 30 || waiting.size() < 50) {
      waiting[next_seq] = {random() % 20, at};
      keys.note_attempt(next_seq++, at);
    } else if (op < 75) {
      auto it = waiting.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(random() % waiting.size()));
      it->second.last_us = at;
      keys.note_attempt(it->first, at);
    } else if (op < 90) {
      auto it = waiting.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(random() % waiting.size()));
      waiting.erase(it);
    } else {
      const std::int64_t request = now - static_cast<std::int64_t>(random() % 6'000);
      const std::int64_t reach = 100 + static_cast<std::int64_t>(random() % 2'000);
      const std::uint64_t latest_client = random() % 20;
      const auto as_recent = [&](const model_waiter& w) {
        return w.client != latest_client && w.last_us <= request && request - w.last_us < reach;
      };
      bool scanned = false;
      for (const auto& [seq, w] : waiting) scanned = scanned || as_recent(w);
      if (!keys.recent_holds_after(request - reach)) continue;
      ++held;
      bool looked = false;
      for (const auto& a : keys.recent) {
        if (a.at_us <= request - reach || a.at_us > request) continue;
        const auto it = waiting.find(a.seq);
        looked = looked || (it != waiting.end() && as_recent(it->second));
      }
      INFO("step " << step);
      REQUIRE(looked == scanned);
      ++(scanned ? found : not_found);
    }
  }
  INFO("held " << held << ", found " << found << ", not found " << not_found);
  CHECK(held > 1'000);
  CHECK(found > 200);
  CHECK(not_found > 500);
}

// A subscriber connection's end, on a herd's lock: its waiters lose their subscription,
// and those whose command connection had ended already (kept, waiting on their sure
// subscription) give up, in their order; the others wait on. Against a model of the
// waiters: clients of 4-8 threads each on a pool of command connections, some of which end
// while their waiters wait; then the subscribers end one by one.
TEST_CASE("waiter keys by subscriber: a subscriber's end gives up what a scan gives up", "[timeline][waiters]") {
  struct model_waiter {
    std::string owner;
    int client;
    std::uint64_t conn;
  };
  std::mt19937_64 random(9021);
  for (int round = 0; round < 4; ++round) {
    fixture f;
    f.acquire("h:1", 0, 600'000);
    constexpr int client_count = 8;
    std::vector<model_waiter> waiting;  // in the order of their first attempts
    std::vector<std::vector<std::uint64_t>> pool(client_count);  // each client's command connections
    std::vector<std::uint64_t> ended_commands;
    double t = 1;
    for (int c = 0; c < client_count; ++c) {
      for (int k = 0; k < 3; ++k) {
        pool[c].push_back(100 + static_cast<std::uint64_t>(c * 10 + k));
        f.opened[pool[c].back()] = t0 - 1000;
      }
      f.opened[20 + static_cast<std::uint64_t>(c)] = t0 - 1000;  // its subscriber, opened with them
    }
    for (int c = 0; c < client_count; ++c) {
      const int thread_count = 4 + static_cast<int>(random() % 5);
      for (int k = 0; k < thread_count; ++k, t += 0.01) {
        const std::uint64_t conn = pool[c][random() % pool[c].size()];
        waiting.push_back({owner_of(c, k), c, conn});
        f.acquire(waiting.back().owner, t, 600'000, op_outcome::contended, conn, ip_of(c), 5'000'000);
      }
      f.pubsub(lock_op_kind::subscribe, t + 0.1, 20 + static_cast<std::uint64_t>(c), ip_of(c));
      t += 1;
    }
    REQUIRE(waiting.size() > 32);
    // Command connections end at random (their waiters wait on their subscription).
    std::vector<bool> command_open(200, true);
    for (int c = 0; c < client_count; ++c) {
      for (const std::uint64_t conn : pool[c]) {
        if (random() % 2 == 0) continue;
        t += 1;
        f.timeline.on_connection_end(conn, t0 + static_cast<std::int64_t>(t * 1000));
        command_open[conn] = false;
      }
    }
    const auto gave_up_since = [&](std::size_t before) {
      std::vector<std::string> got;
      for (std::size_t i = before; i < f.events.events.size(); ++i) {
        if (f.events.events[i].event == "gave_up") got.push_back(f.events.events[i].owner);
      }
      return got;
    };
    int gave_up = 0;
    std::vector<int> order(client_count);
    for (int c = 0; c < client_count; ++c) order[c] = c;
    std::shuffle(order.begin(), order.end(), random);
    for (const int c : order) {
      t += 1;
      std::vector<std::string> expected;
      for (const model_waiter& w : waiting) {
        if (w.client == c && !command_open[w.conn]) expected.push_back(w.owner);
      }
      std::erase_if(waiting, [&](const model_waiter& w) { return w.client == c && !command_open[w.conn]; });
      const std::size_t before = f.events.events.size();
      f.timeline.on_connection_end(20 + static_cast<std::uint64_t>(c), t0 + static_cast<std::int64_t>(t * 1000));
      INFO("round " << round << ", subscriber of client " << c);
      CHECK(gave_up_since(before) == expected);
      gave_up += static_cast<int>(expected.size());
    }
    CHECK(gave_up > 5);
  }
}

// A herd's message names the earliest waiter of its subscriber's client still waiting:
// the earliest first attempt, and of two that came in one pipeline (one request time)
// the one seen first, however the waiters' keys were reordered by those that left.
TEST_CASE("waiter keys: a message names the earliest of a client's waiters, ties by arrival", "[timeline][waiters]") {
  std::mt19937_64 random(77);
  for (int round = 0; round < 4; ++round) {
    fixture f;
    constexpr int client_count = 3, per_client = 16;
    for (int c = 0; c < client_count; ++c) {
      f.opened[command_of(c)] = t0 - 1000;
      f.opened[20 + static_cast<std::uint64_t>(c)] = t0 - 1000;
    }
    f.acquire("h:1", 0, 600'000);
    std::vector<std::vector<std::string>> waiting(client_count);  // each client's, in arrival order
    double t = 1;
    for (int c = 0; c < client_count; ++c) {
      std::vector<int> order(per_client);
      for (int k = 0; k < per_client; ++k) order[k] = k;
      std::shuffle(order.begin(), order.end(), random);  // owners' names out of their order
      for (int k = 0; k < per_client; ++k) {
        waiting[c].push_back(owner_of(c, order[k]));
        f.acquire(waiting[c].back(), t, 600'000, op_outcome::contended, command_of(c), ip_of(c), 5'000'000);
        // In even rounds all in one pipeline (one request time), else some of them.
        if (round % 2 == 1 && random() % 2 == 0) t += 0.01;
      }
      t += 0.01;
      f.pubsub(lock_op_kind::subscribe, t + 0.1, 20 + static_cast<std::uint64_t>(c), ip_of(c));
      t += 1;
    }
    std::string holder = "h:1";
    std::uint64_t holder_conn = 1;
    std::string holder_ip = "10.0.0.1";
    for (int step = 0; step < 30; ++step) {
      t += 10;
      f.unlock(holder, t, op_outcome::ok, holder_conn);
      const int c = static_cast<int>(random() % client_count);
      if (waiting[c].empty()) break;
      const std::size_t before = f.events.events.size();
      f.pubsub(lock_op_kind::message, t + 0.2, 20 + static_cast<std::uint64_t>(c), ip_of(c));
      std::string named = "(none)";
      for (std::size_t i = before; i < f.events.events.size(); ++i) {
        if (f.events.events[i].event == "notified") named = f.events.events[i].owner;
      }
      INFO("round " << round << ", step " << step << ", client " << c);
      CHECK(named == waiting[c].front());
      // A waiter of the client that is not its earliest acquires (its keys' order changes).
      const std::size_t k = random() % waiting[c].size();
      holder = waiting[c][k];
      waiting[c].erase(waiting[c].begin() + static_cast<std::ptrdiff_t>(k));
      holder_conn = command_of(c);
      f.acquire(holder, t + 1, 600'000, op_outcome::ok, holder_conn, ip_of(c));
    }
  }
}

}  // namespace lockscope::timeline_test
