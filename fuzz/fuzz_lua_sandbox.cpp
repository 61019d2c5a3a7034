// libFuzzer target for the script sandbox (analyzer/locks/src/recognize/lua_sandbox.hpp)
// and the effect probes over it (script_effect.hpp): the input is an untrusted Redis
// script, run as the recognizer runs a script it has never seen.
//
//   cmake --preset fuzz && cmake --build build/fuzz --target fuzz_lua_sandbox
//   build/fuzz/fuzz/fuzz_lua_sandbox -max_total_time=60 -dict=fuzz/lua_sandbox.dict \
//       /tmp/corpus fuzz/corpus/lua_sandbox
//
// An input that begins `#!` is also read as a Redis Functions library (FUNCTION LOAD's
// payload): its top level run for the names it registers, and each of the first few
// functions probed as the recognizer probes a function (function_library.hpp).
//
// Checked, beyond ASan/UBSan and libFuzzer's own timeout and RSS limit: every run ends
// with a status; a run that returns leaves no more shadow writes than the limit; the
// probes stay within their shared budget (a wall-clock bound per input), and an effect
// found names KEYS and ARGV positions that exist.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "recognize/function_library.hpp"
#include "recognize/lua_sandbox.hpp"
#include "recognize/script_effect.hpp"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lockscope::locks;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Small limits keep each input fast; the defaults are checked by the unit tests.
  effect::sandbox_limits limits;
  limits.instructions = 200'000;
  limits.memory_bytes = 2u << 20;
  limits.writes = 256;
  limits.store_bytes = 256u << 10;
  const std::vector<std::string_view> keys{"lock:a", "lock:a:channel", "lock:b"};
  // ARGV[5]: a msgpack map {token = "owner-1", lockDuration = 30000}, as job queues pass
  // their options (cmsgpack.unpack of untrusted bytes is part of what is fuzzed).
  static const std::string packed = std::string("\x82\xa5token\xa7owner-1\xaclockDuration\xcd\x75\x30", 31);
  const std::vector<std::string_view> argv{"owner-1", "30000", "30000", "0", packed};
  effect::shadow_store store;
  effect::shadow_key held;
  held.kind = effect::shadow_key::type::hash;
  held.fields.emplace_back("owner-1", "1");
  held.pttl_ms = 5000;
  store.keys["lock:b"] = held;
  effect::shadow_key members;  // a sorted set: the owner's member beside a writer's flag
  members.kind = effect::shadow_key::type::zset;
  members.members = {{"__write__", 1700000005000.0}, {"owner-1", 1700000005000.0}};
  members.pttl_ms = 5000;
  store.keys["lock:a:channel"] = members;
  const auto start = std::chrono::steady_clock::now();
  const effect::run_result r = effect::run_script(text, keys, argv, store, limits);
  if (r.writes.size() > limits.writes) fail("more writes than the limit");
  const effect::script_effect e = effect::analyse_script(text, keys, argv, limits);
  if (e.is_lock()) {
    // A release known only by the sorted set it moves its holder's expiry in names that
    // set, and no lock key (by_expiry_set): its lock is the count an earlier acquire named.
    if (e.by_expiry_set() ? e.expiry_key < 1 : e.lock_key < 1) fail("lock key out of range");
    if (e.lock_key > keys.size() || e.expiry_key > keys.size()) fail("lock key out of range");
    if (effect::argument_at(keys, argv, e.owner_argv).empty()) fail("owner out of range");
    if ((e.lease_argv != 0 && effect::argument_at(keys, argv, e.lease_argv).empty()) || e.channel_key > keys.size()) {
      fail("lease or channel out of range");
    }
    if (e.paths.empty()) fail("an effect with no reply paths");
    if (e.limit_argv != 0 && effect::argument_at(keys, argv, e.limit_argv).empty()) fail("limit out of range");
  }
  std::string_view library, code;
  if (effect::split_library(text, library, code)) {
    effect::shadow_store top_store;
    const effect::run_result top = effect::run_script(effect::library_names_script(code), {}, {}, top_store, limits);
    if (top.outcome == effect::run_result::status::ok && top.reply.type == effect::lua_reply::kind::array) {
      std::size_t probed = 0;
      for (const effect::lua_reply& name : top.reply.items) {
        if (name.type != effect::lua_reply::kind::bulk || !effect::valid_function_name(name.text)) continue;
        if (++probed > 4) break;
        const effect::script_effect f =
            effect::analyse_script(effect::library_function_script(code, name.text), keys, argv, limits);
        if (f.is_lock() && (f.lock_key > keys.size() || effect::argument_at(keys, argv, f.owner_argv).empty())) {
          fail("a function's lock key or owner out of range");
        }
      }
    }
  }
  if (std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) fail("the probes took longer than 5 s");
  return 0;
}
