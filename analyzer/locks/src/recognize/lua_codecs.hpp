// The codec libraries Redis gives every script, for the sandbox (lua_sandbox.hpp):
// `cmsgpack` (pack, unpack: job queues pass a token, a lease and lists of ids packed in
// one argument) on msgpuck, and `cjson` (encode, decode: a job's options stored as JSON)
// from lua-cjson, the library Redis itself embeds. Their input is the untrusted script's:
// each call's work (bytes read and written, values made) is charged to the run's
// instruction budget through `charge`, nesting is bounded, and malformed input is a
// script error, never a crash. Private to the recognizer.
#pragma once

#include <cstddef>

struct lua_State;

namespace lockscope::locks::effect {

// Adds `units` of work to the run's budget; raises a Lua error (does not return) once
// the budget is spent.
using charge_work = void (*)(lua_State* L, std::size_t units);

// The deepest table cmsgpack packs (deeper ones pack as nil, as Redis's does) or unpacks
// (deeper input is refused).
inline constexpr int msgpack_max_nesting = 16;

// Installs `cmsgpack` and `cjson` as globals of L (run inside a protected call).
void open_codecs(lua_State* L, charge_work charge);

}  // namespace lockscope::locks::effect
