// The sandbox's kept interpreter image (recognize/lua_sandbox.cpp, interpreter_image)
// against interpreters built anew (sandbox_limits::fresh_interpreter): random runs of
// scripts that change what a later run would see (globals, the libraries, the string
// metatable, cjson's buffer), that stop at budgets of instructions and memory set close
// to where they run out, or that write the shadow, each run both ways, in turn, on
// copies of one store. Every result and every store after must be the same: a run that
// saw an earlier run's changes, or a budget counted from another start, differs.
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "recognize/lua_sandbox.hpp"

using namespace lockscope::locks;
using effect::lua_reply;
using effect::run_result;
using effect::shadow_key;
using effect::shadow_store;

namespace {

bool image_same_reply(const lua_reply& a, const lua_reply& b) {
  if (a.type != b.type || a.integer != b.integer || a.text != b.text || a.items.size() != b.items.size()) return false;
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    if (!image_same_reply(a.items[i], b.items[i])) return false;
  }
  return true;
}

bool image_same_store(const shadow_store& a, const shadow_store& b) {
  if (a.keys.size() != b.keys.size()) return false;
  for (auto i = a.keys.begin(), j = b.keys.begin(); i != a.keys.end(); ++i, ++j) {
    const shadow_key& x = i->second;
    const shadow_key& y = j->second;
    if (i->first != j->first || x.kind != y.kind || x.value != y.value || x.fields != y.fields || x.items != y.items ||
        x.members != y.members || x.pttl_ms != y.pttl_ms) {
      return false;
    }
  }
  return true;
}

std::string image_run_text(const run_result& r) {
  std::string writes;
  for (const auto& w : r.writes) writes += fmt::format(" {}:{}={}/{}", static_cast<int>(w.kind), w.key, w.value, w.ttl);
  return fmt::format("outcome {} reply {} '{}' ({} items) message '{}' writes{}", static_cast<int>(r.outcome),
                     static_cast<int>(r.reply.type), r.reply.text, r.reply.items.size(), r.message, writes);
}

// Changes a fresh interpreter would not carry into the next run.
const std::vector<std::string> image_changes = {
    "seen = (seen or 0) + 1\n",
    "string.len = nil\n",
    "string.upper = function() return 'changed' end\n",
    "getmetatable('').__index = {}\n",
    "setmetatable(_G, {__index = function() return 7 end})\n",
    "redis.call = nil\n",
    "math.pi = 3\n",
    "table.concat = nil\n",
    "cjson.encode = nil\n",
    "cjson = nil\n",  // its configuration collected within the run (a reader below allocates)
    "KEYS[1] = 'other'\n",
    "local big = cjson.encode({a = string.rep('x', 5000)})\n",  // cjson's buffer grows past its first size
    "local packed = cmsgpack.pack({1, 2, 'three'})\n",
};

// What reads them, or writes the shadow, or runs into a budget (N_: a random count).
const std::vector<std::string> image_readers = {
    "return tostring(seen)\n",
    "return tostring(string.len and string.len('abcd'))\n",
    "return ('abc'):upper()\n",
    "return type(redis.call) .. tostring(undefined_name) .. tostring(math.pi)\n",
    "local n = 0 for k in pairs(_G) do n = n + 1 end return n\n",
    "local n = 0 for k in pairs(string) do n = n + 1 end return n\n",
    "return KEYS[1] .. (table.concat and 'concat' or 'none')\n",
    "return type(cjson.encode) .. cjson.decode('{\"a\":[1,2]}').a[2]\n",
    "return cmsgpack.unpack(cmsgpack.pack('x', {N_})) \n",
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', N_) return redis.call('GET', KEYS[1])\n",
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0\n",
    "local s = 0 for i = 1, N_ do s = s + i end return s\n",
    "local t = {} for i = 1, N_ do t[i] = string.rep('y', 40) .. i end return #t\n",
    "local ok = pcall(function() local t = {} for i = 1, N_ do t[#t + 1] = {i} end end) return tostring(ok)\n",
    "error('stopped at ' .. N_)\n",
    "return redis.error_reply('ERR ' .. N_)\n",
};

}  // namespace

TEST_CASE("sandbox image: runs from the kept interpreter image answer as interpreters built anew", "[effect][sandbox]") {
  std::mt19937_64 rng(20261130);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  shadow_store store_image, store_fresh;
  store_image.keys["lock"] = shadow_key{shadow_key::type::string, "owner-1", {}, {}, {}, 30000};
  store_fresh = store_image;
  int limits_met = 0, memory_met = 0;
  for (int run = 0; run < 3000; ++run) {
    std::string text;
    for (std::size_t c = pick(3); c > 0; --c) text += image_changes[pick(image_changes.size())];
    std::string reader = image_readers[pick(image_readers.size())];
    for (std::size_t at; (at = reader.find("N_")) != std::string::npos;) reader.replace(at, 2, std::to_string(1 + pick(4000)));
    text += reader;
    effect::sandbox_limits limits;
    limits.cpu_ms = 60'000;  // never the clock: the two builds run at different speeds
    if (pick(2) == 0) limits.instructions = 2'000 + pick(20'000);
    if (pick(2) == 0) limits.memory_bytes = 16'000 + pick(120'000);  // below, about and above the image's
    const std::vector<std::string> keys = {pick(2) == 0 ? "lock" : fmt::format("k{}", pick(4))};
    const std::vector<std::string> argv = {pick(2) == 0 ? "owner-1" : fmt::format("owner-{}", pick(4)), "x"};
    const std::vector<std::string_view> k(keys.begin(), keys.end()), a(argv.begin(), argv.end());

    const run_result from_image = effect::run_script(text, k, a, store_image, limits);
    effect::sandbox_limits fresh_limits = limits;
    fresh_limits.fresh_interpreter = true;
    const run_result fresh = effect::run_script(text, k, a, store_fresh, fresh_limits);
    INFO("run " << run << ":\n" << text << "instructions " << limits.instructions << ", memory " << limits.memory_bytes);
    INFO("image: " << image_run_text(from_image));
    INFO("fresh: " << image_run_text(fresh));
    REQUIRE(from_image.outcome == fresh.outcome);
    REQUIRE(image_same_reply(from_image.reply, fresh.reply));
    REQUIRE(from_image.message == fresh.message);
    REQUIRE(image_run_text(from_image) == image_run_text(fresh));
    REQUIRE(from_image.state_reads.size() == fresh.state_reads.size());
    REQUIRE(image_same_store(store_image, store_fresh));
    if (fresh.outcome == run_result::status::limit) {
      ++limits_met;
      if (fresh.message.find("memory") != std::string::npos) ++memory_met;
    }
  }
  // The budgets were met often enough to test where they fall.
  CHECK(limits_met > 100);
  CHECK(memory_met > 30);
}
