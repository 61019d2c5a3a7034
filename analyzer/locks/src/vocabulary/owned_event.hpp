// A lock_event that outlives the sink call that delivered it: its texts, addresses and
// group record copied into storage it owns, its views pointed at them. A stage that
// holds events back keeps these; once warm, assigning another event reuses the
// strings' capacity.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockscope/locks/lock_event.hpp"

namespace lockscope::locks {

class owned_event {
 public:
  owned_event() = default;
  explicit owned_event(const lock_event& e) { assign(e); }
  owned_event(const owned_event& o) { assign(o.e_); }
  owned_event& operator=(const owned_event& o) {
    if (this != &o) assign(o.e_);
    return *this;
  }

  void assign(const lock_event& e) {
    e_ = e;
    e_.lock = own(lock_, e.lock);
    e_.owner = own(owner_, e.owner);
    e_.client = own(client_text_, e.client);
    e_.server = own(server_text_, e.server);
    e_.lock_server = own(lock_server_, e.lock_server);
    e_.found.other_owner = own(other_owner_, e.found.other_owner);
    e_.closed_holder = own(closed_holder_, e.closed_holder);
    e_.redirect_to = own(redirect_to_, e.redirect_to);
    if (e.client_endpoint != nullptr) {
      client_ = *e.client_endpoint;
      e_.client_endpoint = &client_;
    }
    if (e.server_endpoint != nullptr) {
      server_ = *e.server_endpoint;
      e_.server_endpoint = &server_;
    }
    if (e.group != nullptr) {
      group_ = *e.group;
      group_.acquired_on = own(acquired_on_, e.group->acquired_on);
      group_.owners = own(owners_, e.group->owners);
      group_.tried = own(tried_, e.group->tried);
      e_.group = &group_;
    }
  }

  const lock_event& event() const noexcept { return e_; }
  // Its fields other than texts and addresses may be changed in place.
  lock_event& event() noexcept { return e_; }
  // Names another owner (kept in its own copy).
  void set_owner(std::string_view owner) { e_.owner = own(owner_, owner); }

 private:
  struct texts {
    std::vector<std::string> held;
    std::vector<std::string_view> views;
  };

  static std::string_view own(std::string& to, std::string_view from) {
    to.assign(from);
    return to;
  }
  static std::span<const std::string_view> own(texts& to, std::span<const std::string_view> from) {
    to.held.assign(from.begin(), from.end());
    to.views.assign(to.held.begin(), to.held.end());
    return to.views;
  }

  lock_event e_;
  std::string lock_, owner_, client_text_, server_text_, lock_server_, other_owner_, closed_holder_, redirect_to_;
  endpoint client_{}, server_{};
  lock_group group_;
  texts acquired_on_, owners_, tried_;
};

}  // namespace lockscope::locks
