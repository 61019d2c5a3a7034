// Least privilege for live capture (`-Z USER`, as tcpdump): once the capture handle
// (and any listening socket) is open, the process needs no privilege at all.
//
//   auto live = open_live(...);                       // needs root or CAP_NET_RAW
//   if (!drop_privileges("analyze", o.privileges)) return 2;
//
// drop_privileges():
//   - started as root: switch to USER (-Z), else to `nobody` (said on stderr); the
//     supplementary groups become USER's (initgroups), then setgid, setuid to USER's
//     ids; `--no-drop` keeps root and every capability;
//   - any start (root or not, e.g. systemd's AmbientCapabilities=CAP_NET_RAW): every
//     capability is cleared afterwards: effective, permitted, inheritable and ambient
//     sets empty. Regaining root is checked to fail.
// Files the run opens later (-o, a flight-recorder directory) are opened as USER: their
// directory must be writable by USER.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace lockscope::cli {

struct privilege_options {
  std::string user;      // -Z; empty: `nobody` when root
  bool no_drop = false;  // --no-drop
};

// Registers -Z/--relinquish-privileges USER and --no-drop on `cmd`.
void add_privilege_options(CLI::App& cmd, privilege_options& o);

// Prints "lockscope COMMAND: ..." and returns false when the drop failed (unknown user,
// a call refused); the caller stops then: it never runs with more privilege than asked.
bool drop_privileges(const char* command, const privilege_options& o);

}  // namespace lockscope::cli
