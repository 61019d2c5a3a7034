// Lock values (SET tokens, node-redlock values) followed through the calls that carry
// them (see value_flow.hpp and "Value flow" in lock_recognizer.hpp): which script a
// value met first tells an unseen acquire script from an extend script of the same
// shape, and a value's history tells a real refused release from a failed attempt's
// clean-up or a retry. Also Redisson's unlock latches, which make a retried unlock
// replay its first reply.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

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
  value_record* rec = flow.find(value_key(server, key, value));
  if (rec == nullptr) {
    // A fresh value: a waiter's first attempt, or (joined mid-run) a hold begun before
    // the capture. Once another unseen script has been refused with many fresh values on
    // this key (a waiter's acquire), a script never refused so, acting for a fresh value
    // with success, extends a hold begun before the capture.
    // (The key's own acquire when it is known, else the server's latest: one client's
    // acquire script is the same for all its keys.)
    const std::uint64_t on_key = acquire_script_key(server, key), on_server = acquire_script_key(server, {});
    if (!answered_yes) {
      if (se.refused_fresh < UINT16_MAX) ++se.refused_fresh;
      if (se.refused_fresh >= acquire_evidence) note_acquire_script(server, key, sha);
    } else if (se.refused_fresh == 0 && se.acquire_votes <= se.extend_votes) {
      // (A release of a value this script met first, extending a hold begun before the
      // capture, votes it an acquire: its extend votes outweigh those.)
      const value_record* a = flow.find(on_key);
      if (a == nullptr) a = flow.find(on_server);
      if (a != nullptr && a->first_sha != sha) {
        by_flow = script_op::extend;
        ++se.extend_votes;
      }
    }
  } else if (rec->release_refused) {
    // Its release was refused (joined mid-run: a hold begun before the capture that ran
    // out): it holds nothing, and an extend checks that it does. A script succeeding for
    // it now takes the key anew, whichever script carried it first: its acquire (no vote:
    // that first script was its release).
    by_flow = script_op::acquire;
  } else {
    if (!rec->first_is_sha || rec->first_sha != sha) {
      by_flow = script_op::extend;
      ++se.extend_votes;
      vote_first_acquire(*rec);
    } else {
      by_flow = rec->first_role;
      // Refused again for a value it met first and that never held the key: a waiter
      // polling with one value (node-redis-lock keeps its value for every wait) retries
      // its acquire, and nothing else is sent again on a refusal. As good a sign of the
      // key's acquire as refusals of fresh values (a client drawing one per attempt).
      if (!answered_yes && !rec->held && rec->first_role == script_op::acquire) note_acquire_script(server, key, sha);
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

// The unseen script `sha` is shown to be the acquire of `key` on `server` (and, until
// another shows otherwise, of that server's keys: one client's acquire script is the
// same for all its keys).
void lock_recognizer::state::note_acquire_script(std::string_view server, std::string_view key,
                                                 const std::array<std::uint8_t, 20>& sha) {
  for (const std::uint64_t k : {acquire_script_key(server, key), acquire_script_key(server, {})}) {
    value_record* a = flow.find(k);
    if (a == nullptr) a = &flow.insert(k);
    a->first_is_sha = true;
    a->first_sha = sha;
    a->first_voted = true;
  }
}

// A key taken by a plain command (`SET NX`, `SETNX`: redislock, redis-py, redsync) is
// acquired by no script: the record naming the key's acquire (acquire_script_key) says a
// command, so value_role reads an unseen script that succeeds for a fresh value there as
// extending a hold begun before the capture (a script refused with fresh values says the
// same of scripts; a plain command's attempt is an acquire by what it is, once is
// enough). The server's record is left to scripts: another client's locks beside these
// may be taken by one.
void lock_recognizer::state::note_command_acquire(std::string_view server, std::string_view key) {
  const std::uint64_t k = acquire_script_key(server, key);
  if (flow.find(k) != nullptr) return;
  value_record& a = flow.insert(k);
  a.first_is_sha = false;
  a.first_voted = true;
}

namespace {

// `op` showed `r`'s value holding its lock: its lease (when it names one) runs from `op`.
void hold(value_record& r, const lock_operation& op) {
  r.held = true;
  r.release_refused = false;
  r.deadline_us = op.lease_ms >= 0 ? op.at_us() + std::min<std::int64_t>(op.lease_ms, INT64_MAX / 2000) * 1000 : -1;
  r.holder_connection = static_cast<std::uint32_t>(op.connection);
}

}  // namespace

// A GET that answered the value, then an EXPIRE that found the key: the value holds the
// lock and its lease runs from here. Without it the value's deadline stays at its
// acquire's, and a holder that keeps its lock by trying to take it again before each
// renewal (node-resque's scheduler: `SET NX` refused, `GET` its own name, `EXPIRE`) is
// read, past its first lease, as refused by itself: a wait of its own, given up when it
// closes. Joined mid-run, the value first met refused is found holding here, so its later
// tries are its own too. Only a value already met: an EXPIRE alone takes nothing.
void lock_recognizer::state::note_checked_renewal(const lock_operation& op) {
  if (op.owner.empty() || op.outcome != op_outcome::ok) return;
  if (value_record* rec = flow.find(value_key(op.server_text, op.lock, op.owner)); rec != nullptr) hold(*rec, op);
}

// A GET that answered the value, then a DEL that removed the key: the value's hold ended
// there, as its release script would end it. Without it the value's record goes on holding
// the key until its lease runs out, and a client that sends one value for all its attempts
// (an owner id per process, released by `WATCH`, `GET`, `DEL`) has its next refused tries
// within that lease read as the holder retrying an acquire it has: no contention, no wait.
void lock_recognizer::state::note_checked_release(const lock_operation& op) {
  if (op.owner.empty() || op.outcome != op_outcome::ok) return;
  const std::uint64_t k = value_key(op.server_text, op.lock, op.owner);
  if (value_record* rec = flow.find(k); rec != nullptr) {
    vote_first_acquire(*rec);
    flow.erase(k);
  }
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
  auto holds = [&](value_record& r) { hold(r, op); };
  switch (op.kind) {
    case lock_op_kind::acquire:
      if (rec == nullptr) {
        if (!current_is_script) note_command_acquire(op.server_text, op.lock);
        rec = &fresh(script_op::acquire);
      } else if (op.outcome == op_outcome::contended && rec->held && rec->deadline_us > at) {
        // The holder retrying an acquire it already has (node-redlock on a server it
        // holds) changes nothing. Over another connection the same value is another
        // process sharing it (a constant value such as "mutex"): a refusal; and once
        // seen shared on any of the server's keys, so is the holder's own next try (RQ's
        // cleaning locks, value `1`: the process holding them tries each queue's again
        // each time it starts a worker, one queue's before another process showed it).
        const std::uint64_t shared = shared_value_key(op.server_text, op.owner);
        if (rec->holder_connection != static_cast<std::uint32_t>(op.connection)) {
          if (flow.find(shared) == nullptr) flow.insert(shared);
        } else if (flow.find(shared) == nullptr) {
          op.outcome = op_outcome::none;
        }
      }
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

// ---- Values drawn by a script and answered in a list ----
//
// A lock whose holder's value is made by the acquire script itself (a counter's next
// number, a random id) and answered in a list (`{1, index, ttl}` / `{0, -1, pttl}`)
// shows that value first in a reply, then as an argument of the holder's later calls
// (its extend, its release). A capture joined after the client loaded its scripts shows
// only SHA1s, so neither script can be read: the items of an unseen script's list reply
// are remembered as candidates on its KEYS[1], and when a later call of another unseen
// script on the same key carries one as an argument, the first is learnt as an acquire
// answering its holder's value at that item, and the second as acting for the holder
// (infer_by_held_value). Until then the acquire's calls make no operation.

namespace lockscope::locks {

using namespace recognizer_detail;

namespace {

constexpr std::size_t max_reply_items = 8;

// A list reply's items (up to max_reply_items) as texts, integers as their digits in
// `digits`; nil or nested items are empty. Returns how many.
std::size_t list_items(const reply_view& r, std::array<std::string_view, max_reply_items>& out,
                       std::array<std::array<char, 24>, max_reply_items>& digits,
                       std::array<std::int64_t, max_reply_items>& integers) {
  if (r.kind != reply_view::shape::array || r.m == nullptr || r.root == message::npos) return 0;
  const message& m = *r.m;
  std::size_t n = 0;
  m.for_each_child(r.root, [&](const message_node& e) {
    if (n == max_reply_items) return false;
    out[n] = {};
    integers[n] = INT64_MIN;
    if (e.type == resp::type::integer) {
      const auto [end, ec] = std::to_chars(digits[n].data(), digits[n].data() + digits[n].size(), e.integer);
      out[n] = std::string_view(digits[n].data(), static_cast<std::size_t>(end - digits[n].data()));
      integers[n] = e.integer;
    } else if ((e.type == resp::type::bulk_string || e.type == resp::type::simple_string) &&
               (e.flags & resp::node_flags::null_bulk) == 0) {
      out[n] = m.text(e);
      if (std::int64_t v = 0; parse_int(out[n], v)) integers[n] = v;
    }
    ++n;
    return true;
  });
  return n;
}

// KEYS[2..] then ARGV, 1-based: the arguments a holder's value or a lease may be.
std::string_view value_arg(std::span<const std::string_view> keys, std::span<const std::string_view> argv,
                           std::size_t i) noexcept {
  if (i == 0) return {};
  const std::size_t extra_keys = keys.size() > 1 ? keys.size() - 1 : 0;
  if (i <= extra_keys) return keys[i];
  i -= extra_keys;
  return i <= argv.size() ? argv[i - 1] : std::string_view();
}

}  // namespace

bool lock_recognizer::state::on_list_reply(command_call& c, sha_entry& entry, std::span<const std::string_view> keys,
                                           std::span<const std::string_view> argv) {
  if (keys.empty() || c.reply.kind != reply_view::shape::array || entry.holder_role != script_op::none) return false;
  std::array<std::string_view, max_reply_items> items;
  std::array<std::array<char, 24>, max_reply_items> digits;
  std::array<std::int64_t, max_reply_items> integers;
  const std::size_t n = list_items(c.reply, items, digits, integers);
  if (n == 0) return false;
  lock_operation& op = c.op;
  if (entry.owner_reply != 0) {
    // A learnt acquire: it holds when the value's item is there and the first item is
    // the one a success answered.
    const std::string_view value = entry.owner_reply <= n ? items[entry.owner_reply - 1u] : std::string_view();
    const std::int64_t as_number = integers[entry.owner_reply - 1u];
    const bool drawn = !value.empty() && (as_number == INT64_MIN || as_number >= 0);  // -1: none drawn
    const bool first_ok = entry.ok_first == reply_first_unknown || entry.owner_reply == 1 ||
                          integers[0] == entry.ok_first;
    op.family = lock_family::set_based;
    op.shared = false;
    op.lock = keys[0];
    op.channel = {};
    op.kind = lock_op_kind::acquire;
    op.inferred = true;
    op.outcome = drawn && first_ok ? op_outcome::ok : op_outcome::contended;
    op.owner = op.outcome == op_outcome::ok ? value : std::string_view();
    op.lease_ms = -1;
    if (std::int64_t lease = 0; parse_int(value_arg(keys, argv, entry.lease_arg), lease) && lease > 0) op.lease_ms = lease;
    emit(op);
    return true;
  }
  // Not learnt yet: remember the items that could be a drawn value (not one of the
  // call's own arguments, not a status 0 / 1 or a negative number).
  if (entry.candidate_replies >= max_candidate_replies) return false;
  bool kept = false;
  std::size_t lease_arg = 0, numbers = 0;
  const std::size_t arg_count = (keys.size() - 1) + argv.size();
  for (std::size_t i = 1; i <= arg_count; ++i) {
    if (std::int64_t v = 0; parse_int(value_arg(keys, argv, i), v)) {
      lease_arg = i;
      ++numbers;
    }
  }
  if (numbers != 1 || lease_arg > 255) lease_arg = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view item = items[i];
    if (item.empty() || item.size() > 128 || (integers[i] != INT64_MIN && integers[i] <= 1)) continue;
    bool is_argument = false;
    for (std::size_t a = 0; a < keys.size() && !is_argument; ++a) is_argument = keys[a] == item;
    for (std::size_t a = 0; a < argv.size() && !is_argument; ++a) is_argument = argv[a] == item;
    if (is_argument) continue;
    const std::uint64_t k = value_key(op.server_text, keys[0], item);
    if (flow.find(k) != nullptr) continue;
    value_record& rec = flow.insert(k);
    rec.first_is_sha = true;
    rec.first_sha = current_sha;
    rec.first_voted = true;  // not a [value, ttl] script's: nothing to vote for
    rec.reply_position = static_cast<std::uint8_t>(i + 1);
    rec.reply_first = integers[0] >= -127 && integers[0] <= 127 ? static_cast<std::int8_t>(integers[0]) : reply_first_unknown;
    rec.reply_lease_arg = static_cast<std::uint8_t>(lease_arg);
    kept = true;
  }
  if (kept) ++entry.candidate_replies;
  stats.values_tracked = flow.size();
  stats.values_evicted = flow.evictions();
  return false;
}

void lock_recognizer::state::learn_drawn_value(value_record& rec) {
  static constexpr char hex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < 20; ++i) {
    vote_scratch[2 * i] = hex[rec.first_sha[i] >> 4];
    vote_scratch[2 * i + 1] = hex[rec.first_sha[i] & 15];
  }
  if (auto* e = by_sha.find({vote_scratch.data(), 40}); e != nullptr && e->value.inferred && e->value.owner_reply == 0) {
    e->value.owner_reply = rec.reply_position;
    e->value.ok_first = rec.reply_first;
    e->value.lease_arg = rec.reply_lease_arg;
  }
  rec.reply_position = 0;
  rec.held = true;  // its acquire was not shown (not learnt yet): held since then, lease unknown
  rec.deadline_us = -1;
}

}  // namespace lockscope::locks

// ---- Holds known only from their renewals ----
//
// A job queue takes and frees a job's lock inside scripts that build the lock's key in
// Lua from a prefix and a job id they pop, and renews it with a script that names it
// (KEYS[1]) and carries the worker's token, the lease and the job id. Joined after the
// client loaded its scripts, the capture shows only SHA1s: the taking and the freeing
// name no key a lock could be read on, and the renewal's shape says little (two
// lease-sized numbers, keys that are not all locks). An unseen script is read as
// renewing its KEYS[1] once it shows that it does: called again on the same key with the
// same value before the first call's lease ran out, answered 1 both times, on a key no
// call the capture read took or freed (no value record but its own renewals'). Its calls
// kept until then that are still inside their lease go out as the renewals they were
// (late, in their order, with their own times), and its later calls answered 1 at once.
// Each is marked ends_unseen: the hold's start and end are not on the wire, so its
// lease's end is no expiry (the timeline says nothing then). A refused call says
// nothing: it may come after the unseen release.

namespace lockscope::locks {

using namespace recognizer_detail;

bool lock_recognizer::state::renew_unseen_hold(command_call& c, sha_entry& entry,
                                               std::span<const std::string_view> keys,
                                               std::span<const std::string_view> argv) {
  const reply_view& reply = c.reply;
  if (keys.empty() || reply.kind != reply_view::shape::integer || reply.integer != 1) return false;
  argument_roles roles;
  if (entry.unseen_hold_value != 0) {
    roles.value = entry.unseen_hold_value;
    roles.lease = entry.unseen_hold_lease;
    if (roles.value > argv.size() || roles.lease > argv.size() || !looks_like_value(argv[roles.value - 1])) return false;
  } else {
    roles = find_renewal_roles(keys[0], argv);
    if (roles.value == 0) return false;
  }
  std::int64_t lease = 0;
  if (!parse_int(argv[roles.lease - 1], lease) || lease <= 0) return false;
  const std::string_view server = c.e.server_text, key = keys[0], value = argv[roles.value - 1];
  // A key some call the capture read took or freed is read by that call's rules.
  if (flow.find(acquire_script_key(server, key)) != nullptr) return false;
  if (const value_record* rec = flow.find(value_key(server, key, value));
      rec != nullptr && !(rec->first_is_sha && rec->first_sha == current_sha && rec->first_role == script_op::extend)) {
    return false;
  }
  lock_operation& op = c.op;
  op.family = lock_family::set_based;
  op.shared = false;
  op.kind = lock_op_kind::renew;
  op.outcome = op_outcome::ok;
  op.lock = key;
  op.owner = value;
  op.channel = {};
  op.inferred = true;
  op.ends_unseen = true;
  op.lease_ms = lease;
  const bool seconds = lease_in_seconds(argv[roles.lease - 1]);
  const std::int64_t at = op.at_us();
  if (entry.unseen_hold_value == 0) {
    // Not shown yet: this call is kept, unless a kept one of this script on this key and
    // value, still inside its lease, shows it renews.
    std::erase_if(unseen_renewals_kept, [&](const kept_call& k) { return k.deadline_us <= at; });
    const auto again = std::find_if(unseen_renewals_kept.begin(), unseen_renewals_kept.end(), [&](const kept_call& k) {
      return k.sha == current_sha && k.lock == key && k.owner == value && k.server_text == server;
    });
    if (again == unseen_renewals_kept.end()) {
      if (unseen_renewals_kept.size() >= max_unseen_renewals_kept) unseen_renewals_kept.erase(unseen_renewals_kept.begin());
      kept_call& k = unseen_renewals_kept.emplace_back();
      k.keep(op);
      k.sha = current_sha;
      k.deadline_us = at + std::min<std::int64_t>(seconds ? lease * 1000 : lease, INT64_MAX / 2000) * 1000;
      op.ends_unseen = false;
      return true;  // (no operation yet: nothing else reads the call)
    }
    entry.unseen_hold_value = roles.value;
    entry.unseen_hold_lease = roles.lease;
    std::vector<kept_call> shown;
    for (auto it = unseen_renewals_kept.begin(); it != unseen_renewals_kept.end();) {
      if (it->sha != current_sha) {
        ++it;
        continue;
      }
      shown.push_back(std::move(*it));
      it = unseen_renewals_kept.erase(it);
    }
    for (const kept_call& k : shown) {
      inferred_lease_seconds = seconds;
      emit(k.restored());
    }
  }
  inferred_lease_seconds = seconds;
  emit(op);
  inferred_lease_seconds = false;
  op.ends_unseen = false;
  return true;
}

}  // namespace lockscope::locks
