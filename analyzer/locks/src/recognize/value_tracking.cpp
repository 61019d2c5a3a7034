// Lock values (SET tokens, node-redlock values) followed through the calls that carry
// them (see value_flow.hpp and "Value flow" in lock_recognizer.hpp): which script a
// value met first tells an unseen acquire script from an extend script of the same
// shape, and a value's history tells a real refused release from a failed attempt's
// clean-up or a retry. Also Redisson's unlock latches, which make a retried unlock
// replay its first reply.
#include <algorithm>

#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

script_op lock_recognizer::state::learned_role(const sha_entry& e) noexcept {
  if (e.acquire_votes >= 2 && e.extend_votes * 4 <= e.acquire_votes) return script_op::acquire;
  if (e.extend_votes >= 2 && e.acquire_votes * 4 <= e.extend_votes) return script_op::extend;
  return script_op::none;
}

void lock_recognizer::state::vote_first_acquire(value_record& rec) {
  if (!rec.first_is_sha || rec.first_voted) return;
  rec.first_voted = true;
  static constexpr char digits[] = "0123456789abcdef";
  for (std::size_t i = 0; i < 20; ++i) {
    vote_scratch[2 * i] = digits[rec.first_sha[i] >> 4];
    vote_scratch[2 * i + 1] = digits[rec.first_sha[i] & 15];
  }
  if (auto* e = by_sha.find({vote_scratch.data(), 40}); e != nullptr && e->value.inferred) ++e->value.acquire_votes;
}

script_op lock_recognizer::state::value_role(sha_entry& se, std::string_view server, std::string_view key,
                                             std::string_view value, const std::array<std::uint8_t, 20>& sha,
                                             bool answered_yes, std::int64_t at_us) {
  script_op by_flow = script_op::acquire;  // a fresh value
  if (value_record* rec = flow.find(value_key(server, key, value))) {
    if (!rec->first_is_sha || rec->first_sha != sha) {
      by_flow = script_op::extend;
      ++se.extend_votes;
      vote_first_acquire(*rec);
    } else {
      by_flow = rec->first_role;
      // An acquire cannot succeed while its own value still holds the key.
      if (rec->held && answered_yes && rec->deadline_us > at_us) {
        by_flow = script_op::extend;
        ++se.extend_votes;
      }
    }
  }
  const script_op learned = learned_role(se);
  return learned != script_op::none ? learned : by_flow;
}

void lock_recognizer::state::track_value(lock_operation& op) {
  if (op.owner.empty() || op.lock.empty()) return;
  const std::uint64_t k = value_key(op.server_text, op.lock, op.owner);
  value_record* rec = flow.find(k);
  const std::int64_t at = op.at_us();
  auto fresh = [&](script_op role) -> value_record& {
    value_record& r = flow.insert(k);
    r.first_is_sha = current_is_script;
    r.first_sha = current_sha;
    r.first_role = role;
    return r;
  };
  auto holds = [&](value_record& r) {
    r.held = true;
    r.release_refused = false;
    r.deadline_us = op.lease_ms >= 0 ? at + std::min<std::int64_t>(op.lease_ms, INT64_MAX / 2000) * 1000 : -1;
  };
  switch (op.kind) {
    case lock_op_kind::acquire:
      if (rec == nullptr) rec = &fresh(script_op::acquire);
      else if (op.outcome == op_outcome::contended && rec->held && rec->deadline_us > at) op.outcome = op_outcome::none;
      if (op.outcome == op_outcome::ok) holds(*rec);
      return;
    case lock_op_kind::renew:
      if (rec == nullptr) rec = &fresh(script_op::extend);
      if (op.outcome == op_outcome::ok) holds(*rec);
      return;
    case lock_op_kind::unlock:
      if (rec == nullptr) {
        // A value not seen before (acquired before the capture began): its refused
        // release is reported once; the client's retries of it are not.
        if (op.outcome == op_outcome::rejected || op.outcome == op_outcome::expired) {
          value_record& r = fresh(script_op::none);
          r.first_voted = true;  // no acquire seen: nothing to vote for
          r.held = true;         // (perhaps: not a failed attempt's clean-up)
          r.release_refused = true;
        }
        return;
      }
      if (op.outcome == op_outcome::ok) {
        vote_first_acquire(*rec);
        flow.erase(k);
      } else if (op.outcome == op_outcome::rejected || op.outcome == op_outcome::expired) {
        if (!rec->held || rec->release_refused) {
          op.outcome = op_outcome::none;  // a failed attempt's clean-up, or a retried release
        } else {
          vote_first_acquire(*rec);
          rec->release_refused = true;
        }
      }
      return;
    default:
      return;
  }
}

bool lock_recognizer::state::replayed_unlock(std::string_view server, std::string_view latch) {
  const std::uint64_t k = latch_key(server, latch);
  if (flow.find(k) != nullptr) return true;
  flow.insert(k);
  return false;
}

}  // namespace lockscope::locks
