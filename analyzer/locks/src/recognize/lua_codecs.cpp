// cmsgpack and cjson for the sandbox (see lua_codecs.hpp). Lua raises errors with
// longjmp: nothing here holds a C++ object across a call into Lua. cmsgpack.pack sizes
// its output in a first pass over the values and writes it into a Lua userdata (counted
// by the run's allocator) in a second, so a raise mid-way leaks nothing.
#include "recognize/lua_codecs.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lua-cjson.h>
}
#include <msgpuck.h>

namespace lockscope::locks::effect {

namespace {

charge_work charge_of(lua_State* L) {
  return reinterpret_cast<charge_work>(lua_touserdata(L, lua_upvalueindex(1)));
}

// ---- cmsgpack.unpack: Redis's lua_cmsgpack semantics (numbers, strings and binaries
// as Lua values, arrays and maps as tables, every object of the input returned).

// Whether one whole object starts at p within [p, end), nested at most
// msgpack_max_nesting deep (p moves past it). msgpuck's own mp_check is not used: its
// item count is an int that a 32-bit array header overflows, passing input it then
// reads past the end of.
bool valid_object(const unsigned char*& p, const unsigned char* end, int depth) {
  auto left = [&] { return static_cast<std::size_t>(end - p); };
  auto be = [&](std::size_t at, std::size_t bytes) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i) v = v << 8 | p[at + i];
    return v;
  };
  if (left() == 0) return false;
  const unsigned char c = *p;
  std::size_t head = 1;
  std::uint64_t payload = 0, items = 0;
  if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
    head = 1;
  } else if (c >= 0xa0 && c <= 0xbf) {
    payload = c & 0x1f;
  } else if (c >= 0x90 && c <= 0x9f) {
    items = c & 0x0f;
  } else if (c >= 0x80 && c <= 0x8f) {
    items = 2u * (c & 0x0f);
  } else {
    switch (c) {
      case 0xcc: case 0xd0: head = 2; break;
      case 0xcd: case 0xd1: head = 3; break;
      case 0xce: case 0xd2: case 0xca: head = 5; break;
      case 0xcf: case 0xd3: case 0xcb: head = 9; break;
      case 0xd9: case 0xc4: head = 2; break;
      case 0xda: case 0xc5: head = 3; break;
      case 0xdb: case 0xc6: head = 5; break;
      case 0xdc: case 0xde: head = 3; break;
      case 0xdd: case 0xdf: head = 5; break;
      default: return false;  // an extension type, or 0xc1 (never used)
    }
    if (left() < head) return false;
    switch (c) {
      case 0xd9: case 0xc4: case 0xda: case 0xc5: case 0xdb: case 0xc6: payload = be(1, head - 1); break;
      case 0xdc: case 0xdd: items = be(1, head - 1); break;
      case 0xde: case 0xdf: items = 2 * be(1, head - 1); break;
      default: break;
    }
  }
  if (left() < head || left() - head < payload) return false;
  p += head + payload;
  if (items == 0) return true;
  // Each item is a byte at least: a count beyond what is left is refused at once.
  if (depth >= msgpack_max_nesting || items > left()) return false;
  for (std::uint64_t i = 0; i < items; ++i) {
    if (!valid_object(p, end, depth + 1)) return false;
  }
  return true;
}

void unpack_value(lua_State* L, const char** p, int depth, charge_work charge) {
  charge(L, 1);
  luaL_checkstack(L, 3, "cmsgpack: too deep");
  switch (mp_typeof(**p)) {
    case MP_NIL: mp_decode_nil(p); lua_pushnil(L); return;
    case MP_BOOL: lua_pushboolean(L, mp_decode_bool(p) ? 1 : 0); return;
    case MP_UINT: lua_pushnumber(L, static_cast<lua_Number>(mp_decode_uint(p))); return;
    case MP_INT: lua_pushnumber(L, static_cast<lua_Number>(mp_decode_int(p))); return;
    case MP_FLOAT: lua_pushnumber(L, static_cast<lua_Number>(mp_decode_float(p))); return;
    case MP_DOUBLE: lua_pushnumber(L, static_cast<lua_Number>(mp_decode_double(p))); return;
    case MP_STR:
    case MP_BIN: {
      std::uint32_t len = 0;
      const char* s = mp_typeof(**p) == MP_STR ? mp_decode_str(p, &len) : mp_decode_bin(p, &len);
      charge(L, len / 16);
      lua_pushlstring(L, s, len);
      return;
    }
    case MP_ARRAY:
    case MP_MAP: {
      const bool map = mp_typeof(**p) == MP_MAP;
      const std::uint32_t n = map ? mp_decode_map(p) : mp_decode_array(p);
      // The count is the input's, checked against its length (valid_object).
      const int hint = static_cast<int>(n < 256 ? n : 256);
      lua_createtable(L, map ? 0 : hint, map ? hint : 0);
      for (std::uint32_t i = 0; i < n; ++i) {
        if (map) {
          unpack_value(L, p, depth + 1, charge);
          if (lua_isnil(L, -1)) luaL_error(L, "cmsgpack: a nil map key");
          unpack_value(L, p, depth + 1, charge);
          lua_rawset(L, -3);
        } else {
          unpack_value(L, p, depth + 1, charge);
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
      }
      return;
    }
    default: luaL_error(L, "cmsgpack: an extension type the sandbox does not read");
  }
}

int msgpack_unpack(lua_State* L) {
  const charge_work charge = charge_of(L);
  std::size_t len = 0;
  const char* s = luaL_checklstring(L, 1, &len);
  charge(L, len / 16 + 1);
  const char* p = s;
  const char* const end = s + len;
  int count = 0;
  while (p < end) {
    const auto* check = reinterpret_cast<const unsigned char*>(p);
    if (!valid_object(check, reinterpret_cast<const unsigned char*>(end), 0)) {
      return luaL_error(L, "Bad data format in input.");
    }
    luaL_checkstack(L, 2, "cmsgpack: too many objects");
    unpack_value(L, &p, 0, charge);
    ++count;
  }
  return count;
}

// ---- cmsgpack.pack: each argument encoded as Redis's lua_cmsgpack encodes it
// (integral numbers as the smallest integer, others as float when exact, else double;
// a table with keys 1..n as an array, any other as a map; too deep a table as nil).

struct pack_cursor {
  char* out = nullptr;  // nullptr: only measuring
  std::size_t size = 0;
};

bool table_is_array(lua_State* L, int t) {
  std::size_t count = 0;
  lua_Number max = 0;
  lua_pushnil(L);
  while (lua_next(L, t) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TNUMBER) {
      lua_pop(L, 1);
      return false;
    }
    const lua_Number n = lua_tonumber(L, -1);
    if (n <= 0 || n != std::floor(n)) {
      lua_pop(L, 1);
      return false;
    }
    if (n > max) max = n;
    ++count;
  }
  return max == static_cast<lua_Number>(count);
}

void pack_value(lua_State* L, int index, int depth, pack_cursor& c, charge_work charge) {
  charge(L, 1);
  luaL_checkstack(L, 4, "cmsgpack: too deep");
  const int t = index < 0 ? lua_gettop(L) + index + 1 : index;
  char head[16];
  char* const w = c.out != nullptr ? c.out + c.size : head;
  switch (lua_type(L, t)) {
    case LUA_TBOOLEAN: c.size += mp_encode_bool(w, lua_toboolean(L, t) != 0) - w; return;
    case LUA_TNUMBER: {
      const lua_Number n = lua_tonumber(L, t);
      if (std::isfinite(n) && n == std::floor(n) && std::fabs(n) < 9.2e18) {
        const auto v = static_cast<std::int64_t>(n);
        c.size += (v >= 0 ? mp_encode_uint(w, static_cast<std::uint64_t>(v)) : mp_encode_int(w, v)) - w;
      } else if (static_cast<double>(static_cast<float>(n)) == n) {
        c.size += mp_encode_float(w, static_cast<float>(n)) - w;
      } else {
        c.size += mp_encode_double(w, n) - w;
      }
      return;
    }
    case LUA_TSTRING: {
      std::size_t len = 0;
      const char* s = lua_tolstring(L, t, &len);
      if (len > UINT32_MAX) luaL_error(L, "cmsgpack: string too long");
      charge(L, len / 16);
      if (c.out == nullptr) c.size += mp_sizeof_str(static_cast<std::uint32_t>(len));
      else c.size += mp_encode_str(w, s, static_cast<std::uint32_t>(len)) - w;
      return;
    }
    case LUA_TTABLE:
      if (depth < msgpack_max_nesting) {
        if (table_is_array(L, t)) {
          const auto n = static_cast<std::uint32_t>(lua_objlen(L, t));
          c.size += mp_encode_array(w, n) - w;
          for (std::uint32_t i = 1; i <= n; ++i) {
            lua_rawgeti(L, t, static_cast<int>(i));
            pack_value(L, -1, depth + 1, c, charge);
            lua_pop(L, 1);
          }
        } else {
          std::uint32_t n = 0;
          lua_pushnil(L);
          while (lua_next(L, t) != 0) {
            lua_pop(L, 1);
            ++n;
          }
          c.size += mp_encode_map(w, n) - w;
          lua_pushnil(L);
          while (lua_next(L, t) != 0) {
            pack_value(L, -2, depth + 1, c, charge);
            pack_value(L, -1, depth + 1, c, charge);
            lua_pop(L, 1);
          }
        }
        return;
      }
      [[fallthrough]];
    default: c.size += mp_encode_nil(w) - w; return;
  }
}

int msgpack_pack(lua_State* L) {
  const charge_work charge = charge_of(L);
  const int n = lua_gettop(L);
  if (n == 0) return luaL_error(L, "MessagePack pack needs input.");
  pack_cursor measure;
  for (int i = 1; i <= n; ++i) pack_value(L, i, 0, measure, charge);
  if (measure.size > (1u << 22)) return luaL_error(L, "cmsgpack: output too large for the sandbox");
  pack_cursor write;
  write.out = static_cast<char*>(lua_newuserdata(L, measure.size + 1));
  for (int i = 1; i <= n; ++i) pack_value(L, i, 0, write, charge);
  lua_pushlstring(L, write.out, write.size);
  return 1;
}

// cjson's encode and decode, charged by the bytes they read and write.
int charged_cjson(lua_State* L) {
  const charge_work charge = charge_of(L);
  std::size_t len = 0;
  if (lua_type(L, 1) == LUA_TSTRING) lua_tolstring(L, 1, &len);
  charge(L, len / 16 + 1);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  if (lua_gettop(L) >= 1 && lua_type(L, 1) == LUA_TSTRING) {
    lua_tolstring(L, 1, &len);
    charge(L, len / 16);
  }
  return lua_gettop(L);
}

}  // namespace

void open_codecs(lua_State* L, charge_work charge) {
  lua_newtable(L);
  for (const auto& [name, f] : {std::pair<const char*, lua_CFunction>{"pack", msgpack_pack}, {"unpack", msgpack_unpack}}) {
    lua_pushstring(L, name);
    lua_pushlightuserdata(L, reinterpret_cast<void*>(charge));
    lua_pushcclosure(L, f, 1);
    lua_settable(L, -3);
  }
  lua_setglobal(L, "cmsgpack");

  lua_pushcfunction(L, luaopen_cjson);
  lua_call(L, 0, 1);
  for (const char* name : {"encode", "decode"}) {
    lua_pushstring(L, name);
    lua_pushlightuserdata(L, reinterpret_cast<void*>(charge));
    lua_pushstring(L, name);
    lua_rawget(L, -4);
    lua_pushcclosure(L, charged_cjson, 2);
    lua_rawset(L, -3);
  }
  // The configuration functions (which change every later call's behaviour) are not
  // the scripts' to call in the sandbox.
  for (const char* name : {"encode_keep_buffer", "encode_max_depth", "decode_max_depth", "encode_number_precision",
                           "encode_sparse_array", "decode_invalid_numbers", "encode_invalid_numbers", "new"}) {
    lua_pushstring(L, name);
    lua_pushnil(L);
    lua_rawset(L, -3);
  }
  lua_setglobal(L, "cjson");
}

}  // namespace lockscope::locks::effect
