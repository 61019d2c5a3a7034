// Redis Functions (Redis 7): a library loaded by FUNCTION LOAD, in either registration
// form, and its functions called by FCALL / FCALL_RO, read by what each function does;
// a function whose library was not seen loaded is inferred from the traffic as an
// unseen EVALSHA is.
#include <chrono>

#include "helpers.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;
using locks::lock_op_kind;
using locks::op_outcome;

namespace {

constexpr std::string_view server_a = "10.0.0.2:6379";

const std::string mutex_library =
    "#!lua name=api_mutex\n"
    "local function mutex_lock(keys, args)\n"
    "  if redis.call('SET', keys[1], args[1], 'NX', 'PX', args[2]) then return 1 end\n"
    "  return 0\n"
    "end\n"
    "local function mutex_unlock(keys, args)\n"
    "  if redis.call('GET', keys[1]) == args[1] then redis.call('DEL', keys[1]) return 1 end\n"
    "  return 0\n"
    "end\n"
    "local function mutex_extend(keys, args)\n"
    "  if redis.call('GET', keys[1]) == args[1] then redis.call('PEXPIRE', keys[1], args[2]) return 1 end\n"
    "  return 0\n"
    "end\n"
    "redis.register_function('mutex_lock', mutex_lock)\n"
    "redis.register_function('mutex_unlock', mutex_unlock)\n"
    "redis.register_function('mutex_extend', mutex_extend)\n";

// Ceph RGW's shape: 0 when done, a negative errno when not; the table form.
const std::string errno_library =
    "#!lua name=cls_lock\n"
    "local EBUSY = -16\n"
    "redis.register_function{function_name = 'lock', callback = function(keys, args)\n"
    "  if redis.call('GET', keys[1]) then return EBUSY end\n"
    "  redis.call('SET', keys[1], args[1], 'PX', args[2])\n"
    "  return 0\n"
    "end}\n"
    "redis.register_function{function_name = 'unlock', callback = function(keys, args)\n"
    "  local holder = redis.call('GET', keys[1])\n"
    "  if not holder then return -2 end\n"
    "  if holder ~= args[1] then return EBUSY end\n"
    "  redis.call('DEL', keys[1])\n"
    "  return 0\n"
    "end}\n"
    "redis.register_function{function_name = 'owner', callback = function(keys, args)\n"
    "  return redis.call('GET', keys[1])\n"
    "end, flags = {'no-writes'}}\n";

void load(locks::lock_recognizer& r, const std::string& library, std::string_view reply, bool replace = false,
          std::string_view server = server_a) {
  std::vector<std::string> args{"FUNCTION", "LOAD"};
  if (replace) args.emplace_back("REPLACE");
  args.push_back(library);
  feed(r, args, reply, 1'000'000, 1, "10.0.0.1:50000", server);
}

void fcall(locks::lock_recognizer& r, std::string_view verb, std::string_view name, std::vector<std::string> keys,
           std::vector<std::string> argv, std::string_view reply, std::int64_t at_us,
           std::string_view server = server_a) {
  std::vector<std::string> args{std::string(verb), std::string(name), std::to_string(keys.size())};
  args.insert(args.end(), keys.begin(), keys.end());
  args.insert(args.end(), argv.begin(), argv.end());
  feed(r, args, reply, at_us, 1, "10.0.0.1:50000", server);
}

}  // namespace

TEST_CASE("functions: FUNCTION LOAD, then FCALL read by what each function does", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  load(r, mutex_library, "$9\r\napi_mutex\r\n");
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-a", "3000"}, ":1\r\n", 2'000'000);
  fcall(r, "fcall", "MUTEX_LOCK", {"jobs"}, {"tok-b", "3000"}, ":0\r\n", 2'100'000);  // names fold case
  fcall(r, "FCALL", "mutex_extend", {"jobs"}, {"tok-a", "5000"}, ":1\r\n", 2'200'000);
  fcall(r, "FCALL", "mutex_unlock", {"jobs"}, {"tok-a"}, ":1\r\n", 2'300'000);
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[0].owner == "tok-a");
  CHECK(rec.ops[0].lease_ms == 3000);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[2].kind == lock_op_kind::renew);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  CHECK(rec.ops[2].lease_ms == 5000);
  CHECK(rec.ops[3].kind == lock_op_kind::unlock);
  CHECK(rec.ops[3].outcome == op_outcome::ok);
  CHECK(rec.ops[3].owner == "tok-a");
  for (const auto& op : rec.ops) {
    CHECK(op.lock == "jobs");
    CHECK_FALSE(op.inferred);
  }
}

TEST_CASE("functions: the table form, answering 0 or a negative errno", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  load(r, errno_library, "$8\r\ncls_lock\r\n");
  fcall(r, "FCALL", "lock", {"rgw:gc"}, {"cookie-1", "30000"}, ":0\r\n", 2'000'000);
  fcall(r, "FCALL", "lock", {"rgw:gc"}, {"cookie-2", "30000"}, ":-16\r\n", 2'100'000);
  fcall(r, "FCALL_RO", "owner", {"rgw:gc"}, {}, "$8\r\ncookie-1\r\n", 2'150'000);  // a read: nothing
  fcall(r, "FCALL", "unlock", {"rgw:gc"}, {"cookie-1"}, ":0\r\n", 2'200'000);
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[0].owner == "cookie-1");
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[2].kind == lock_op_kind::unlock);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  for (const auto& op : rec.ops) CHECK_FALSE(op.inferred);
}

TEST_CASE("functions: a function never seen loaded is inferred from the traffic", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-a", "3000"}, ":1\r\n", 2'000'000);
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-b", "3000"}, ":0\r\n", 2'100'000);
  fcall(r, "FCALL", "mutex_unlock", {"jobs"}, {"tok-a"}, ":1\r\n", 2'300'000);
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].outcome == op_outcome::ok);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::contended);
  CHECK(rec.ops[2].kind == lock_op_kind::unlock);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
  for (const auto& op : rec.ops) CHECK(op.inferred);
  CHECK(r.stats().unknown_shas == 2);  // one a function name

  // The server has no such function: nothing ran, nothing is read.
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-c", "3000"}, "-ERR Function not found\r\n", 2'400'000);
  CHECK(rec.ops.size() == 3);
}

TEST_CASE("functions: an unseen function answering 0 / -errno on a lock", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  fcall(r, "FCALL", "lock", {"rgw:gc"}, {"cookie-1", "30000"}, ":-16\r\n", 2'000'000);
  fcall(r, "FCALL", "lock", {"rgw:gc"}, {"cookie-2", "30000"}, ":0\r\n", 2'100'000);
  fcall(r, "FCALL", "unlock", {"rgw:gc"}, {"cookie-2"}, ":0\r\n", 2'200'000);
  REQUIRE(rec.ops.size() == 3);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK(rec.ops[0].outcome == op_outcome::contended);
  CHECK(rec.ops[1].kind == lock_op_kind::acquire);
  CHECK(rec.ops[1].outcome == op_outcome::ok);
  CHECK(rec.ops[1].owner == "cookie-2");
  CHECK(rec.ops[2].kind == lock_op_kind::unlock);
  CHECK(rec.ops[2].outcome == op_outcome::ok);
}

TEST_CASE("functions: a FUNCTION LOAD answered with an error loads nothing", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  load(r, mutex_library, "-ERR Library 'api_mutex' already exists\r\n");
  CHECK(r.stats().scripts_seen == 0);
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-a", "3000"}, ":1\r\n", 2'000'000);
  REQUIRE(rec.ops.size() == 1);
  CHECK(rec.ops[0].inferred);  // not read from the text the server refused
}

TEST_CASE("functions: a library that loops or allocates without bound is stopped", "[functions][recognizer]") {
  for (const std::string& body : {std::string("while true do end\n"),
                                 std::string("local t = {}\nlocal s = 'x'\nwhile true do s = s .. s; t[#t + 1] = s end\n")}) {
    op_recorder rec;
    locks::lock_recognizer r(rec);
    const auto began = std::chrono::steady_clock::now();
    load(r, "#!lua name=hostile\n" + body + "redis.register_function('mutex_lock', function() end)\n",
         "$7\r\nhostile\r\n");
    CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(5));
    CHECK(r.stats().scripts_seen == 0);  // not understood: no function learnt
    fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-a", "3000"}, ":1\r\n", 2'000'000);
    REQUIRE(rec.ops.size() == 1);
    CHECK(rec.ops[0].inferred);
  }
}

TEST_CASE("functions: libraries that run out of their budget count as strikes", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  // Each a library of its own (a new text each time), each stopped by its limits.
  for (int i = 0; i < 20; ++i) {
    const std::string name = "spin" + std::to_string(i);
    load(r, "#!lua name=" + name + "\nwhile true do end\n", "$" + std::to_string(name.size()) + "\r\n" + name + "\r\n");
  }
  // After that many strikes a library is not run at all: its functions are inferred.
  const auto began = std::chrono::steady_clock::now();
  load(r, mutex_library, "$9\r\napi_mutex\r\n");
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::milliseconds(20));
  CHECK(r.stats().scripts_seen == 0);
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-a", "3000"}, ":1\r\n", 2'000'000);
  REQUIRE(rec.ops.size() == 1);
  CHECK(rec.ops[0].inferred);
}

TEST_CASE("functions: REPLACE replaces a library, DELETE and FLUSH forget", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  load(r, mutex_library, "$9\r\napi_mutex\r\n");
  // The same library, its `mutex_lock` now the release and its other functions gone.
  const std::string replaced =
      "#!lua name=api_mutex\n"
      "redis.register_function('mutex_lock', function(keys, args)\n"
      "  if redis.call('GET', keys[1]) == args[1] then return redis.call('DEL', keys[1]) end\n"
      "  return 0\n"
      "end)\n";
  load(r, replaced, "$9\r\napi_mutex\r\n", true);
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-a"}, ":1\r\n", 2'000'000);
  fcall(r, "FCALL", "mutex_extend", {"jobs"}, {"tok-a", "5000"}, ":1\r\n", 2'100'000);
  REQUIRE(rec.ops.size() == 2);
  CHECK(rec.ops[0].kind == lock_op_kind::unlock);
  CHECK_FALSE(rec.ops[0].inferred);
  CHECK(rec.ops[1].inferred);  // gone with the old version: no longer known

  // Loaded on another server too: FLUSH on the first forgets only the first's.
  load(r, mutex_library, "$9\r\napi_mutex\r\n", true);
  load(r, mutex_library, "$9\r\napi_mutex\r\n", false, "10.0.0.3:6379");
  feed(r, {"FUNCTION", "FLUSH"}, "+OK\r\n");
  fcall(r, "FCALL", "mutex_unlock", {"jobs"}, {"tok-z"}, ":1\r\n", 2'200'000);
  fcall(r, "FCALL", "mutex_unlock", {"jobs"}, {"tok-z"}, ":1\r\n", 2'300'000, "10.0.0.3:6379");
  REQUIRE(rec.ops.size() == 4);
  CHECK(rec.ops[2].inferred);
  CHECK_FALSE(rec.ops[3].inferred);
  feed(r, {"FUNCTION", "DELETE", "API_MUTEX"}, "+OK\r\n", 2'350'000, 1, "10.0.0.1:50000", "10.0.0.3:6379");
  fcall(r, "FCALL", "mutex_unlock", {"jobs"}, {"tok-y"}, ":1\r\n", 2'400'000, "10.0.0.3:6379");
  REQUIRE(rec.ops.size() == 5);
  CHECK(rec.ops[4].inferred);
}

TEST_CASE("functions: FUNCTION LOAD inside MULTI", "[functions][recognizer]") {
  op_recorder rec;
  locks::lock_recognizer r(rec);
  feed(r, {"MULTI"}, "+OK\r\n");
  load(r, mutex_library, "+QUEUED\r\n", true);
  feed(r, {"EXEC"}, "*1\r\n$9\r\napi_mutex\r\n");
  fcall(r, "FCALL", "mutex_lock", {"jobs"}, {"tok-a", "3000"}, ":1\r\n", 2'000'000);
  REQUIRE(rec.ops.size() == 1);
  CHECK(rec.ops[0].kind == lock_op_kind::acquire);
  CHECK_FALSE(rec.ops[0].inferred);
}
