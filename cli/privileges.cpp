#include "privileges.hpp"

#include <cerrno>
#include <cstring>

#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "option_checks.hpp"

namespace lockscope::cli {

namespace {

// glibc has no capset wrapper; libcap for two syscalls is not worth a dependency.
bool set_capabilities(const __user_cap_data_struct (&data)[_LINUX_CAPABILITY_U32S_3]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return ::syscall(SYS_capset, &header, &data) == 0;
}

bool get_capabilities(__user_cap_data_struct (&data)[_LINUX_CAPABILITY_U32S_3]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return ::syscall(SYS_capget, &header, &data) == 0;
}

bool fail(const char* command, const std::string& what) {
  live::print_diagnostic("lockscope {}: {}\n", command, what);
  return false;
}

bool fail_errno(const char* command, const std::string& what) {
  return fail(command, fmt::format("{}: {}", what, std::strerror(errno)));
}

// Ambient first (it is cleared by hand only), then the three other sets.
bool clear_capabilities(const char* command) {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    return fail_errno(command, "cannot clear the ambient capabilities");
  }
  const __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
  if (!set_capabilities(none)) return fail_errno(command, "cannot drop the capabilities");
  __user_cap_data_struct now[_LINUX_CAPABILITY_U32S_3] = {};
  if (!get_capabilities(now)) return fail_errno(command, "cannot read the capabilities");
  for (const auto& d : now) {
    if (d.effective != 0 || d.permitted != 0 || d.inheritable != 0) {
      return fail(command, "capabilities are still held after dropping them");
    }
  }
  return true;
}

}  // namespace

void add_privilege_options(CLI::App& cmd, privilege_options& o) {
  auto* user = cmd.add_option("-Z,--relinquish-privileges", o.user,
                              "Live: once the capture is open, switch to USER (its groups, gid and uid) and drop every "
                              "capability. Started as root without -Z: `nobody`. Files written after it (-o, a "
                              "flight-recorder directory) are created as USER, in directories USER may write")
                   ->type_name("USER")
                   ->check(not_empty("a user name"));
  cmd.add_flag("--no-drop", o.no_drop, "Live, started as root: keep root and its capabilities (no -Z, no `nobody`)")
      ->excludes(user);
}

bool drop_privileges(const char* command, const privilege_options& o) {
  if (o.no_drop) return true;
  const bool root = ::geteuid() == 0;
  if (root || !o.user.empty()) {
    const std::string name = o.user.empty() ? std::string("nobody") : o.user;
    errno = 0;
    const passwd* pw = ::getpwnam(name.c_str());
    if (pw == nullptr) {
      return fail(command, errno != 0 ? fmt::format("-Z: cannot look up user '{}': {}", name, std::strerror(errno))
                                      : fmt::format("-Z: unknown user '{}'", name));
    }
    const uid_t uid = pw->pw_uid;
    const gid_t gid = pw->pw_gid;
    if (!root && uid != ::getuid()) {
      return fail(command, fmt::format("-Z {}: only root can switch to another user (running as uid {})", name,
                                       ::getuid()));
    }
    if (root) {
      if (::initgroups(name.c_str(), gid) != 0) return fail_errno(command, fmt::format("-Z {}: setgroups", name));
      if (::setgid(gid) != 0) return fail_errno(command, fmt::format("-Z {}: setgid({})", name, gid));
      if (::setuid(uid) != 0) return fail_errno(command, fmt::format("-Z {}: setuid({})", name, uid));
      if (uid != 0 && (::setuid(0) == 0 || ::seteuid(0) == 0)) {
        return fail(command, fmt::format("-Z {}: root could be regained after setuid({})", name, uid));
      }
      if (o.user.empty()) {
        live::print_diagnostic("lockscope {}: started as root: running as `nobody` from now on (-Z USER to choose "
                           "another user, --no-drop to keep root)\n",
                   command);
      }
    }
  }
  return clear_capabilities(command);
}

}  // namespace lockscope::cli
