// Unseen releases answered nil: undecided until the lock's next operation says what the
// call did (see defer_nil_release in recognizer_state.hpp). A script seen as text is read
// by its effect (a release that answers nil whatever it did is decided by the value's
// history there); an unseen one is only inferred, and a nil from it is either a refusal
// (the key was lost) or a release that says nothing. Only the traffic after it tells:
// another owner taking the key inside the holder's lease is only possible if the call
// deleted it.
#include <algorithm>

#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

lock_recognizer::state::nil_votes& lock_recognizer::state::votes_of(const std::array<std::uint8_t, 20>& sha) {
  for (auto& [s, v] : nil_release_votes) {
    if (s == sha) return v;
  }
  // A few SHA1s at most answer nil so (bounded: the oldest forgotten).
  if (nil_release_votes.size() >= 64) nil_release_votes.erase(nil_release_votes.begin());
  return nil_release_votes.emplace_back(sha, nil_votes{}).second;
}

bool lock_recognizer::state::defer_nil_release(command_call& c, const script_class& cls,
                                               std::span<const std::string_view> keys,
                                               std::span<const std::string_view> argv) {
  if (keys.size() != 1 || cls.op != script_op::release || c.reply.kind != reply_view::shape::null) return false;
  if (cls.owner_argv == 0 || cls.owner_argv > argv.size()) return false;
  lock_operation& op = c.op;
  const std::string_view value = argv[cls.owner_argv - 1];
  const std::int64_t at = op.at_us();
  const value_record* rec = flow.find(value_key(op.server_text, keys[0], value));
  // Not the holder, or past its lease: a refusal as before (the lease ran out).
  if (rec == nullptr || !rec->held || (rec->deadline_us >= 0 && rec->deadline_us <= at)) return false;
  op.family = cls.family;
  op.shared = false;
  op.lock = keys[0];
  op.owner = value;
  op.channel = {};
  op.lease_ms = -1;
  op.kind = lock_op_kind::unlock;
  op.inferred = true;
  const nil_votes& votes = votes_of(current_sha);
  if (votes.releases >= nil_release_proof && !votes.refused) {
    op.outcome = op_outcome::ok;  // this SHA1's nil was a release every time it was decided
    emit(op);
    return true;
  }
  if (undecided_nils.size() >= max_undecided_nils) return false;
  undecided_nil& u = undecided_nils.emplace_back();
  u.keep(op);
  u.op.outcome = op_outcome::rejected;
  u.sha = current_sha;
  u.deadline_us = rec->deadline_us;
  return true;
}

void lock_recognizer::state::send_undecided(undecided_nil& u, bool released) {
  lock_operation o = u.restored();
  o.outcome = released ? op_outcome::ok : op_outcome::rejected;
  emit(o);
}

void lock_recognizer::state::decide_nil_releases(const lock_operation& op) {
  if (op.lock.empty() || op.kind == lock_op_kind::subscribe || op.kind == lock_op_kind::unsubscribe ||
      op.kind == lock_op_kind::message || op.kind == lock_op_kind::cluster_link) {
    return;
  }
  for (std::size_t i = 0; i < undecided_nils.size(); ++i) {
    undecided_nil& u = undecided_nils[i];
    if (u.lock != op.lock || u.server_text != op.server_text) continue;
    const std::int64_t at = op.at_us();
    const bool lease_over = u.deadline_us >= 0 && at >= u.deadline_us;
    const bool mine = op.owner == u.owner;
    int decision = 0;  // 1 released, -1 refused
    if (lease_over) {
      decision = -1;  // the lease ran out first: no sign of a deletion (not held against the SHA1)
    } else if (!mine && op.kind == lock_op_kind::acquire && op.outcome == op_outcome::ok) {
      decision = 1;
    } else if (mine && (op.kind == lock_op_kind::acquire || op.kind == lock_op_kind::renew ||
                        op.kind == lock_op_kind::unlock)) {
      decision = -1;
    } else if (!mine && op.kind == lock_op_kind::acquire && op.outcome == op_outcome::contended &&
               op.request_us > u.op.at_us()) {
      decision = -1;  // asked after the nil came back, and the key was still there
    }
    if (decision == 0) continue;
    undecided_nil taken = std::move(undecided_nils[i]);
    undecided_nils.erase(undecided_nils.begin() + static_cast<std::ptrdiff_t>(i));
    nil_votes& votes = votes_of(taken.sha);
    if (decision > 0) ++votes.releases;
    else if (!lease_over) votes.refused = true;
    send_undecided(taken, decision > 0);
    return;  // (one undecided call per lock at a time: its holder's)
  }
}

void lock_recognizer::state::settle_nil_releases(std::uint64_t connection) {
  for (std::size_t i = 0; i < undecided_nils.size();) {
    if (undecided_nils[i].op.connection != connection) {
      ++i;
      continue;
    }
    undecided_nil taken = std::move(undecided_nils[i]);
    undecided_nils.erase(undecided_nils.begin() + static_cast<std::ptrdiff_t>(i));
    send_undecided(taken, false);
  }
}

}  // namespace lockscope::locks
