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
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace lockscope::ingest {

// False for every command that can never carry a secret: callers skip splitting
// the arguments of those (nearly all of them, EVAL included).
bool may_carry_secrets(std::string_view command_name) noexcept;

// Appends to `positions` the index of every secret in `args` (args[0] is the command
// name), in increasing order. `positions` is not cleared.
void find_secrets(std::span<const std::string_view> args, std::vector<std::uint32_t>& positions);

}  // namespace lockscope::ingest
