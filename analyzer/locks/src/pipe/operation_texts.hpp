#pragma once
// The text fields of a lock_operation, in the one order in which the batch and the pipe's
// records lay their copies end to end.
#include "lockscope/locks/lock_operation.hpp"

namespace lockscope::locks {

// Calls f on each of the operation's text fields (string_views into the capture's
// bytes until copied), always in this order.
template <class Op, class F>
void for_each_operation_text(Op& op, F&& f) {
  f(op.lock);
  f(op.owner);
  f(op.channel);
  f(op.message);
  f(op.client_text);
  f(op.server_text);
  f(op.redirect_to);
  f(op.client_name);
}

}  // namespace lockscope::locks
