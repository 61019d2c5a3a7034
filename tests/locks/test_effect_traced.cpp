// Scripts that build their lock's key inside Lua (traced_calls.cpp), through the whole
// pipeline: a job queue written the way BullMQ writes one (never seen by lockscope, its
// names its own): an add script pushes a job id on a wait list, a take script pops it
// to an active list and SETs `<prefix><id>:lock` to a token carried in a msgpack map
// with PX, an extend script re-SETs the locks of msgpack lists of ids and tokens whose
// token matches, a finish script checks the token and DELs the lock. No lock key is
// among any call's KEYS and no token is an argument of its own.
#include <chrono>
#include <filesystem>

#include "capture_builder.hpp"
#include "helpers.hpp"

using namespace lockscope;
using namespace lockscope::timeline_test;

namespace {

constexpr std::int64_t traced_t0 = 1'700'000'000'000'000;
constexpr std::int64_t traced_ms = 1000;

std::vector<std::string> traced_eval(std::string_view script, std::vector<std::string> keys, std::vector<std::string> argv) {
  std::vector<std::string> args{"EVAL", std::string(script), std::to_string(keys.size())};
  args.insert(args.end(), keys.begin(), keys.end());
  args.insert(args.end(), argv.begin(), argv.end());
  return args;
}

// MessagePack written by hand (short strings and small numbers only), independent of
// the sandbox's decoder.
std::string mp_text(std::string_view s) {
  return std::string(1, static_cast<char>(0xa0 | s.size())) + std::string(s);
}
std::string mp_opts(std::string_view token, std::uint16_t lease_ms) {
  return std::string("\x82", 1) + mp_text("token") + mp_text(token) + mp_text("lockDuration") + "\xcd" +
         static_cast<char>(lease_ms >> 8) + static_cast<char>(lease_ms & 0xff);
}
std::string mp_list(const std::vector<std::string>& items) {
  std::string out(1, static_cast<char>(0x90 | items.size()));
  for (const std::string& s : items) out += mp_text(s);
  return out;
}

// It also caches the job's data with an expiry: a SET PX of a value the call carried
// that is a document, not a holder's token.
const std::string add_script =
    "local id = redis.call('incr', KEYS[2])\n"
    "redis.call('hset', ARGV[1] .. id, 'data', ARGV[2])\n"
    "redis.call('set', ARGV[1] .. id .. ':cached', ARGV[2], 'PX', 60000)\n"
    "redis.call('lpush', KEYS[1], id)\nreturn id\n";
const std::string take_script =
    "local opts = cmsgpack.unpack(ARGV[2])\n"
    "local id = redis.call('rpoplpush', KEYS[1], KEYS[2])\n"
    "if not id then return {0, 0} end\n"
    "local jobKey = ARGV[1] .. id\n"
    "redis.call('set', jobKey .. ':lock', opts['token'], 'PX', opts['lockDuration'])\n"
    "return {redis.call('hget', jobKey, 'data'), id}\n";
const std::string extend_script =
    "local tokens = cmsgpack.unpack(ARGV[2])\nlocal ids = cmsgpack.unpack(ARGV[3])\nlocal failed = {}\n"
    "for i = 1, #ids do\n"
    "  local lockKey = ARGV[1] .. ids[i] .. ':lock'\n"
    "  if redis.call('get', lockKey) == tokens[i] then redis.call('set', lockKey, tokens[i], 'PX', ARGV[4])\n"
    "  else table.insert(failed, ids[i]) end\n"
    "end\nreturn failed\n";
const std::string finish_script =
    "local opts = cmsgpack.unpack(ARGV[2])\nlocal lockKey = ARGV[1] .. ARGV[3] .. ':lock'\n"
    "if redis.call('get', lockKey) ~= opts['token'] then return -2 end\n"
    "redis.call('del', lockKey)\nredis.call('lrem', KEYS[1], -1, ARGV[3])\nreturn 0\n";

}  // namespace

TEST_CASE("traced calls: a job queue's locks on keys built inside its scripts", "[effect][pipeline][traced]") {
  capture_builder b;
  const int producer = b.connect("10.2.0.10", 41000, "10.2.0.2", 6379, traced_t0);
  const int workers[2] = {b.connect("10.2.0.11", 41001, "10.2.0.2", 6379, traced_t0),
                          b.connect("10.2.0.12", 41002, "10.2.0.2", 6379, traced_t0)};
  const std::vector<std::string> wait_keys{"q:wait", "q:id"}, move_keys{"q:wait", "q:active"}, active{"q:active"};
  // A job pushed before the capture began: its take answers an id the shadow cannot
  // know, so neither that take nor the job's finish shows anything (and nothing false).
  std::int64_t t = traced_t0 + 10 * traced_ms;
  b.command(workers[0], t, traced_eval(take_script, move_keys, {"q:", mp_opts("w0-5f3a9c:0", 1200)}),
            resp_array({"{\"old\":1}", "0"}));
  b.command(workers[0], t + 100 * traced_ms,
            traced_eval(finish_script, active, {"q:", mp_opts("w0-5f3a9c:0", 1200), "0"}), resp_int(0));
  t += 500 * traced_ms;
  constexpr int jobs = 6;
  constexpr int killed_job = 3;  // its worker dies holding it: the lock runs out
  for (int j = 1; j <= jobs; ++j) {
    const int w = workers[j % 2];
    const std::string id = std::to_string(j);
    const std::string token = "w" + std::to_string(j % 2) + "-5f3a9c:" + id;
    const std::string data = "{\"i\":" + id + "}";
    b.command(producer, t, traced_eval(add_script, wait_keys, {"q:", data}), resp_int(j));
    b.command(w, t + 10 * traced_ms, traced_eval(take_script, move_keys, {"q:", mp_opts(token, 1200)}), resp_array({data, id}));
    b.command(w, t + 300 * traced_ms,
              traced_eval(extend_script, {"q:stalled"}, {"q:", mp_list({token}), mp_list({id}), "1200"}), "*0\r\n");
    if (j != killed_job) {
      b.command(w, t + 500 * traced_ms, traced_eval(finish_script, active, {"q:", mp_opts(token, 1200), id}), resp_int(0));
    }
    t += 2000 * traced_ms;
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "lockscope_effect_traced_queue.pcap").string();
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == jobs);
  CHECK(rec.count("renewed") == jobs);
  CHECK(rec.count("released") == jobs - 1);
  CHECK(rec.count("expired") == 1);
  CHECK(rec.count("unlock_rejected") == 0);
  CHECK(rec.count("anomaly:overlapping_holders") == 0);
  CHECK(rec.count("anomaly:expired_while_held") == 0);
  CHECK(rec.count("anomaly:unlock_by_non_owner") == 0);
}

// Bull's way (a job queue of its own here): the worker takes the job id itself with a
// blocking BRPOPLPUSH, sent before the job is added and answered when it is, then
// hands the id to a script that SETs the job's lock; the finish script finds the id in
// the active list before it DELs the lock. The shadow's lists follow the plain move at
// its reply's time, so the finish's run answers as the server did.
TEST_CASE("traced calls: a job id the worker moved itself by a blocking pop", "[effect][pipeline][traced]") {
  const std::string take_given =
      "local jobKey = ARGV[1] .. ARGV[2]\n"
      "redis.call('set', jobKey .. ':lock', ARGV[3], 'PX', ARGV[4])\n"
      "return {redis.call('hget', jobKey, 'data'), ARGV[2]}\n";
  const std::string finish_active =
      "local lockKey = ARGV[1] .. ARGV[2] .. ':lock'\n"
      "if redis.call('get', lockKey) ~= ARGV[3] then return -2 end\n"
      "if redis.call('lrem', KEYS[1], -1, ARGV[2]) < 1 then return -3 end\n"
      "redis.call('del', lockKey)\nreturn 0\n";
  capture_builder b;
  const int producer = b.connect("10.2.1.10", 42000, "10.2.1.2", 6379, traced_t0);
  const int worker = b.connect("10.2.1.11", 42001, "10.2.1.2", 6379, traced_t0);
  const int blocking = b.connect("10.2.1.11", 42002, "10.2.1.2", 6379, traced_t0);
  const std::vector<std::string> wait_keys{"q:wait", "q:id"}, active{"q:active"};
  std::int64_t t = traced_t0 + 10 * traced_ms;
  constexpr int jobs = 4;
  for (int j = 1; j <= jobs; ++j) {
    const std::string id = std::to_string(j);
    const std::string token = "c0ffee42-9d1e-4b7a-8f3c-1a2b3c4d5e6f";  // one per queue: every job's
    const std::string data = "{\"i\":" + id + "}";
    // The pop waits 50 ms for the add; its reply comes 0.2 ms after the add's.
    b.command(blocking, t, {"BRPOPLPUSH", "q:wait", "q:active", "5"}, "$" + std::to_string(id.size()) + "\r\n" + id + "\r\n",
              50 * traced_ms + 300);
    b.command(producer, t + 50 * traced_ms, traced_eval(add_script, wait_keys, {"q:", data}), resp_int(j));
    b.command(worker, t + 52 * traced_ms, traced_eval(take_given, active, {"q:", id, token, "1200"}), resp_array({data, id}));
    b.command(worker, t + 400 * traced_ms, traced_eval(finish_active, active, {"q:", id, token}), resp_int(0));
    t += 2000 * traced_ms;
  }
  // Then a job the take script pops itself: the shadow's wait list holds it alone only
  // if each blocking pop took its job when answered, after the add it waited for.
  b.command(producer, t, traced_eval(add_script, wait_keys, {"q:", "{\"i\":5}"}), resp_int(jobs + 1));
  b.command(worker, t + 10 * traced_ms,
            traced_eval(take_script, {"q:wait", "q:active"}, {"q:", mp_opts("w1-c0ffee42:5", 1200)}),
            resp_array({"{\"i\":5}", "5"}));
  const std::string path = (std::filesystem::temp_directory_path() / "lockscope_effect_traced_pop.pcap").string();
  b.write(path);
  const event_recorder rec = events_of(path);
  std::filesystem::remove(path);
  CHECK(rec.count("acquired") == jobs + 1);
  CHECK(rec.count("released") == jobs);
  CHECK(rec.count("anomaly:expired_while_held") == 0);
}
