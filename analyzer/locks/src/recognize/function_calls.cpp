// Redis Functions (Redis 7): FUNCTION LOAD [REPLACE] registers a library's functions,
// FUNCTION DELETE and FUNCTION FLUSH drop them, FCALL / FCALL_RO call one by name with
// KEYS and ARGV as EVALSHA calls a script by its SHA1.
//
// A function is read as a script: the library's text (its `#!lua name=...` line
// stripped, as Redis does) inside a block where `redis.register_function`, in both its
// forms (`('name', fn)` and `{function_name=..., callback=...}`), keeps each callback,
// followed by a call of the function's callback with KEYS and ARGV. That text is learnt
// like an EVAL's (its effect at its first call, script_effect.hpp), keyed by its SHA1,
// and the function's name maps to that SHA1. The names a library registers are found
// by running its top level in the sandbox (its limits hold: a library is untrusted
// input); one that does not compile there, or does what the sandbox does not allow,
// registers nothing here, and its functions' calls are inferred from the traffic. So is
// the common case: a function loaded before the capture began.
#include "lockscope/lock/naming.hpp"
#include "recognize/function_library.hpp"
#include "recognize/lua_sandbox.hpp"
#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;


namespace {

// Whether a function's key (function_key: its server, a NUL, its name) is on `server`.
bool function_on_server(std::string_view key, std::string_view server) noexcept {
  return key.size() > server.size() && key[server.size()] == '\0' && key.substr(0, server.size()) == server;
}

}  // namespace

std::string_view lock_recognizer::state::function_key(std::string_view server, std::string_view name) {
  function_key_scratch.assign(server);
  function_key_scratch.push_back('\0');
  for (const char ch : name) function_key_scratch.push_back(resp::ascii_lower(ch));
  return function_key_scratch;
}

void lock_recognizer::state::forget_library(std::string_view server, std::string_view library) {
  functions.erase_if([&](const auto& f) {
    return !f.value.library.empty() && function_on_server(f.key, server) && resp::iequals(f.value.library, library);
  });
}

void lock_recognizer::state::on_function(command_call& c) {
  const exchange& e = c.e;
  const auto& args = c.args;
  // An error reply changed nothing (a library that exists without REPLACE, a name
  // another library has, a compile error); any other reply stands, `+QUEUED` in MULTI
  // or none (a capture cut short) included.
  if (args.size() < 2 || c.reply.kind == reply_view::shape::error) return;
  const std::string_view server = e.server_text;
  if (resp::iequals(args[1], "FLUSH")) {
    functions.erase_if([&](const auto& f) { return function_on_server(f.key, server); });
    return;
  }
  if (resp::iequals(args[1], "DELETE") && args.size() == 3) {
    forget_library(server, args[2]);
    return;
  }
  if (!resp::iequals(args[1], "LOAD") || args.size() < 3 || args.size() > 4) return;
  if (args.size() == 4 && !resp::iequals(args[2], "REPLACE")) return;
  std::string_view library, code;
  if (!effect::split_library(args.back(), library, code)) return;
  forget_library(server, library);  // REPLACE: the old version's functions are gone

  // Once max_effect_strikes scripts have run out of their budget, libraries are not run
  // either: a capture of hostile texts costs a bounded time.
  if (effect_strikes >= max_effect_strikes) {
    ++stats.unknown_scripts;
    return;
  }
  effect::shadow_store store;
  const effect::run_result top = effect::run_script(effect::library_names_script(code), {}, {}, store);
  if (top.outcome == effect::run_result::status::limit) ++effect_strikes;
  if (top.outcome != effect::run_result::status::ok || top.reply.type != effect::lua_reply::kind::array) {
    ++stats.unknown_scripts;  // not understood: its functions' calls are inferred
    return;
  }
  std::size_t registered = 0;
  for (const effect::lua_reply& item : top.reply.items) {
    if (item.type != effect::lua_reply::kind::bulk || !effect::valid_function_name(item.text)) continue;
    if (++registered > max_functions_per_library) break;
    const std::string text = effect::library_function_script(code, item.text);
    std::string sha = lock::sha1_hex(text);
    ++stats.scripts_seen;
    learn(text, sha);
    functions.insert(function_key(server, item.text), loaded_function{std::move(sha), std::string(library)});
  }
}

void lock_recognizer::state::on_function_call(command_call& c) {
  const auto& args = c.args;
  std::span<const std::string_view> keys, argv;
  if (!split_keys_and_argv(args, keys, argv)) return;
  current_is_script = true;
  clear_current_sha();
  const std::string_view key = function_key(c.e.server_text, args[1]);
  if (c.reply.kind == reply_view::shape::error && c.reply.m != nullptr &&
      c.reply.m->text(c.reply.m->nodes()[c.reply.root]).find("Function not found") != std::string_view::npos) {
    // The server has no such function (flushed or deleted out of view): nothing ran.
    if (auto* gone = functions.find(key); gone != nullptr && !gone->value.library.empty()) {
      functions.erase_if([&](const auto& f) { return &f == gone; });
    }
    return;
  }
  auto* f = functions.find(key);
  if (f == nullptr) {
    // Never seen loaded (the common case: loaded before the capture): inferred under a
    // SHA1 of its server and name, as an EVALSHA of an unseen script.
    std::string sha = lock::sha1_hex(key);
    f = &functions.insert(key, loaded_function{std::move(sha), {}});
  }
  sha_entry* entry = entry_of_sha(f->value.sha);
  if (entry == nullptr) return;
  const script_class cls = entry->cls;
  c.op.inferred = entry->inferred;
  read_script_call(c, cls, entry, keys, argv);
}

}  // namespace lockscope::locks
