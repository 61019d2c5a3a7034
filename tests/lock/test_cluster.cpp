// Redis Cluster's sans-I/O parts: CRC16 and hash slots, the slot map from CLUSTER
// SHARDS / CLUSTER SLOTS replies, redirect parsing, the router's decisions (after a
// reply, retries, down nodes, map reloads), cluster URLs. No sockets.
#include <catch2/catch.hpp>

#include "lockscope/lock/cluster.hpp"
#include "lockscope/lock/cluster_routing.hpp"
#include "lockscope/lock/config.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/protocol.hpp"
#include "lockscope/lock/subscriptions.hpp"

namespace lock = lockscope::lock;
namespace resp = lockscope::resp;
using resp::value;

namespace {

value cluster_array(std::vector<value> e) { return value::aggregate(resp::type::array, std::move(e)); }
value map(std::vector<value> e) { return value::aggregate(resp::type::map, std::move(e)); }

value shard_node(std::string_view ip, std::int64_t port, std::string_view role, std::string_view health = "online") {
  return cluster_array({value::bulk("id"), value::bulk("0123"), value::bulk("port"), value::number(port), value::bulk("ip"),
                value::bulk(ip), value::bulk("endpoint"), value::bulk(ip), value::bulk("role"), value::bulk(role),
                value::bulk("replication-offset"), value::number(0), value::bulk("health"), value::bulk(health)});
}

}  // namespace

TEST_CASE("cluster: CRC16/XMODEM and hash slots as redis-server computes them", "[lock][cluster]") {
  // The CRC-16/XMODEM check value, and the example in the Redis Cluster specification.
  CHECK(lock::crc16_xmodem("123456789") == 0x31c3);
  // Answers of redis-server 7.0's CLUSTER KEYSLOT (the live test asks it again).
  CHECK(lock::key_slot("foo") == 12182);
  CHECK(lock::key_slot("bar") == 5061);
  CHECK(lock::key_slot("") == 0);
  CHECK(lock::key_slot("myLock") == lock::key_slot("redisson_lock__channel:{myLock}"));
  CHECK(lock::key_slot("{user1000}.following") == lock::key_slot("user1000"));
  // An empty tag, or a '{' without '}', hashes the whole key.
  CHECK(lock::key_slot("foo{}{bar}") == (lock::crc16_xmodem("foo{}{bar}") & 16383));
  CHECK(lock::key_slot("foo{bar") == (lock::crc16_xmodem("foo{bar") & 16383));
  // Only the first tag counts.
  CHECK(lock::key_slot("foo{{bar}}zap") == (lock::crc16_xmodem("{bar") & 16383));
  CHECK(lock::key_slot("foo{bar}{zap}") == lock::key_slot("bar"));
  // Every key of a lock shares its slot, through the braces Redisson's names add.
  const std::string name = "orders:42";
  for (const std::string& key : {lock::channel_name(name), lock::prefixed_name("redisson_lock_queue", name),
                                 lock::prefixed_name("redisson_lock_timeout", name),
                                 lock::prefixed_name("redisson_lock_token", name)})
    CHECK(lock::key_slot(key) == lock::key_slot(name));
}

namespace {

lock::node_address node(std::string host, std::uint16_t port) { return {std::move(host), port}; }

// A resend to `to`, and what else the decision says.
void check_resend(const lock::route_decision& d, const std::string& to, bool asking, bool learns_slot,
                  bool reloads_map) {
  CHECK(d.what == lock::route_decision::action::resend);
  CHECK(d.to.text() == to);
  CHECK(d.asking == asking);
  CHECK(d.learn_slot == learns_slot);
  CHECK(d.reload_map == reloads_map);
}

std::vector<std::string> texts(const std::vector<lock::node_address>& nodes) {
  std::vector<std::string> out;
  for (const auto& n : nodes) out.push_back(n.text());
  return out;
}

}  // namespace

TEST_CASE("cluster routing: what a command does after its reply", "[lock][cluster][routing]") {
  using action = lock::route_decision::action;
  const lock::node_address from = node("10.0.0.1", 7001);
  lock::redirect_policy policy;
  policy.max_redirects = 3;
  const std::error_code server_error = lock::errc::server_error;
  const std::error_code not_connected = lock::errc::not_connected;

  SECTION("a reply or an ordinary error is the caller's") {
    lock::route_attempts tries;
    CHECK(lock::after_reply({}, value::number(1), from, tries, policy, true).what == action::finish);
    const auto d = lock::after_reply(server_error, value::error("ERR wrong number of arguments"), from, tries, policy, true);
    CHECK(d.what == action::finish);
    CHECK_FALSE(d.reload_map);
    CHECK(lock::after_reply(lock::errc::timeout, value{}, from, tries, policy, true).what == action::finish);
    CHECK(tries.redirects == 0);
  }
  SECTION("MOVED: the map learns the slot, reloads, and the command goes to the new master") {
    lock::route_attempts tries;
    const auto d = lock::after_reply(server_error, value::error("MOVED 3999 10.0.0.2:7002"), from, tries, policy, true);
    check_resend(d, "10.0.0.2:7002", /*asking=*/false, /*learns_slot=*/true, /*reloads_map=*/true);
    CHECK(d.slot == 3999);
    CHECK(tries.redirects == 1);
    // An unknown endpoint ("MOVED 7 :7003") is on the replying node's host.
    const auto same_host = lock::after_reply(server_error, value::error("MOVED 7 :7003"), from, tries, policy, true);
    CHECK(same_host.to.text() == "10.0.0.1:7003");
  }
  SECTION("ASK: ASKING and the command on the target, once; the map stays") {
    lock::route_attempts tries;
    const auto d = lock::after_reply(server_error, value::error("ASK 12182 ::1:7002"), from, tries, policy, true);
    check_resend(d, "[::1]:7002", /*asking=*/true, /*learns_slot=*/false, /*reloads_map=*/false);
  }
  SECTION("redirects past max_redirects: the last redirect error is the caller's") {
    lock::route_attempts tries;
    for (int i = 0; i < policy.max_redirects; ++i)
      CHECK(lock::after_reply(server_error, value::error("MOVED 1 h:2"), from, tries, policy, true).what == action::resend);
    const auto d = lock::after_reply(server_error, value::error("ASK 1 h:2"), from, tries, policy, true);
    CHECK(d.what == action::finish);
    CHECK(tries.redirects == policy.max_redirects + 1);
  }
  SECTION("CLUSTERDOWN: retried after a pause, the map reloaded; TRYAGAIN: retried only") {
    lock::route_attempts tries;
    auto d = lock::after_reply(server_error, value::error("CLUSTERDOWN Hash slot not served"), from, tries, policy, true);
    CHECK(d.what == action::retry_later);
    CHECK(d.reload_map);
    d = lock::after_reply(server_error, value::error("TRYAGAIN Multiple keys request during rehashing of slot"), from,
                          tries, policy, true);
    CHECK(d.what == action::retry_later);
    CHECK_FALSE(d.reload_map);
    CHECK(tries.redirects == 0);
  }
  SECTION("a command never written (its node went down): retried where the map says, while its deadline allows") {
    lock::route_attempts tries;
    auto d = lock::after_reply(not_connected, value{}, from, tries, policy, true);
    CHECK(d.what == action::retry_later);
    CHECK(d.reload_map);
    CHECK(lock::after_reply(not_connected, value{}, from, tries, policy, false).what == action::finish);
  }
  SECTION("a client shutting down finishes everything") {
    lock::route_attempts tries;
    CHECK(lock::after_reply(not_connected, value{}, from, tries, policy, true, true).what == action::finish);
    CHECK(lock::after_reply(server_error, value::error("MOVED 1 h:2"), from, tries, policy, true, true).what ==
          action::finish);
  }
}

TEST_CASE("cluster routing: retry pauses double, and a retry gives up before its deadline or its count", "[lock][cluster][routing]") {
  using namespace std::chrono_literals;
  lock::redirect_policy policy;  // 10 ms doubling to 500 ms
  policy.max_redirects = 2;      // at most 8 retries
  lock::route_attempts tries;
  CHECK(lock::retry_pause(tries, policy, 10s) == 10ms);
  CHECK(lock::retry_pause(tries, policy, 10s) == 20ms);
  CHECK(lock::retry_pause(tries, policy, 10s) == 40ms);
  CHECK(tries.retries == 3);
  // The deadline comes before the pause would end: fail now rather than sleep through it.
  lock::route_attempts late;
  CHECK(lock::retry_pause(late, policy, 10ms) == std::nullopt);
  lock::route_attempts in_time;
  CHECK(lock::retry_pause(in_time, policy, 11ms) == 10ms);
  // More than 4 x max_redirects retries: give up however long the deadline.
  lock::route_attempts many;
  for (int i = 1; i <= 8; ++i) CHECK(lock::retry_pause(many, policy, 1h).has_value());
  CHECK(lock::retry_pause(many, policy, 1h) == std::nullopt);
}

TEST_CASE("cluster routing: down nodes, the ones forgotten, and where the slot map is reloaded from", "[lock][cluster][routing]") {
  lock::slot_map map;
  map.assign(0, node("10.0.0.1", 7001));
  map.assign(1, node("10.0.0.2", 7002));
  map.assign(2, node("10.0.0.3", 7003));
  // Seeds: one is also a master, one is a replica the map does not name.
  lock::cluster_nodes nodes({node("10.0.0.2", 7002), node("10.0.0.9", 7009)});

  CHECK(texts(nodes.reload_candidates(map)) ==
        std::vector<std::string>{"10.0.0.1:7001", "10.0.0.2:7002", "10.0.0.3:7003", "10.0.0.9:7009"});
  // Unreachable nodes are asked last, in their order.
  nodes.mark_down("10.0.0.1:7001");
  nodes.mark_down("10.0.0.9:7009");
  CHECK(nodes.is_down(node("10.0.0.1", 7001)));
  CHECK(texts(nodes.reload_candidates(map)) ==
        std::vector<std::string>{"10.0.0.2:7002", "10.0.0.3:7003", "10.0.0.1:7001", "10.0.0.9:7009"});

  // A down master stays (its slots need it until the map changes); a down node the map
  // does not name is forgotten, and only once.
  nodes.mark_down("10.0.0.7:7007");  // a failed master its replica replaced
  CHECK(nodes.take_unmapped_down(map) == std::vector<std::string>{"10.0.0.7:7007", "10.0.0.9:7009"});
  CHECK(nodes.take_unmapped_down(map).empty());
  CHECK(nodes.is_down("10.0.0.1:7001"));
  CHECK_FALSE(nodes.is_down("10.0.0.9:7009"));
  CHECK(lock::is_master(map, "10.0.0.1:7001"));
  CHECK_FALSE(lock::is_master(map, "10.0.0.9:7009"));

  // After a failover the reloaded map names the promoted replica instead: the old
  // master goes.
  lock::slot_map after;
  after.assign(0, node("10.0.0.4", 7004));
  after.assign(1, node("10.0.0.2", 7002));
  after.assign(2, node("10.0.0.3", 7003));
  CHECK(nodes.take_unmapped_down(after) == std::vector<std::string>{"10.0.0.1:7001"});
  // Back up: no longer last.
  nodes.mark_down("10.0.0.4:7004");
  CHECK(texts(nodes.reload_candidates(after)).front() == "10.0.0.2:7002");
  nodes.mark_up("10.0.0.4:7004");
  CHECK(texts(nodes.reload_candidates(after)).front() == "10.0.0.4:7004");
  CHECK_FALSE(nodes.is_down("10.0.0.4:7004"));
}

TEST_CASE("cluster routing: slot map reloads, one at a time, with backoff", "[lock][cluster][routing]") {
  using namespace std::chrono_literals;
  lock::map_reload_schedule reloads(100ms, 2000ms);
  CHECK(reloads.backoff(1) == 200ms);
  CHECK(reloads.backoff(4) == 1600ms);
  CHECK(reloads.backoff(5) == 2000ms);
  CHECK(reloads.backoff(60) == 2000ms);

  SECTION("a request during a load is served by one more load, a moment after it") {
    REQUIRE(reloads.request());
    CHECK(reloads.loading());
    CHECK_FALSE(reloads.request());
    CHECK_FALSE(reloads.request());
    CHECK(reloads.loaded(lock::cluster_slots) == 100ms);
    CHECK_FALSE(reloads.loading());
    REQUIRE(reloads.request());
    CHECK(reloads.loaded(lock::cluster_slots) == std::nullopt);  // nothing asked meanwhile
  }
  SECTION("failed rounds back off, doubling; a map resets them") {
    REQUIRE(reloads.request());
    CHECK(reloads.round_failed() == 200ms);
    CHECK_FALSE(reloads.loading());
    REQUIRE(reloads.request());
    CHECK(reloads.round_failed() == 400ms);
    REQUIRE(reloads.request());
    CHECK(reloads.round_failed() == 800ms);
    REQUIRE(reloads.request());
    CHECK(reloads.loaded(lock::cluster_slots) == std::nullopt);
    REQUIRE(reloads.request());
    CHECK(reloads.round_failed() == 200ms);
  }
  SECTION("a map with slots unserved (a failover under way) is reloaded until every slot has a master") {
    REQUIRE(reloads.request());
    CHECK(reloads.loaded(lock::cluster_slots - 5461) == 200ms);
    REQUIRE(reloads.request());
    CHECK(reloads.loaded(lock::cluster_slots - 5461) == 400ms);
    // Requested meanwhile as well: the sooner of the two.
    REQUIRE(reloads.request());
    CHECK_FALSE(reloads.request());
    CHECK(reloads.loaded(lock::cluster_slots - 5461) == 100ms);
    REQUIRE(reloads.request());
    CHECK(reloads.loaded(lock::cluster_slots) == std::nullopt);
    REQUIRE(reloads.request());
    CHECK(reloads.loaded(0) == 200ms);  // counted afresh
  }
}

TEST_CASE("cluster routing: a map from a node behind on a failover does not undo a MOVED", "[lock][cluster][routing]") {
  // As recorded in the failover test: the old master (7001) answers MOVED 3739 to its
  // promoted replica (7004); the reload that MOVED asks for is served by a third node
  // whose CLUSTER SHARDS still names 7001 the master. Taken as is, that map sent the
  // waiter's SSUBSCRIBE to 7001, now a replica, and the waiter slept out the lease.
  using namespace std::chrono_literals;
  const auto shards_with_master = [](std::uint16_t master_port, std::uint16_t replica_port) {
    return cluster_array({cluster_array({value::bulk("slots"), cluster_array({value::number(0), value::number(16383)}),
                                         value::bulk("nodes"),
                                         cluster_array({shard_node("127.0.0.1", master_port, "master"),
                                                        shard_node("127.0.0.1", replica_port, "replica")})})});
  };
  const lock::node_address old_master{"127.0.0.1", 7001}, promoted{"127.0.0.1", 7004};
  const auto t0 = lock::redirect_memory::clock_type::time_point{} + 1h;
  lock::slot_map map;
  REQUIRE_FALSE(map.load_shards(shards_with_master(7001, 7004), false));
  lock::redirect_memory redirects;  // 2 s

  map.assign(3739, promoted);
  redirects.learned(3739, promoted, t0);
  REQUIRE_FALSE(map.load_shards(shards_with_master(7001, 7004), false));  // the lagging node's map
  CHECK(*map.node_for(3739) == old_master);
  CHECK(redirects.reconcile(map, t0 + 1ms));  // contradicted: reload soon
  CHECK(*map.node_for(3739) == promoted);
  CHECK(*map.node_for(3740) == old_master);  // only the redirected slot: no guess about the rest
  CHECK(redirects.size() == 1);

  SECTION("a map that caught up ends it") {
    REQUIRE_FALSE(map.load_shards(shards_with_master(7004, 7001), false));
    CHECK_FALSE(redirects.reconcile(map, t0 + 150ms));
    CHECK(redirects.size() == 0);
    CHECK(*map.node_for(3739) == promoted);
    CHECK(*map.node_for(3740) == promoted);
  }
  SECTION("after the hold, the map wins (the slot may have moved back)") {
    REQUIRE_FALSE(map.load_shards(shards_with_master(7001, 7004), false));
    CHECK(redirects.reconcile(map, t0 + 1999ms));
    CHECK(*map.node_for(3739) == promoted);
    REQUIRE_FALSE(map.load_shards(shards_with_master(7001, 7004), false));
    CHECK_FALSE(redirects.reconcile(map, t0 + 2s));
    CHECK(*map.node_for(3739) == old_master);
    CHECK(redirects.size() == 0);
  }
  SECTION("the latest redirect of a slot counts") {
    redirects.learned(3739, old_master, t0 + 500ms);  // moved back, and said so by a MOVED
    REQUIRE_FALSE(map.load_shards(shards_with_master(7001, 7004), false));
    CHECK_FALSE(redirects.reconcile(map, t0 + 600ms));
    CHECK(*map.node_for(3739) == old_master);
  }
  SECTION("at most max_slots slots are remembered, the oldest given up") {
    for (std::uint16_t slot = 0; slot < lock::redirect_memory::max_slots + 10; ++slot)
      redirects.learned(slot, promoted, t0 + std::chrono::milliseconds(slot));
    CHECK(redirects.size() == lock::redirect_memory::max_slots);
    REQUIRE_FALSE(map.load_shards(shards_with_master(7001, 7004), false));
    CHECK(redirects.reconcile(map, t0 + 1s));
    CHECK(*map.node_for(0) == old_master);  // given up
    CHECK(*map.node_for(lock::redirect_memory::max_slots + 9) == promoted);
  }
}

TEST_CASE("cluster: slot map from CLUSTER SHARDS (RESP2 and RESP3) and CLUSTER SLOTS", "[lock][cluster]") {
  lock::slot_map m;
  CHECK(m.node_for(0) == nullptr);
  const value shards = cluster_array({
      cluster_array({value::bulk("slots"), cluster_array({value::number(0), value::number(5460)}), value::bulk("nodes"),
             cluster_array({shard_node("127.0.0.1", 7001, "master"), shard_node("127.0.0.1", 7004, "replica")})}),
      map({value::bulk("slots"), cluster_array({value::number(5461), value::number(10922)}), value::bulk("nodes"),
           cluster_array({shard_node("127.0.0.1", 7005, "replica"), shard_node("127.0.0.1", 7002, "master")})}),
      // A shard of two ranges; its old master failed and was not yet replaced.
      cluster_array({value::bulk("slots"),
             cluster_array({value::number(10923), value::number(16000), value::number(16001), value::number(16383)}),
             value::bulk("nodes"),
             cluster_array({shard_node("127.0.0.1", 7009, "master", "fail"), shard_node("127.0.0.1", 7003, "master")})}),
  });
  REQUIRE_FALSE(m.load_shards(shards, false));
  CHECK(m.covered() == 16384);
  CHECK(m.masters().size() == 3);
  CHECK(m.node_for(0)->port == 7001);
  CHECK(m.node_for(5460)->port == 7001);
  CHECK(m.node_for(5461)->port == 7002);
  CHECK(m.node_for(16383)->port == 7003);
  CHECK(m.node_for(16000)->text() == "127.0.0.1:7003");

  m.assign(5460, {"127.0.0.1", 7002});
  CHECK(m.node_for(5460)->port == 7002);
  CHECK(m.node_for(5459)->port == 7001);

  // A bad reply leaves the map as it was.
  CHECK(m.load_shards(value::bulk("x"), false));
  CHECK(m.load_shards(cluster_array({cluster_array({value::bulk("slots"), cluster_array({value::number(0), value::number(99999)}),
                                    value::bulk("nodes"), cluster_array({shard_node("h", 1, "master")})})}),
                      false));
  CHECK(m.node_for(5460)->port == 7002);

  const value slots = cluster_array({
      cluster_array({value::number(0), value::number(8191), cluster_array({value::bulk("10.0.0.1"), value::number(6379)}),
             cluster_array({value::bulk("10.0.0.2"), value::number(6379)})}),
      cluster_array({value::number(8192), value::number(16383), cluster_array({value::bulk("10.0.0.3"), value::number(6380)})}),
  });
  REQUIRE_FALSE(m.load_slots(slots));
  CHECK(m.masters().size() == 2);
  CHECK(m.node_for(8191)->host == "10.0.0.1");
  CHECK(m.node_for(8192)->text() == "10.0.0.3:6380");
}

TEST_CASE("cluster: redirects and retry backoff", "[lock][cluster]") {
  auto r = lock::parse_redirect("MOVED 3999 127.0.0.1:6381");
  CHECK(r.kind == lock::redirect_kind::moved);
  CHECK(r.slot == 3999);
  CHECK(r.node.text() == "127.0.0.1:6381");
  r = lock::parse_redirect("ASK 12182 ::1:7002");
  CHECK(r.kind == lock::redirect_kind::ask);
  CHECK(r.node.host == "::1");
  CHECK(r.node.text() == "[::1]:7002");
  r = lock::parse_redirect("MOVED 7 :7003");  // an unknown endpoint: the replying node's host
  CHECK(r.kind == lock::redirect_kind::moved);
  CHECK(r.node.host.empty());
  CHECK(lock::parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot").kind ==
        lock::redirect_kind::try_again);
  CHECK(lock::parse_redirect("CLUSTERDOWN The cluster is down").kind == lock::redirect_kind::cluster_down);
  for (const char* text : {"MOVED", "MOVED 16384 h:1", "MOVED x h:1", "MOVED 1 h", "MOVED 1 h:0", "ASKING",
                           "ERR unknown", "CROSSSLOT Keys in request don't hash to the same slot", "MOVEDX 1 h:1"})
    CHECK(lock::parse_redirect(text).kind == lock::redirect_kind::none);

  lock::redirect_policy policy;
  CHECK(policy.backoff(1) == std::chrono::milliseconds(10));
  CHECK(policy.backoff(2) == std::chrono::milliseconds(20));
  CHECK(policy.backoff(30) == std::chrono::milliseconds(500));
}

TEST_CASE("cluster: redis-cluster:// URLs", "[lock][cluster][url]") {
  auto c = lock::client_config::from_url("redis-cluster://:pw@10.0.0.1:7001,10.0.0.2,[::1]:7003");
  CHECK(c.cluster.enabled);
  CHECK_FALSE(c.tls.enabled);
  CHECK(c.password == "pw");
  CHECK(c.host == "10.0.0.1");
  CHECK(c.port == 7001);
  CHECK(c.cluster.seeds == std::vector<std::string>{"10.0.0.1:7001", "10.0.0.2:6379", "[::1]:7003"});
  c = lock::client_config::from_url("rediss-cluster://u:p@h:7000/0");
  CHECK(c.cluster.enabled);
  CHECK(c.tls.enabled);
  CHECK(c.username == "u");
  CHECK_FALSE(lock::client_config::from_url("redis://h:1").cluster.enabled);

  auto error_of = [](std::string_view url) {
    lock::client_config config;
    std::string why;
    const std::error_code ec = lock::parse_url(url, config, &why);
    CHECK(ec == lock::errc::invalid_url);
    return why;
  };
  CHECK(error_of("redis-cluster://h:1/2") == "database '2': a cluster has only database 0");
  CHECK(error_of("redis-cluster://h:1,,h:2") == "empty seed node in the cluster URL");
  CHECK(error_of("redis-cluster://h:1,h:99999") == "port '99999' of seed 'h:99999' is not a number in 1..65535");
  CHECK(error_of("redis-cluster://") == "empty seed node in the cluster URL");
}

TEST_CASE("cluster: sharded subscriptions, and a channel the server drops", "[lock][cluster][pubsub]") {
  struct listener final : lock::subscription_listener {
    int subscribed = 0;
    int messages = 0;
    void on_subscribed() override { ++subscribed; }
    void on_message(std::string_view) override { ++messages; }
  } l;
  lock::subscription_registry r(true);
  std::string commands;
  r.on_connected(commands);
  const std::string ch = "redisson_lock__channel:{x}";
  r.add(ch, l, commands);
  CHECK(commands == "*2\r\n$10\r\nSSUBSCRIBE\r\n$26\r\n" + ch + "\r\n");
  auto push = [](std::string_view kind, std::string_view channel, value third) {
    return cluster_array({value::bulk(kind), value::bulk(channel), std::move(third)});
  };
  CHECK_FALSE(r.on_push(push("ssubscribe", ch, value::number(1))));
  CHECK(l.subscribed == 1);
  CHECK_FALSE(r.on_push(push("message", ch, value::bulk("0"))));  // not a sharded message
  CHECK_FALSE(r.on_push(push("smessage", ch, value::bulk("0"))));
  CHECK(l.messages == 1);
  // The node gave the slot away and says so: the channel is reported, its waiter kept.
  const auto dropped = r.on_push(push("sunsubscribe", ch, value::number(0)));
  REQUIRE(dropped);
  CHECK(*dropped == ch);
  CHECK_FALSE(r.subscribed(ch));
  const auto moved = r.take_waiters(ch);
  REQUIRE(moved.size() == 1);
  CHECK(moved.front() == &l);
  CHECK(r.channels() == 0);
  // A SUNSUBSCRIBE we asked for is a confirmation, not a drop.
  commands.clear();
  const auto id = r.add(ch, l, commands).id;
  CHECK_FALSE(r.on_push(push("ssubscribe", ch, value::number(1))));
  commands.clear();
  r.remove(ch, id, commands);
  CHECK(commands.find("SUNSUBSCRIBE") != std::string::npos);
  CHECK_FALSE(r.on_push(push("sunsubscribe", ch, value::number(0))));
}

TEST_CASE("cluster: a subscriber connection hands a refused SSUBSCRIBE's error to its push handler",
          "[lock][cluster][pubsub][protocol]") {
  lock::request_pipeline p({.route_pubsub_arrays = true});
  std::vector<value> pushes;
  p.set_push_handler([&](value&& v) { pushes.push_back(std::move(v)); });
  p.send_without_reply("*2\r\n$10\r\nSSUBSCRIBE\r\n$1\r\nc\r\n");
  REQUIRE_FALSE(p.feed("-MOVED 7365 127.0.0.1:7002\r\n"));
  REQUIRE(pushes.size() == 1);
  CHECK(pushes[0].is_error());
  CHECK(lock::parse_redirect(pushes[0].text).kind == lock::redirect_kind::moved);
  // With a request in flight an error is that request's reply, as on any connection.
  std::vector<std::string> replies;
  p.send(lock::clock_type::time_point::max(), [&](std::error_code ec, value&& v) {
    CHECK(ec == lock::errc::server_error);
    replies.push_back(v.text);
  }, "PING");
  REQUIRE_FALSE(p.feed("-ERR busy\r\n"));
  CHECK(replies == std::vector<std::string>{"ERR busy"});
  CHECK(pushes.size() == 1);
  // A command connection still treats an unrequested error as a broken stream.
  lock::request_pipeline commands;
  CHECK(commands.feed("-MOVED 7365 127.0.0.1:7002\r\n") == lock::errc::protocol_error);
}
