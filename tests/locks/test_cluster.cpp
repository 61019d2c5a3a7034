// Redis Cluster traffic, sans I/O: the redirect replies (MOVED, ASK, TRYAGAIN,
// CLUSTERDOWN) and ASKING as the recognizer reads them, sharded pub/sub (SSUBSCRIBE,
// smessage, the server's sunsubscribe when a slot moves), CLUSTER SLOTS/SHARDS, bad
// input, and the timeline keeping a lock that moved between masters one lock.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "capture_builder.hpp"
#include "helpers.hpp"
#include "lockscope/test/jsonl_schema.hpp"
#include "lockscope/locks/lock_patterns.hpp"
#include "lockscope/lock/naming.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::cluster_reply;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::string_view owner_a = "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:1";
constexpr std::string_view owner_b = "5f1c3a9e-7d2b-4e8a-9c61-2b7e4d9a0f35:1";
const std::string ch = lock::channel_name("orders");
const std::string acquire_script(locks::known_scripts()[0].text);
const std::string latch_unlock(locks::known_scripts()[1].text);
const std::string latch = "redisson_unlock_latch:{orders}:0123456789abcdef0123456789abcdef";

struct cluster_op {
  lock_op_kind kind{};
  op_outcome outcome{};
  cluster_reply redirect{};
  bool asking = false;
  std::int32_t slot = -1;
  std::string lock, owner, server, redirect_to;
};

class cluster_recorder final : public locks::lock_operation_sink {
 public:
  void on_operation(const locks::lock_operation& op) override {
    ops.push_back({op.kind, op.outcome, op.redirect, op.asking, op.slot, std::string(op.lock), std::string(op.owner),
                   std::string(op.server_text), std::string(op.redirect_to)});
  }
  std::vector<cluster_op> ops;
};

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> acquire_args(std::string_view owner) { return {"EVAL", acquire_script, "1", "orders", "3000", std::string(owner)}; }
std::vector<std::string> unlock_args(std::string_view owner) {
  return {"EVAL", latch_unlock, "3", "orders", ch, latch, "0", "3000", std::string(owner), "SPUBLISH", "20000"};
}

}  // namespace

TEST_CASE("cluster: parse_cluster_error reads MOVED/ASK/TRYAGAIN/CLUSTERDOWN and flags malformed redirects",
          "[cluster][recognizer]") {
  auto moved = locks::parse_cluster_error("MOVED 3999 127.0.0.1:6381");
  CHECK(moved.kind == cluster_reply::moved);
  CHECK(moved.slot == 3999);
  CHECK(moved.host == "127.0.0.1");
  CHECK(moved.port == 6381);
  CHECK(locks::cluster_node_text(moved.host, moved.port) == "127.0.0.1:6381");
  auto ask = locks::parse_cluster_error("ASK 16383 ::1:7001");
  CHECK(ask.kind == cluster_reply::ask);
  CHECK(ask.slot == 16383);
  CHECK(locks::cluster_node_text(ask.host, ask.port) == "[::1]:7001");  // as the analyzer names IPv6 endpoints
  auto own_host = locks::parse_cluster_error("MOVED 0 :6380");  // the node's own address
  CHECK(own_host.kind == cluster_reply::moved);
  CHECK(own_host.host.empty());
  CHECK(locks::parse_cluster_error("TRYAGAIN Multiple keys request during rehashing of slot").kind == cluster_reply::tryagain);
  CHECK(locks::parse_cluster_error("CLUSTERDOWN The cluster is down").kind == cluster_reply::clusterdown);
  CHECK(locks::parse_cluster_error("CLUSTERDOWN Hash slot not served").kind == cluster_reply::clusterdown);
  for (std::string_view bad : {"MOVED", "MOVED 12", "MOVED abc 10.0.0.1:6379", "MOVED 16384 10.0.0.1:6379", "MOVED -1 h:1",
                               "MOVED 1 host", "MOVED 1 host:0", "ASK 1 host:65536", "ASK 1 host:port", "MOVED 1 a b:1"}) {
    INFO(bad);
    const auto r = locks::parse_cluster_error(bad);
    CHECK(r.kind == cluster_reply::none);
    CHECK(r.malformed);
  }
  for (std::string_view other : {"ERR unknown command", "MOVEDX 1 h:2", "NOSCRIPT No matching script", "ASKING"}) {
    INFO(other);
    const auto r = locks::parse_cluster_error(other);
    CHECK(r.kind == cluster_reply::none);
    CHECK_FALSE(r.malformed);
  }
}

TEST_CASE("cluster: a redirected acquire, the ASKING retry and a TRYAGAIN'd latched SPUBLISH unlock", "[cluster][recognizer]") {
  cluster_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, acquire_args(owner_a), "-MOVED 5474 10.0.0.3:6379\r\n", 1'000'000, 1);
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0].kind == lock_op_kind::cluster_link);  // the two nodes are one cluster
  CHECK(rec.ops[0].server == "10.0.0.2:6379");
  CHECK(rec.ops[0].redirect_to == "10.0.0.3:6379");
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::redirected);
  CHECK(rec.ops[1].redirect == cluster_reply::moved);
  CHECK(rec.ops[1].slot == 5474);
  CHECK(rec.ops[1].redirect_to == "10.0.0.3:6379");
  CHECK(rec.ops[1].owner == owner_a);
  // The same redirect again: the link is not reported twice.
  feed(r, acquire_args(owner_a), "-MOVED 5474 10.0.0.3:6379\r\n", 1'001'000, 1);
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[2].outcome == op_outcome::redirected);
  // ASK, then ASKING + the call on the importing node: only that call is `asking`.
  rec.ops.clear();
  feed(r, acquire_args(owner_a), "-ASK 5474 10.0.0.3:6379\r\n", 1'002'000, 1);
  feed(r, {"ASKING"}, "+OK\r\n", 1'003'000, 3, "10.0.0.1:50002", "10.0.0.3:6379");
  feed(r, acquire_args(owner_a), "$-1\r\n", 1'003'100, 3, "10.0.0.1:50002", "10.0.0.3:6379");
  feed(r, acquire_args(owner_a), "$-1\r\n", 1'004'000, 3, "10.0.0.1:50002", "10.0.0.3:6379");
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].redirect == cluster_reply::ask);
  CHECK(rec.ops[0].outcome == op_outcome::redirected);
  CHECK(rec.ops[1].outcome == op_outcome::ok);
  CHECK(rec.ops[1].asking);
  CHECK_FALSE(rec.ops[2].asking);
  // TRYAGAIN on the latched unlock (its keys split by the migration), then the retry
  // with the same latch key runs for the first time: released, not a replayed reply.
  rec.ops.clear();
  feed(r, unlock_args(owner_a), "-TRYAGAIN Multiple keys request during rehashing of slot\r\n", 1'005'000, 1);
  feed(r, unlock_args(owner_a), "-CLUSTERDOWN The cluster is down\r\n", 1'006'000, 1);
  feed(r, unlock_args(owner_a), ":1\r\n", 1'007'000, 1);
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].redirect == cluster_reply::tryagain);
  CHECK(rec.ops[0].outcome == op_outcome::redirected);
  CHECK(rec.ops[0].slot == -1);
  CHECK(rec.ops[0].redirect_to.empty());
  CHECK(rec.ops[1].redirect == cluster_reply::clusterdown);
  CHECK(rec.ops[2].kind == lock_op_kind::unlock);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  CHECK(r.stats().redirects == 5);
  // A plain error is still an error.
  feed(r, acquire_args(owner_a), "-ERR something else\r\n", 1'008'000, 1);
  CHECK(rec.ops.back().outcome == op_outcome::error);
  CHECK(rec.ops.back().redirect == cluster_reply::none);
}

TEST_CASE("cluster: SSUBSCRIBE, smessage (RESP2 and RESP3) and the server's sunsubscribe when a slot moves",
          "[cluster][recognizer]") {
  cluster_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"SSUBSCRIBE", ch}, "*3\r\n$10\r\nssubscribe\r\n$31\r\nredisson_lock__channel:{orders}\r\n:1\r\n");
  feed_push(r, "*3\r\n$8\r\nsmessage\r\n$31\r\nredisson_lock__channel:{orders}\r\n$1\r\n0\r\n");
  feed_push(r, ">3\r\n$8\r\nsmessage\r\n$31\r\nredisson_lock__channel:{orders}\r\n$1\r\n0\r\n");
  feed_push(r, "*3\r\n$12\r\nsunsubscribe\r\n$31\r\nredisson_lock__channel:{orders}\r\n:0\r\n");
  feed_push(r, "*3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$1\r\n0\r\n");  // not a lock channel
  feed(r, {"SSUBSCRIBE", ch}, "-MOVED 105 10.0.0.3:6379\r\n");   // subscribing on a node that lost the slot
  REQUIRE(rec.ops.size() == 6);
  CHECK(rec.ops[0].kind == lock_op_kind::subscribe);
  CHECK(rec.ops[0].lock == "orders");
  CHECK(rec.ops[1].kind == lock_op_kind::message);
  CHECK(rec.ops[2].kind == lock_op_kind::message);
  CHECK(rec.ops[3].kind == lock_op_kind::unsubscribe);
  CHECK(rec.ops[4].kind == lock_op_kind::cluster_link);
  CHECK(rec.ops[5].kind == lock_op_kind::subscribe);
  CHECK(rec.ops[5].outcome == op_outcome::redirected);
}

TEST_CASE("cluster: CLUSTER SLOTS and CLUSTER SHARDS replies link every node named", "[cluster][recognizer]") {
  cluster_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"CLUSTER", "SLOTS"},
       "*2\r\n"
       "*4\r\n:0\r\n:5460\r\n*3\r\n$8\r\n10.0.0.2\r\n:6379\r\n$2\r\nid\r\n*3\r\n$8\r\n10.0.0.5\r\n:6379\r\n$2\r\nid\r\n"
       "*3\r\n:5461\r\n:16383\r\n*3\r\n$8\r\n10.0.0.3\r\n:6379\r\n$2\r\nid\r\n");
  std::vector<std::string> linked;
  for (const auto& o : rec.ops) {
    CHECK(o.kind == lock_op_kind::cluster_link);
    linked.push_back(o.redirect_to);
  }
  CHECK(linked == std::vector<std::string>{"10.0.0.5:6379", "10.0.0.3:6379"});  // the answering node itself is no link
  rec.ops.clear();
  feed(r, {"CLUSTER", "SHARDS"},
       "*1\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*1\r\n"
       "%3\r\n$2\r\nid\r\n$2\r\nab\r\n$4\r\nport\r\n:7001\r\n$2\r\nip\r\n$3\r\n::1\r\n");
  REQUIRE(rec.ops.size() == 1);
  CHECK(rec.ops[0].redirect_to == "[::1]:7001");
}

TEST_CASE("cluster: a malformed MOVED and an SSUBSCRIBE with no channel are warnings naming the flow, and nothing else is lost",
          "[cluster][recognizer][robustness]") {
  cluster_recorder rec;
  locks::lock_recognizer r(rec);
  std::vector<std::string> warnings;
  r.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  feed(r, acquire_args(owner_a), "-MOVED notaslot 10.0.0.3:6379\r\n");
  feed(r, {"SSUBSCRIBE"}, "-ERR wrong number of arguments for 'ssubscribe' command\r\n");
  feed(r, acquire_args(owner_a), "$-1\r\n", 1'001'000);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("10.0.0.1:50000 > 10.0.0.2:6379") == 0);
  CHECK(warnings[0].find("malformed cluster redirect \"MOVED notaslot 10.0.0.3:6379\"") != std::string::npos);
  CHECK(warnings[1] == "10.0.0.1:50000 > 10.0.0.2:6379: SSUBSCRIBE with no channel: skipped");
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0].outcome == op_outcome::error);  // kept as the error it is
  CHECK(rec.ops[1].outcome == op_outcome::ok);
  // The error's text is the server's: an escape sequence in it reaches no terminal.
  feed(r, acquire_args(owner_a), "-MOVED \x1b]0;pwned\x07 \xc2\x9b" "31m\r\n", 1'002'000);
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[2].find("MOVED ?]0;pwned? ??31m") != std::string::npos);
  for (const char c : warnings[2]) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
  CHECK(r.stats().malformed_redirects == 2);
  CHECK(r.stats().skipped == 1);
  // A flood of bad input: warning_limit lines, the rest counted.
  for (int i = 0; i < 100; ++i) feed(r, {"SSUBSCRIBE"}, "");
  CHECK(warnings.size() == locks::lock_recognizer::warning_limit);
  CHECK(r.stats().skipped == 101);
}

namespace {

// Operations straight into a timeline.
struct cluster_timeline {
  event_recorder events;
  locks::lock_timeline timeline{locks::timeline_options{}, events};
  locks::lock_operation op(lock_op_kind kind, op_outcome outcome, std::string_view owner, std::int64_t at_us,
                              std::uint64_t connection, std::string_view server) {
    locks::lock_operation o;
    o.kind = kind;
    o.family = locks::lock_family::redisson;
    o.outcome = outcome;
    o.lock = "orders";
    o.owner = owner;
    o.lease_ms = 3000;
    o.connection = connection;
    o.client_text = connection == 1 ? "10.0.0.1:50000" : "10.0.0.1:50001";
    o.server_text = server;
    o.request_us = at_us;
    o.reply_us = at_us + 100;
    return with_addresses(o);
  }
  void link(std::string_view a, std::string_view b, std::int64_t at_us) {
    locks::lock_operation o;
    o.kind = lock_op_kind::cluster_link;
    o.server_text = a;
    o.redirect_to = b;
    o.request_us = at_us;
    timeline.on_operation(o);
  }
};

// A holds on node 2; the slot moves to node 3; B's acquire there is redirected, then
// contended; A's unlock goes to node 3 (MOVED first), then B acquires.
void moved_lock(cluster_timeline& t, bool linked, std::int64_t end_us) {
  const std::string_view n2 = "10.0.0.2:6379", n3 = "10.0.0.3:6379";
  t.timeline.on_operation(t.op(lock_op_kind::acquire, op_outcome::ok, owner_a, 1'000'000, 1, n2));
  if (linked) t.link(n2, n3, 1'100'000);
  auto redirected = t.op(lock_op_kind::acquire, op_outcome::redirected, owner_b, 1'100'000, 2, n2);
  redirected.redirect = cluster_reply::moved;
  redirected.slot = 105;
  redirected.redirect_to = n3;
  t.timeline.on_operation(redirected);
  t.timeline.on_operation(t.op(lock_op_kind::acquire, op_outcome::contended, owner_b, 1'101'000, 3, n3));
  t.timeline.on_operation(t.op(lock_op_kind::unlock, op_outcome::ok, owner_a, 1'300'000, 4, n3));
  t.timeline.on_operation(t.op(lock_op_kind::acquire, op_outcome::ok, owner_b, 1'310'000, 3, n3));
  t.timeline.finish(end_us);
}

}  // namespace

TEST_CASE("cluster: a lock whose slot moved between masters is one lock, its redirect an event, no false anomaly",
          "[cluster][timeline]") {
  cluster_timeline t;
  moved_lock(t, true, 4'000'000);
  CHECK(t.timeline.lock_count() == 1);
  CHECK(t.timeline.scope_count() == 1);
  CHECK(t.events.names() == std::vector<std::string>{"acquired", "redirected", "contended", "released", "acquired"});
  // Named by the cluster from the link on (the first acquisition came before it).
  for (std::size_t i = 1; i < t.events.events.size(); ++i) CHECK(t.events.events[i].lock_server == "cluster:10.0.0.2:6379");
  CHECK(t.events.events[1].server == "10.0.0.2:6379");  // the node the redirected call went to
  CHECK(t.events.events[3].held_us == 300'000);   // A's hold, from node 2 to its unlock on node 3
  CHECK(t.events.events[4].wait_us == 209'100);   // B waited from its contended attempt
  CHECK(t.events.count("expired") == 0);

  // Without the link the same traffic is two locks: A's hold on node 2 never ends but
  // by expiry, and B takes the "other" lock on node 3 — what the link prevents.
  cluster_timeline apart;
  moved_lock(apart, false, 5'000'000);
  CHECK(apart.timeline.lock_count() == 2);
  std::size_t a_expired = 0;
  for (const auto& e : apart.events.events) a_expired += e.event == "expired" && e.owner == owner_a;
  CHECK(a_expired == 1);
}

TEST_CASE("cluster: locks seen on a node before it was known to be in the cluster join the cluster's", "[cluster][timeline]") {
  cluster_timeline t;
  const std::string_view n2 = "10.0.0.2:6379", n3 = "10.0.0.3:6379", n4 = "10.0.0.4:6379";
  t.timeline.on_operation(t.op(lock_op_kind::acquire, op_outcome::ok, owner_a, 1'000'000, 1, n3));
  t.link(n2, n4, 1'050'000);
  t.link(n4, n3, 1'060'000);  // n3's scope joins the older cluster's: its lock is re-filed
  t.timeline.on_operation(t.op(lock_op_kind::acquire, op_outcome::contended, owner_b, 1'100'000, 2, n2));
  t.timeline.on_operation(t.op(lock_op_kind::unlock, op_outcome::ok, owner_a, 1'200'000, 1, n2));
  t.timeline.finish(2'000'000);
  CHECK(t.timeline.lock_count() == 1);
  CHECK(t.events.names() == std::vector<std::string>{"acquired", "contended", "released"});
  CHECK(t.events.events[2].held_us == 200'000);
}

TEST_CASE("cluster: the bundled cluster recordings match their goldens (text and JSONL, every redirect kept)",
          "[cluster][captures][golden]") {
  for (const char* name : {"cluster", "cluster_midstream"}) {
    INFO(name);
    const std::string base = std::string(LOCKSCOPE_CAPTURES_DIR) + "/thirdparty/" + name;
    REQUIRE(std::filesystem::exists(base + ".pcap"));
    CHECK(std::filesystem::file_size(base + ".pcap") < 2u << 20);
    const std::string text = report_of(base + ".pcap", locks::report_format::text);
    CHECK(text == file_text(base + ".timeline.txt"));
    for (const char* shown : {"redirected", ": acquire retried there", "ASK slot ", "TRYAGAIN (slot migrating", "after ASKING"}) {
      CHECK(text.find(shown) != std::string::npos);
    }
    const std::string jsonl = report_of(base + ".pcap", locks::report_format::jsonl);
    CHECK(jsonl == file_text(base + ".jsonl"));
    CHECK(lockscope::test::jsonl_errors(jsonl, lockscope::test::event_line_errors) == "");
  }
}

TEST_CASE("cluster: over a capture file, bad redirects and SSUBSCRIBEs are warnings naming the flow, on one thread or two",
          "[cluster][robustness][captures]") {
  const std::string path = (std::filesystem::temp_directory_path() / ("lockscope-cluster-bad-" + std::to_string(::getpid()) + ".pcap")).string();
  capture_builder b;
  const int a = b.connect("10.0.0.1", 50000, "10.0.0.2", 7000, 1'000'000);
  const int c = b.connect("10.0.0.1", 50001, "10.0.0.3", 7001, 1'000'000);
  b.command(a, 1'100'000, acquire_args(owner_a), resp_nil);
  b.command(c, 1'200'000, acquire_args(owner_b), "-MOVED x 10.0.0.2:7000\r\n");   // malformed
  b.command(c, 1'300'000, {"SSUBSCRIBE"}, "-ERR wrong number of arguments for 'ssubscribe' command\r\n");
  b.command(c, 1'400'000, acquire_args(owner_b), "-MOVED 105 10.0.0.2:7000\r\n");  // well formed
  b.command(a, 1'500'000, acquire_args(owner_b), ":2500\r\n");
  b.command(a, 1'600'000, unlock_args(owner_a), ":1\r\n");
  b.close(a, 1'700'000);
  b.close(c, 1'700'000);
  b.write(path);
  for (unsigned threads : {1u, 2u}) {
    INFO(threads << " threads");
    locks::analysis_options o;
    o.report.format = locks::report_format::jsonl;
    o.threads = threads;
    std::string out;
    std::vector<std::string> warnings;
    const auto r = locks::analyze_files({path}, o, [&](std::string_view s) { out += s; },
                                           [&](const std::string& w) { warnings.push_back(w); });
    REQUIRE(warnings.size() == 2);
    CHECK(warnings[0].find("10.0.0.1:50001 > 10.0.0.3:7001: EVAL answered by a malformed cluster redirect") == 0);
    CHECK(warnings[1] == "10.0.0.1:50001 > 10.0.0.3:7001: SSUBSCRIBE with no channel: skipped");
    CHECK(r.recognizer.malformed_redirects == 1);
    CHECK(r.recognizer.redirects == 1);
    // Nothing else lost: the hold, the good redirect (which links the two nodes), the
    // contended attempt and the release, as one lock of the cluster.
    CHECK(occurrences(out, "\"event\":\"acquired\"") == 1);
    CHECK(occurrences(out, "\"event\":\"redirected\"") == 1);
    CHECK(occurrences(out, "\"event\":\"contended\"") == 1);
    CHECK(occurrences(out, "\"event\":\"released\"") == 1);
    CHECK(occurrences(out, "\"event\":\"gave_up\"") == 1);  // the waiter's connection ended
    CHECK(occurrences(out, "\"kind\":\"holder_connection_closed\"") == 1);
    CHECK(occurrences(out, "\"lock_server\":\"cluster:10.0.0.2:7000\"") == 5);
    CHECK(lockscope::test::jsonl_errors(out, lockscope::test::event_line_errors) == "");
  }
  std::filesystem::remove(path);
}
