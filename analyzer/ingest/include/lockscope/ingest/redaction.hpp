// Which arguments of a Redis command are secrets, so that no analyzer output shows
// them (unless the user asks with --show-secrets). It fails closed: when a command's
// shape is unusual (a keyword without its value, an unknown CONFIG parameter whose
// name mentions a password), the doubtful argument is masked.
//
//   if (may_carry_secrets(name)) { args = ...; find_secrets(args, positions); }
//
// Covered: AUTH; HELLO ... AUTH user pw; MIGRATE ... AUTH pw | AUTH2 user pw (up to
// KEYS); CONFIG SET for any parameter naming a password or auth (requirepass,
// masterauth, tls-key-file-pass, ...); ACL SETUSER rules >pw, <pw, #hash, !hash;
// SENTINEL SET <master> auth-pass|auth-user ...; SENTINEL CONFIG SET sentinel-pass|
// sentinel-user. Every argument position counts, however long the command.
//
// Replies are redacted too (redact_reply): a reply that echoes a masked argument (an
// "unknown command ... with args beginning with: ... 'the password'" error) has it
// masked the same way, even cut short as Redis cuts long arguments; CONFIG GET and
// SENTINEL CONFIG GET values of the same credential parameters; the password rules in
// ACL LIST (#<sha256>, >pw: the word becomes #****) and the "passwords" of ACL GETUSER.
// Only replies to commands that reply_checks() names are looked at: the rest cost
// nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "lockscope/ingest/message.hpp"

namespace lockscope::ingest {

// False for every command that can never carry a secret: callers skip splitting
// the arguments of those (nearly all of them, EVAL included).
bool may_carry_secrets(std::string_view command_name) noexcept;

// Appends to `positions` the index of every secret in `args` (args[0] is the command
// name), in increasing order. `positions` is not cleared.
void find_secrets(std::span<const std::string_view> args, std::vector<std::uint32_t>& positions);

// What a reply may show that is secret: a set of these bits.
enum reply_check : std::uint8_t {
  reply_echoes_secrets = 1,   // the command had masked arguments: the reply may quote them
  reply_config_values = 2,    // CONFIG GET, SENTINEL CONFIG GET: name/value pairs
  reply_acl_rules = 4,        // ACL LIST: "user u on #<sha256> ~* +@all"
  reply_acl_passwords = 8,    // ACL GETUSER: the value of "passwords"
  reply_every_string = 16,    // every string: too many secrets to look for one by one
};

// The reply_check bits for a command's reply (args[0] is the command name; call it
// for commands may_carry_secrets names). `has_secrets`: find_secrets marked some of
// its arguments.
std::uint8_t reply_checks(std::span<const std::string_view> args, bool has_secrets) noexcept;

// Masks in `reply` what `checks` names: every occurrence of each of `secrets` (the
// masked arguments' text) in its strings, and the values the other checks name.
// True when anything was masked.
bool redact_reply(std::uint8_t checks, std::span<const std::string_view> secrets, message& reply);

// A MONITOR line (`1700000000.123456 [0 127.0.0.1:5000] "AUTH" "pw"`, each argument
// quoted and escaped as Redis's sdscatrepr writes it) with the arguments find_secrets
// names replaced by "****", appended to `out`. False (and `out` unchanged) when the
// line holds no secret: Redis 6.2+ masks AUTH, HELLO, MIGRATE and CONFIG SET itself,
// older servers showed some of them.
bool mask_monitor_line(std::string_view line, std::string& out);

// `text` with every occurrence of each of `secrets` replaced by "****" (see
// redact_reply); appended to `out`. True when anything was replaced.
bool mask_echoes(std::string_view text, std::span<const std::string_view> secrets, std::string& out);

}  // namespace lockscope::ingest
