// The probes (see script_effect.hpp).
#include "recognize/script_effect.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "lockscope/locks/command_words.hpp"

namespace lockscope::locks::effect {

namespace {

constexpr std::string_view other_owner = "lockscope:probe:another-owner";
constexpr std::size_t max_owner_candidates = 8;

bool number(std::string_view s, std::int64_t& v) { return parse_wire_int(s, v); }

// ARGV with repeated values made distinct, so that a written value names one position.
std::vector<std::string> distinct_argv(std::span<const std::string_view> argv) {
  std::vector<std::string> out;
  for (std::string_view a : argv) {
    std::string v(a);
    while (std::find(out.begin(), out.end(), v) != out.end()) {
      std::int64_t n = 0;
      if (number(v, n) && n < INT64_MAX) v = std::to_string(n + 1);
      else v += '~';
    }
    out.push_back(std::move(v));
  }
  return out;
}

enum class change : std::uint8_t { unchanged, created, deleted, counted_up, counted_down, renewed, replaced };

const char* change_name(change c) {
  switch (c) {
    case change::unchanged: return "unchanged";
    case change::created: return "created";
    case change::deleted: return "deleted";
    case change::counted_up: return "counted up";
    case change::counted_down: return "counted down";
    case change::renewed: return "renewed";
    case change::replaced: return "replaced";
  }
  return "?";
}

const std::string* field_of(const shadow_key& k, std::string_view f) {
  for (const auto& [name, value] : k.fields) {
    if (name == f) return &value;
  }
  return nullptr;
}

const double* score_of(const shadow_key& k, std::string_view member) {
  for (const auto& [name, score] : k.members) {
    if (name == member) return &score;
  }
  return nullptr;
}

// The caller's clock, when an ARGV reads as Unix time (seconds, perhaps with a
// fraction, or ms): the shadow's TIME then agrees with it.
std::int64_t clock_of(const std::vector<std::string>& argv) {
  for (const std::string& a : argv) {
    if (a.empty() || a.size() > 24 || a.front() < '0' || a.front() > '9') continue;
    char* end = nullptr;
    const double v = std::strtod(a.c_str(), &end);
    if (end != a.c_str() + a.size() || !std::isfinite(v)) continue;
    if (v >= 1e9 && v < 1e10) return static_cast<std::int64_t>(std::floor(v * 1000));
    if (v >= 1e12 && v < 1e13) return static_cast<std::int64_t>(v);
  }
  return default_shadow_now_ms;
}

struct probe_run {
  run_result result;
  shadow_store before, after;
};

// How one key changed in a run; `owner` is the caller's value (for hash counts).
change key_change(const probe_run& r, const std::string& key, std::string_view owner) {
  const auto b = r.before.keys.find(key);
  const auto a = r.after.keys.find(key);
  const bool was = b != r.before.keys.end(), is = a != r.after.keys.end();
  // A sorted set made or dropped counts for the owner only when its member was in it.
  if (!was && is && a->second.kind == shadow_key::type::zset) {
    return score_of(a->second, owner) != nullptr ? change::created : change::replaced;
  }
  if (was && !is && b->second.kind == shadow_key::type::zset) {
    return score_of(b->second, owner) != nullptr ? change::deleted : change::replaced;
  }
  if (!was && is) return change::created;
  if (was && !is) return change::deleted;
  if (!was) return change::unchanged;
  const shadow_key& x = b->second;
  const shadow_key& y = a->second;
  if (x.kind == shadow_key::type::zset && y.kind == shadow_key::type::zset) {
    // A sorted set is one holder's per member: what happened to the owner's.
    const double* sb = score_of(x, owner);
    const double* sa = score_of(y, owner);
    if (sb == nullptr) return sa == nullptr ? change::unchanged : change::created;
    if (sa == nullptr) return change::deleted;
    if (*sa != *sb) return change::renewed;
    for (const shadow_write& w : r.result.writes) {
      if (w.key == key && w.kind == shadow_write::what::member_add && w.value == owner) return change::renewed;
    }
    return change::unchanged;
  }
  if (x.kind == shadow_key::type::zset || y.kind == shadow_key::type::zset) {
    if (x.kind == shadow_key::type::zset && score_of(x, owner) != nullptr) return change::deleted;
    if (y.kind == shadow_key::type::zset && score_of(y, owner) != nullptr) return change::created;
    return change::replaced;
  }
  if (x.kind == shadow_key::type::hash && y.kind == shadow_key::type::hash) {
    std::int64_t before = 0, after = 0;
    const std::string* fb = field_of(x, owner);
    const std::string* fa = field_of(y, owner);
    if (fb != nullptr && fa != nullptr && number(*fb, before) && number(*fa, after) && before != after) {
      return after > before ? change::counted_up : change::counted_down;
    }
    if (fb != nullptr && fa == nullptr) return change::counted_down;
    if (x.fields != y.fields) return change::replaced;
  } else if (x.kind != y.kind || x.value != y.value || x.items != y.items) {
    return change::replaced;
  }
  for (const shadow_write& w : r.result.writes) {
    if (w.key == key && (w.kind == shadow_write::what::expire || w.kind == shadow_write::what::set)) return change::renewed;
  }
  return x.pttl_ms != y.pttl_ms ? change::renewed : change::unchanged;
}

// The ARGV position (1-based) whose value is `v`; 0 when none.
std::uint8_t argv_of(const std::vector<std::string>& argv, std::string_view v) {
  for (std::size_t i = 0; i < argv.size() && i < 255; ++i) {
    if (argv[i] == v) return static_cast<std::uint8_t>(i + 1);
  }
  return 0;
}

// How a lock key holds its owner: a string value, a hash field named by the owner
// (counting reentrant holds), or the value of a named hash field (`HGET key 'id'`).
struct holding_form {
  bool hash = false;
  std::string field;  // the named field; empty: the owner is the field
  // A sorted set: the owner a member, with these flag members beside it (a writer's
  // mark the script wrote), each scored a little ahead of the clock.
  bool zset = false;
  std::vector<std::string> flags;
  // Other holders' members beside the owner's (a shared lock's readers, a semaphore's
  // permits): `others` more, each scored as the owner.
  int others = 0;
  // A member the script builds from the owner's argument (`id .. '_' .. i`: a permit
  // of several per holder): what comes before and after it.
  std::string prefix, suffix;
  bool owner_is_field() const { return hash && field.empty(); }
  std::string member(std::string_view owner) const { return prefix + std::string(owner) + suffix; }
};

holding_form hash_form(std::string field) {
  holding_form f;
  f.hash = true;
  f.field = std::move(field);
  return f;
}

// What all the probes of one script may spend together: a script can pass each run's
// limits and still cost hundreds of runs (the probes try every owner candidate in every
// holding form), so a hostile one would otherwise take seconds of the analyzer's time.
// The instructions are the measure (the same on any machine); the thread's CPU time is only
// a backstop for work in C that no charge sees.
struct probe_budget {
  static constexpr std::uint64_t runs_of_instructions = 24;  // each run's budget, times this
  static constexpr std::uint32_t runs_of_cpu = 16;           // each run's CPU time limit, times this
  explicit probe_budget(const sandbox_limits& limits)
      : instructions_left(limits.instructions * runs_of_instructions),
        deadline(thread_cpu_time() + std::chrono::milliseconds(std::uint64_t{limits.cpu_ms} * runs_of_cpu)) {}
  std::uint64_t instructions_left;
  std::chrono::nanoseconds deadline;  // in the thread's CPU time
  // The script's compiled chunk, made by the first run and loaded by the others: compiling
  // a long text again on every probe was most of the probes' time.
  std::string compiled;
};

class prober {
 public:
  prober(std::string_view text, std::span<const std::string_view> keys, std::vector<std::string> argv,
         const sandbox_limits& limits, probe_budget& budget)
      : text_(text), keys_(keys.begin(), keys.end()), argv_(std::move(argv)), limits_(limits), budget_(budget),
        now_ms_(clock_of(argv_)) {
    for (const std::string& a : argv_) argv_views_.emplace_back(a);
  }

  // A run on `state`; nullopt when the script's effect cannot be known (a command the
  // shadow does not model, a limit, not Lua, the probes' budget spent).
  std::optional<probe_run> run(shadow_store state) {
    ++runs_;
    const auto now = thread_cpu_time();
    if (budget_.instructions_left == 0 || now >= budget_.deadline) {
      failure_ = budget_spent(runs_ - 1);
      hit_limit_ = true;
      return std::nullopt;
    }
    sandbox_limits limits = limits_;
    limits.instructions = std::min(limits.instructions, budget_.instructions_left);
    const auto cpu_left = std::chrono::ceil<std::chrono::milliseconds>(budget_.deadline - now).count();
    limits.cpu_ms = static_cast<std::uint32_t>(std::min<std::int64_t>(limits.cpu_ms, cpu_left));
    probe_run r;
    state.now_ms = now_ms_;
    r.before = state;
    std::vector<std::string_view> keys(keys_.begin(), keys_.end());
    r.result = run_script(text_, keys, argv_views_, state, limits, nullptr, &budget_.compiled);
    budget_.instructions_left -= std::min(budget_.instructions_left, r.result.executed);
    r.after = std::move(state);
    if (r.result.outcome == run_result::status::unsupported || r.result.outcome == run_result::status::limit ||
        r.result.outcome == run_result::status::not_lua) {
      const bool by_budget = r.result.outcome == run_result::status::limit &&
                             (limits.instructions < limits_.instructions || limits.cpu_ms < limits_.cpu_ms);
      failure_ = by_budget ? budget_spent(runs_) : r.result.message;
      hit_limit_ = hit_limit_ || r.result.outcome == run_result::status::limit;
      return std::nullopt;
    }
    return r;
  }

  // A run with ARGV[position] (1-based) replaced by `value`.
  std::optional<probe_run> run_with_argv(std::uint8_t position, std::string value, shadow_store state) {
    std::string& slot = argv_[position - 1u];
    std::swap(slot, value);
    argv_views_[position - 1u] = slot;
    auto r = run(std::move(state));
    std::swap(slot, value);
    argv_views_[position - 1u] = slot;
    return r;
  }

  // The ARGV (not a number, 8 bytes or more: a holder's id) that `member` holds with
  // something before or after it, and what: 0 when none.
  std::uint8_t affixed_argv(std::string_view member, std::string& prefix, std::string& suffix) const {
    for (std::size_t i = 0; i < argv_.size() && i < 255; ++i) {
      const std::string& a = argv_[i];
      std::int64_t v = 0;
      if (a.size() < 8 || a.size() >= member.size() || number(a, v)) continue;
      const std::size_t at = member.find(a);
      if (at == std::string_view::npos) continue;
      prefix.assign(member.substr(0, at));
      suffix.assign(member.substr(at + a.size()));
      return static_cast<std::uint8_t>(i + 1);
    }
    return 0;
  }

  // Keys the script builds from one of its KEYS and constants of its text (`KEYS[1] ..
  // ":time"`, string.format): named in a run's writes or reads, each such name is a
  // target the probes may hold the caller in, and stands for the KEYS entry it is built
  // from. A name with a part the text does not spell (an id popped from a list) is no
  // function of the KEYS entry alone, and is left to the traced calls.
  void learn_derived(const probe_run& r) {
    const auto consider = [&](const std::string& name) {
      if (derived_.size() >= max_derived || key_named(name) != 0) return;
      for (const auto& [known, origin] : derived_) {
        if (known == name) return;
      }
      std::size_t best = keys_.size();
      for (std::size_t i = 0; i < keys_.size(); ++i) {
        const std::string& k = keys_[i];
        if (k.empty() || k.size() >= name.size() || (best < keys_.size() && keys_[best].size() >= k.size())) continue;
        const std::size_t at = name.find(k);
        if (at == std::string::npos) continue;
        const std::string_view before(name.data(), at), after(name.data() + at + k.size(), name.size() - at - k.size());
        if ((!before.empty() && text_.find(before) == std::string_view::npos) ||
            (!after.empty() && text_.find(after) == std::string_view::npos)) {
          continue;
        }
        best = i;
      }
      if (best < keys_.size()) derived_.emplace_back(name, best);
    };
    for (const shadow_write& w : r.result.writes) {
      if (w.kind != shadow_write::what::publish) consider(w.key);
    }
    for (const auto& read : r.result.member_reads) consider(read.first);
    for (const auto& read : r.result.hash_reads) consider(read.first);
    for (const auto& read : r.result.state_reads) consider(read.key);
  }
  // The probes' targets: KEYS, then the keys derived from them.
  std::size_t targets() const { return keys_.size() + derived_.size(); }
  const std::string& target_name(std::size_t t) const {
    return t < keys_.size() ? keys_[t] : derived_[t - keys_.size()].first;
  }
  // The 0-based KEYS position a target stands for.
  std::size_t origin(std::size_t t) const { return t < keys_.size() ? t : derived_[t - keys_.size()].second; }
  std::size_t distinct_origins(const std::vector<std::size_t>& ts) const {
    std::vector<std::size_t> seen;
    for (std::size_t t : ts) {
      if (std::find(seen.begin(), seen.end(), origin(t)) == seen.end()) seen.push_back(origin(t));
    }
    return seen.size();
  }
  std::size_t derived_count() const { return derived_.size(); }
  // A sorted set whose acquire scored its holder by a number that is no time (a permit's
  // weight, summed against a limit) holds the probes' members with that score: scored as
  // an expiry, each would weigh more than any limit.
  void learn_scores(const probe_run& r, std::string_view member) {
    for (const shadow_write& w : r.result.writes) {
      if (w.kind != shadow_write::what::member_add || w.value != member) continue;
      char* end = nullptr;
      const double score = std::strtod(w.ttl.c_str(), &end);
      if (end == w.ttl.c_str() || !std::isfinite(score) || std::fabs(score) >= no_time_below) continue;
      held_scores_.emplace_back(w.key, score);
    }
  }

  // The keys `targets` holding `owner` as a string, as a hash field counting `count`,
  // or as the value of a named hash field.
  shadow_store holding(const std::vector<std::size_t>& targets, std::string_view owner, const holding_form& form,
                       int count, std::int64_t pttl = probe_pttl_ms) const {
    shadow_store s;
    s.now_ms = now_ms_;
    for (std::size_t t : targets) {
      shadow_key k;
      k.pttl_ms = pttl;
      const std::string& held_in = target_name(t);
      if (form.zset) {
        k.kind = shadow_key::type::zset;
        double score = static_cast<double>(now_ms_ + pttl);
        for (const auto& [key, held] : held_scores_) {
          if (key == held_in) score = held;
        }
        std::vector<std::string> names{form.member(owner)};
        for (const std::string& f : form.flags) names.push_back(f);
        for (int i = 0; i < form.others; ++i) {
          names.push_back(form.member(std::string(other_owner) + "#" + std::to_string(i + 2)));
        }
        std::sort(names.begin(), names.end());
        for (std::string& name : names) k.members.emplace_back(std::move(name), score);
      } else if (form.hash) {
        k.kind = shadow_key::type::hash;
        if (form.field.empty()) k.fields.emplace_back(std::string(owner), std::to_string(count));
        else k.fields.emplace_back(form.field, std::string(owner));
      } else {
        k.value = owner;
      }
      s.keys[held_in] = std::move(k);
    }
    return s;
  }

  reply_sig signature(const lua_reply& r, std::size_t lock_keys, bool nested = false) const {
    reply_sig s;
    using form = reply_sig::form;
    switch (r.type) {
      case lua_reply::kind::nil: s.kind = form::nil; break;
      case lua_reply::kind::integer:
        if (r.integer == probe_pttl_ms || r.integer == (probe_pttl_ms + 500) / 1000 ||
            r.integer == probe_pttl_ms / 1000 || r.integer == probe_low_pttl_ms) {
          s.kind = form::ttl;
          s.seconds = r.integer != probe_pttl_ms;
        } else if (lock_keys > 1 && r.integer == static_cast<std::int64_t>(keys_.size())) {
          s.kind = form::key_count;
        } else {
          s.kind = form::integer;
          s.integer = r.integer;
        }
        break;
      case lua_reply::kind::status:
        s.kind = form::status;
        s.text = r.text;
        break;
      case lua_reply::kind::error: s.kind = form::error; break;
      case lua_reply::kind::bulk: {
        std::int64_t v = 0;
        if (const std::uint8_t i = argv_of(argv_, r.text); i != 0) {
          s.kind = form::argv;
          s.argv = i;
        } else if (const std::uint8_t k = key_named(r.text); k != 0) {
          // The name of a key the call passed (Laravel's funnel answers the slot it took):
          // each call names its own keys, so the signature is the position, not the text.
          s.kind = form::key;
          s.argv = k;
        } else if (r.text.find(other_owner) != std::string::npos) {
          s.kind = form::any_text;
        } else if (number(r.text, v)) {
          lua_reply n;
          n.type = lua_reply::kind::integer;
          n.integer = v;
          return signature(n, lock_keys, nested);
        } else {
          s.kind = form::text;
          s.text = r.text;
        }
        break;
      }
      case lua_reply::kind::array:
        s.kind = form::array;
        if (!nested && !r.items.empty()) {
          const reply_sig f = signature(r.items.front(), lock_keys, true);
          s.first = f.kind == form::array ? form::any_text : f.kind;
          s.first_integer = f.integer;
          s.first_seconds = f.seconds;
          s.first_argv = f.argv;
          s.first_text = f.text;
        } else {
          s.first = form::nil;
        }
        break;
    }
    return s;
  }

  // The TTL the run wrote on `key`: the ARGV it names (or 0), its unit, and whether it
  // was added to the remaining time (redis-py's `pexpire(key, pttl + ARGV[2])`).
  void lease_of(const probe_run& r, const std::string& key, script_effect& e, std::string_view member = {}) const {
    const auto before = r.before.keys.find(key);
    const std::int64_t remaining = before == r.before.keys.end() ? -1 : before->second.pttl_ms;
    // A member scored by its expiry: the score less the clock (ms, or s when the score is
    // in seconds).
    for (const shadow_write& w : r.result.writes) {
      if (member.empty() || w.key != key || w.kind != shadow_write::what::member_add || w.value != member) continue;
      char* end = nullptr;
      const double score = std::strtod(w.ttl.c_str(), &end);
      if (end == w.ttl.c_str() || !std::isfinite(score)) continue;
      const double ms = score - static_cast<double>(now_ms_);
      const double s = score - static_cast<double>(now_ms_ / 1000);
      for (const auto& [ahead, seconds] : {std::pair{ms, false}, std::pair{s, true}}) {
        if (!(ahead > 0 && ahead < 1e15)) continue;
        // (A caller's fractional clock floored to ms may leave it 1 off.)
        for (const double slack : {0.0, -1.0, 1.0}) {
          const std::uint8_t i = position_of(std::to_string(static_cast<std::int64_t>(std::llround(ahead + slack))));
          if (i == 0) continue;
          e.lease_argv = i;
          e.lease_seconds = seconds;
          return;
        }
      }
    }
    for (const shadow_write& w : r.result.writes) {
      if (w.key != key || w.ttl.empty()) continue;
      if (w.kind != shadow_write::what::set && w.kind != shadow_write::what::expire) continue;
      if (const std::uint8_t i = position_of(w.ttl); i != 0) {
        e.lease_argv = i;
        e.lease_seconds = w.ttl_seconds;
        return;
      }
      std::int64_t ttl = 0;
      if (remaining > 0 && number(w.ttl, ttl) && ttl > remaining) {
        const std::string added = std::to_string(w.ttl_seconds ? ttl - remaining / 1000 : ttl - remaining);
        if (const std::uint8_t i = position_of(added); i != 0) {
          e.lease_argv = i;
          e.lease_seconds = w.ttl_seconds;
          e.lease_added = true;
          return;
        }
      }
    }
  }

  // The 1-based KEYS position holding `v`; 0 when no key of the call is named so.
  std::uint8_t key_named(std::string_view v) const {
    for (std::size_t i = 0; i < keys_.size() && i < 255; ++i) {
      if (keys_[i] == v) return static_cast<std::uint8_t>(i + 1);
    }
    return 0;
  }

  std::uint8_t channel_of(const probe_run& r) const {
    for (const shadow_write& w : r.result.writes) {
      if (w.kind != shadow_write::what::publish) continue;
      for (std::size_t i = 0; i < keys_.size() && i < 255; ++i) {
        if (keys_[i] == w.key) return static_cast<std::uint8_t>(i + 1);
      }
    }
    return 0;
  }

  // The position (see script_effect::owner_argv) of an argument whose value is `v`:
  // an ARGV, else a KEYS entry after the first (a client passing its value or TTL as
  // a key); 0 when none.
  std::uint8_t position_of(std::string_view v) const {
    if (const std::uint8_t i = argv_of(argv_, v); i != 0) return i;
    for (std::size_t i = 1; i < keys_.size() && i + 1 < 128; ++i) {
      if (keys_[i] == v) return static_cast<std::uint8_t>(keys_position + i + 1);
    }
    return 0;
  }
  const std::string& value_at(std::uint8_t position) const {
    return position > keys_position ? keys_[position - keys_position - 1u] : argv_[position - 1u];
  }
  const std::vector<std::string>& argv() const { return argv_; }
  const std::vector<std::string>& keys() const { return keys_; }
  const std::string& failure() const { return failure_; }
  std::int64_t now_ms() const { return now_ms_; }
  int runs() const { return runs_; }
  bool hit_limit() const { return hit_limit_; }

 private:
  static constexpr std::size_t max_derived = 8;
  // Scores below this (about three years, in seconds) are no Unix time.
  static constexpr double no_time_below = 1e8;
  std::string_view text_;
  std::vector<std::string> keys_;
  std::vector<std::pair<std::string, std::size_t>> derived_;  // name, the KEYS position it is built from
  std::vector<std::pair<std::string, double>> held_scores_;   // key, its holders' score
  std::vector<std::string> argv_;
  std::vector<std::string_view> argv_views_;
  static std::string budget_spent(int runs) {
    return "the probes of this script spent their budget (" + std::to_string(runs) + " runs)";
  }

  const sandbox_limits& limits_;
  probe_budget& budget_;
  std::int64_t now_ms_;
  std::string failure_;
  bool hit_limit_ = false;
  int runs_ = 0;
};

void add_path(script_effect& e, const prober& p, const probe_run& r, std::size_t lock_keys, op_outcome outcome,
              bool own_hold_only = false) {
  reply_sig s;
  if (r.result.outcome == run_result::status::script_error) s.kind = reply_sig::form::error;
  else s = p.signature(r.result.reply, lock_keys);
  e.paths.push_back(effect_path{std::move(s), outcome, own_hold_only});
}

std::string describe(const script_effect& e) {
  std::string s;
  switch (e.op) {
    case script_op::acquire:
    case script_op::multi_acquire: s = "acquire"; break;
    case script_op::unlock:
    case script_op::multi_release: s = "release"; break;
    case script_op::extend:
    case script_op::multi_extend: s = "extend"; break;
    default: s = "none"; break;
  }
  if (e.counted && e.lock_key == 0) {
    s += " of the count whose holders' expiries KEYS[" + std::to_string(e.expiry_key) + "] keeps";
  } else {
    s += e.multi ? " of every KEYS" : " of KEYS[" + std::to_string(e.lock_key) + "]";
  }
  if (e.counted) {
    s += " (a count of permits" + (e.counter_field.empty() ? std::string() : " in field '" + e.counter_field + "'");
    if (e.permits_argv != 0) s += ", by ARGV[" + std::to_string(e.permits_argv) + "]";
    if (e.limit_argv != 0) s += ", at most ARGV[" + std::to_string(e.limit_argv) + "]";
    if (!e.limit_field.empty()) s += ", at most field '" + e.limit_field + "'";
    s += ")";
  } else {
    s += e.family == lock_family::redisson ? " (a hash of owners)"
         : e.member_based                   ? " (a sorted set, a member per holder)"
                                            : " (one owner's value)";
  }
  if (e.shared) {
    s += e.limit != 0 ? ", " + std::to_string(e.limit) + " holders at most" : std::string(", shared");
    if (e.limit_argv != 0) s += " (ARGV[" + std::to_string(e.limit_argv) + "])";
    if (e.limit == 0 && e.family != lock_family::semaphore) s += " unless a flag member is there";
  }
  auto name = [](std::uint8_t at) {
    return at > keys_position ? "KEYS[" + std::to_string(at - keys_position) + "]" : "ARGV[" + std::to_string(at) + "]";
  };
  s += ", owner " + name(e.owner_argv);
  if (e.lease_argv != 0) s += ", lease " + name(e.lease_argv) + (e.lease_seconds ? " s" : " ms");
  if (e.lease_added) s += " added to the remaining time";
  if (e.channel_key != 0) s += ", publishes on KEYS[" + std::to_string(e.channel_key) + "]";
  if (e.renews_own) s += "; renews a key its value holds";
  return s;
}

// Acquire: `absent` created the lock key(s) holding ARGV[owner].
// A value the script drew (it differs between two runs from empty, the second on the
// store the first left but for `key`) that its list reply carries both times: its
// 1-based position in the list; 0 when none. `value_of` reads the drawn value from a
// run's `after` store.
template <class ValueOf>
std::uint8_t drawn_in_reply(prober& p, const probe_run& absent, const std::string& key, ValueOf value_of) {
  const lua_reply& first = absent.result.reply;
  if (first.type != lua_reply::kind::array) return 0;
  shadow_store again = absent.after;
  again.keys.erase(key);
  auto second = p.run(std::move(again));
  if (!second || second->result.reply.type != lua_reply::kind::array) return 0;
  const std::string v1 = value_of(absent.after), v2 = value_of(second->after);
  if (v1.empty() || v2.empty() || v1 == v2) return 0;
  const auto text = [](const lua_reply& r) {
    return r.type == lua_reply::kind::integer ? std::to_string(r.integer)
           : r.type == lua_reply::kind::bulk || r.type == lua_reply::kind::status ? r.text
                                                                                   : std::string();
  };
  const auto& a = first.items;
  const auto& b = second->result.reply.items;
  for (std::size_t j = 0; j < a.size() && j < b.size() && j < 64; ++j) {
    if (text(a[j]) == v1 && text(b[j]) == v2) return static_cast<std::uint8_t>(j + 1);
  }
  return 0;
}

bool try_acquire(script_effect& e, prober& p, const probe_run& absent) {
  std::vector<std::size_t> created;
  std::uint8_t owner = 0;
  std::uint8_t owner_reply = 0;
  std::string drawn;  // the value the script drew, for owner_reply
  holding_form form;
  for (std::size_t i = 0; i < p.targets(); ++i) {
    const std::string& target = p.target_name(i);
    const auto it = absent.after.keys.find(target);
    if (it == absent.after.keys.end() || absent.before.keys.count(target) != 0) continue;
    std::uint8_t o = 0;
    holding_form f;
    const bool counted = std::any_of(absent.result.writes.begin(), absent.result.writes.end(), [&](const shadow_write& w) {
      return w.key == target && w.kind == shadow_write::what::incr;
    });
    if (counted) continue;  // a counter (INCR/INCRBY) whose value happens to equal an ARGV
    if (it->second.kind == shadow_key::type::string) o = p.position_of(it->second.value);
    else if (it->second.kind == shadow_key::type::zset) {
      // A member named by an argument is the holder; members the script names itself
      // are flags (a writer's mark), kept beside every holder the probes make.
      f.zset = true;
      for (const auto& [name, score] : it->second.members) {
        if (o == 0) o = p.position_of(name);
      }
      // Else a member built from an argument (`id .. '_0'`): that argument is the holder.
      for (const auto& [name, score] : it->second.members) {
        if (o != 0) break;
        o = p.affixed_argv(name, f.prefix, f.suffix);
      }
      if (o == 0) continue;
      const bool affixed = !f.prefix.empty() || !f.suffix.empty();
      for (const auto& [name, score] : it->second.members) {
        if (affixed && name.find(p.value_at(o)) != std::string::npos) continue;  // the holder's other permits
        if (p.position_of(name) == 0 && f.flags.size() < 4) f.flags.push_back(name);
      }
    } else if (it->second.kind == shadow_key::type::hash) {
      f.hash = true;
      for (const auto& [name, v] : it->second.fields) {
        if ((o = p.position_of(name)) != 0) break;
      }
      for (const auto& [name, v] : it->second.fields) {
        if (o != 0) break;
        if ((o = p.position_of(v)) != 0) f.field = name;
      }
    }
    if (o == 0 && created.empty() && owner_reply == 0) {
      // No argument names the owner: one the script drew and answers?
      const std::string& key = target;
      const shadow_key& k = it->second;
      if (k.kind == shadow_key::type::string) {
        owner_reply = drawn_in_reply(p, absent, key, [&](const shadow_store& s) {
          const auto at = s.keys.find(key);
          return at == s.keys.end() ? std::string() : at->second.value;
        });
        drawn = k.value;
      } else if (k.kind == shadow_key::type::hash) {
        for (const auto& [name, v] : k.fields) {
          // (A copy to capture: Clang before 16 cannot capture a structured binding.)
          const std::string_view field_name = name;
          owner_reply = drawn_in_reply(p, absent, key, [&](const shadow_store& s) {
            const auto at = s.keys.find(key);
            if (at == s.keys.end()) return std::string();
            for (const auto& [n2, v2] : at->second.fields) {
              if (n2 == field_name) return v2;
            }
            return std::string();
          });
          if (owner_reply != 0) {
            f.hash = true;
            f.field = name;
            drawn = v;
            break;
          }
        }
      }
      if (owner_reply != 0) {
        form = f;
        created.push_back(i);
        break;  // one key, its owner drawn
      }
      continue;
    }
    if (o == 0 || (owner != 0 && o != owner)) continue;
    owner = o;
    form = f;
    created.push_back(i);
  }
  if (created.empty()) return false;
  const std::string& mine_value = owner_reply != 0 ? drawn : p.value_at(owner);
  const std::string mine_member = form.member(mine_value), other_member = form.member(other_owner);
  if (form.zset) {
    // Of several sets built from one KEYS entry, the one the holder's lease is read from
    // (its member scored by an expiry) is the lock's.
    for (std::size_t c = 0; c < created.size(); ++c) {
      script_effect probe;
      p.lease_of(absent, p.target_name(created[c]), probe, mine_member);
      if (probe.lease_argv == 0) continue;
      std::rotate(created.begin(), created.begin() + static_cast<std::ptrdiff_t>(c), created.begin() + static_cast<std::ptrdiff_t>(c) + 1);
      break;
    }
    p.learn_scores(absent, mine_member);
  }
  const std::string& lock = p.target_name(created.front());
  const std::size_t lock_keys = p.distinct_origins(created);
  auto other = p.run(p.holding(created, other_owner, form, 1));
  if (!other) return false;
  if (other->result.outcome == run_result::status::script_error) {
    e.finding = "fails when another owner holds the key: no lock";  // a lock handles that case
    return false;
  }
  if (key_change(*other, lock, other_member) != change::unchanged) {
    e.finding = std::string("creates KEYS[") + std::to_string(p.origin(created.front()) + 1) + "] but also " +
                change_name(key_change(*other, lock, other_member)) + " it when another owner holds it: no lock";
    return false;
  }
  // A member added beside another holder's: a shared lock. What refuses it then: a flag
  // member the script checks (a read lock refused by a writer), or a count of holders
  // (a semaphore's limit).
  std::optional<probe_run> refused;
  const bool beside_other = form.zset && key_change(*other, lock, mine_member) == change::created;
  if (beside_other) {
    e.shared = true;
    std::vector<std::string> flags;
    const probe_run* const runs[] = {&absent, &*other};
    for (const probe_run* run : runs) {
      for (const auto& [key, member] : run->result.member_reads) {
        if (key != lock || p.position_of(member) != 0 || member.find(other_owner) != std::string::npos) continue;
        // The holder's own, built from its value.
        if ((!form.prefix.empty() || !form.suffix.empty()) && member.find(mine_value) != std::string::npos) continue;
        if (std::find(form.flags.begin(), form.flags.end(), member) != form.flags.end()) continue;
        if (std::find(flags.begin(), flags.end(), member) == flags.end() && flags.size() < 4) flags.push_back(member);
      }
    }
    for (const std::string& flag : flags) {
      holding_form with_flag = form;
      with_flag.flags.push_back(flag);
      auto run = p.run(p.holding(created, other_owner, with_flag, 1));
      if (!run) return false;
      if (key_change(*run, lock, mine_member) != change::created &&
          key_change(*run, lock, other_member) == change::unchanged) {
        refused = std::move(run);
        break;
      }
    }
    for (int others = 1; !refused && others < 8; ++others) {
      holding_form crowd = form;
      crowd.others = others;
      auto run = p.run(p.holding(created, other_owner, crowd, 1));
      if (!run) return false;
      if (key_change(*run, lock, mine_member) == change::created) continue;
      if (key_change(*run, lock, other_member) != change::unchanged) break;
      e.limit = static_cast<std::uint8_t>(others + 1);
      e.limit_argv = p.position_of(std::to_string(others + 1));
      if (e.limit_argv > keys_position) e.limit_argv = 0;
      refused = std::move(run);
    }
  }
  if (form.zset && !beside_other) {
    // Refused beside one other holder: a semaphore whose limit argument was 1 (a number
    // that, raised by one, lets the member in beside the other) or an exclusive lock.
    for (std::size_t i = 0; i < p.argv().size() && i < 255 && !e.shared; ++i) {
      std::int64_t v = 0;
      if (!number(p.argv()[i], v) || v != 1) continue;
      const auto at = static_cast<std::uint8_t>(i + 1);
      auto run = p.run_with_argv(at, "2", p.holding(created, other_owner, form, 1));
      if (!run) return false;
      if (key_change(*run, lock, mine_member) != change::created) continue;
      if (key_change(*run, lock, other_member) != change::unchanged) continue;
      e.shared = true;
      e.limit = 1;
      e.limit_argv = at;
    }
  }
  if (beside_other && !refused) {
    // It adds its member whatever else is there (an index, a queue, a leaderboard): a
    // lock refuses someone.
    e.shared = false;
    e.finding = "adds its member to KEYS[" + std::to_string(p.origin(created.front()) + 1) + "] beside any other: no lock";
    return false;
  }
  auto mine = p.run(p.holding(created, mine_value, form, 1));
  if (!mine) return false;
  e.multi = lock_keys > 1;
  e.op = e.multi ? script_op::multi_acquire : script_op::acquire;
  e.family = form.owner_is_field() ? lock_family::redisson
             : e.multi               ? lock_family::redlock_multi
             : e.shared && e.limit != 0 ? lock_family::semaphore
                                     : lock_family::set_based;
  e.member_based = form.zset;
  e.lock_key = static_cast<std::uint8_t>(p.origin(created.front()) + 1);
  e.owner_argv = owner;
  e.owner_reply = owner_reply;
  p.lease_of(absent, lock, e, form.zset ? std::string_view(mine_member) : std::string_view());
  e.channel_key = p.channel_of(absent);
  add_path(e, p, absent, lock_keys, op_outcome::ok);
  const change again = key_change(*mine, lock, mine_member);
  e.renews_own = !form.owner_is_field() && again == change::renewed;
  add_path(e, p, *mine, lock_keys, again == change::unchanged ? op_outcome::contended : op_outcome::ok,
           /*own_hold_only=*/true);
  add_path(e, p, *other, lock_keys, e.shared && beside_other ? op_outcome::ok : op_outcome::contended);
  if (refused) add_path(e, p, *refused, lock_keys, op_outcome::contended);
  return true;
}

// Release or extend: `mine` deletes, counts down or re-expires the lock key(s).
bool try_release_or_extend(script_effect& e, prober& p, const probe_run& absent) {
  // Every KEYS holding the value first (a loop over KEYS changes them all), then KEYS[1].
  const std::size_t n = p.keys().size();
  std::vector<std::vector<std::size_t>> target_sets;
  if (n > 1) {
    std::vector<std::size_t> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
    target_sets.push_back(std::move(all));
  }
  target_sets.push_back({0});
  // Keys built from KEYS (`KEYS[1] .. ":time"`): all of them (a release from each), then
  // each alone (a refresh of the one that keeps the expiry).
  const std::size_t derived = p.derived_count();
  if (derived > 0) {
    std::vector<std::size_t> all(derived);
    for (std::size_t i = 0; i < derived; ++i) all[i] = n + i;
    target_sets.push_back(std::move(all));
    for (std::size_t i = 0; derived > 1 && i < derived; ++i) target_sets.push_back({n + i});
  }
  // Owner candidates: texts first (a token, a UUID), then numbers.
  std::vector<std::uint8_t> owners;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < p.argv().size() && owners.size() < max_owner_candidates; ++i) {
      std::int64_t v = 0;
      if (number(p.argv()[i], v) == (pass == 1)) owners.push_back(static_cast<std::uint8_t>(i + 1));
    }
  }
  for (std::size_t i = 1; i < p.keys().size() && i + 1 < 128 && owners.size() < max_owner_candidates + 2; ++i) {
    owners.push_back(static_cast<std::uint8_t>(keys_position + i + 1));  // a value passed as a key
  }
  for (const auto& targets : target_sets) {
    const std::string& lock = p.target_name(targets.front());
    const std::size_t lock_keys = p.distinct_origins(targets);
    for (std::uint8_t o : owners) {
      const std::string& value = p.value_at(o);
      holding_form member;
      member.zset = true;
      std::vector<holding_form> forms{holding_form{}, hash_form({}), member};
      // A member the script names from the value (`id .. '_0'`): held so.
      for (const auto& read : absent.result.member_reads) {
        if (read.first != lock || read.second.size() <= value.size() || value.size() < 8 || forms.size() >= 8) continue;
        const std::size_t at = read.second.find(value);
        if (at == std::string::npos) continue;
        holding_form affixed = member;
        affixed.prefix = read.second.substr(0, at);
        affixed.suffix = read.second.substr(at + value.size());
        forms.push_back(std::move(affixed));
        break;
      }
      for (const auto& read : absent.result.hash_reads) {
        const std::string& field = read.second;  // (clang 14 lambdas cannot capture bindings)
        if (read.first == lock &&
            std::none_of(forms.begin(), forms.end(), [&](const holding_form& f) { return f.field == field; })) {
          forms.push_back(hash_form(field));
        }
      }
      for (std::size_t fi = 0; fi < forms.size() && fi < 8; ++fi) {
        const holding_form form = forms[fi];
        const bool hash = form.owner_is_field();
        // A renewal may wait until the lease runs low: the lock nearly expired, too.
        std::int64_t pttl = probe_pttl_ms;
        auto mine = p.run(p.holding(targets, value, form, 1, pttl));
        if (!mine) return false;
        // A script that checks the key exists before it reads its owner's field (ioredfour:
        // EXISTS, then HGET of "index") names that field only once the key is there.
        for (const auto& read : mine->result.hash_reads) {
          const std::string& field = read.second;
          if (read.first == lock &&
              std::none_of(forms.begin(), forms.end(), [&](const holding_form& f) { return f.field == field; })) {
            forms.push_back(hash_form(field));
          }
        }
        const std::string mine_member = form.member(value), other_member = form.member(other_owner);
        change did = key_change(*mine, lock, mine_member);
        if (did == change::unchanged) {
          pttl = probe_low_pttl_ms;
          mine = p.run(p.holding(targets, value, form, 1, pttl));
          if (!mine) return false;
          did = key_change(*mine, lock, mine_member);
        }
        const bool release = did == change::deleted || did == change::counted_down;
        if (!release && did != change::renewed) continue;
        bool alike = true;  // several keys: each one changed as the first
        for (std::size_t t : targets) alike = alike && key_change(*mine, p.target_name(t), mine_member) == did;
        if (!alike) continue;
        auto other = p.run(p.holding(targets, other_owner, form, 1, pttl));
        if (!other) return false;
        if (other->result.outcome == run_result::status::script_error) continue;
        if (key_change(*other, lock, other_member) != change::unchanged) continue;
        e.multi = lock_keys > 1;
        e.op = release ? (e.multi ? script_op::multi_release : script_op::unlock)
                       : (e.multi ? script_op::multi_extend : script_op::extend);
        e.family = hash ? lock_family::redisson : e.multi ? lock_family::redlock_multi : lock_family::set_based;
        e.member_based = form.zset;
        e.lock_key = static_cast<std::uint8_t>(p.origin(targets.front()) + 1);
        e.owner_argv = o;
        p.lease_of(*mine, lock, e, form.zset ? std::string_view(mine_member) : std::string_view());
        e.channel_key = p.channel_of(*mine);
        add_path(e, p, *mine, lock_keys, op_outcome::ok);
        if (release && hash) {
          // A reentrant hold: counted down and kept.
          auto twice = p.run(p.holding(targets, value, form, 2, pttl));
          if (!twice) return false;
          const change c2 = key_change(*twice, lock, value);
          add_path(e, p, *twice, lock_keys, c2 == change::counted_down ? op_outcome::partial : op_outcome::ok);
        }
        add_path(e, p, *other, lock_keys, op_outcome::rejected);
        add_path(e, p, absent, lock_keys, release ? op_outcome::expired : op_outcome::rejected);
        return true;
      }
    }
  }
  return false;
}

// ---- Counted semaphores, on a state that satisfies the script's guards.

using state_read = run_result::state_read;

// A number the guard state gave: a hash field's, or a plain key's value (field empty).
struct guard_number {
  std::string key, field;
};

struct guard_state {
  shadow_store store;
  std::vector<guard_number> numbers;
};
constexpr std::size_t max_guard_numbers = 24;
constexpr int max_guard_rounds = 8;

// `key` in `s` as a `kind`, made afresh (and its numbers forgotten) when it is not one.
shadow_key& guard_key(guard_state& g, const std::string& key, shadow_key::type kind, bool& grew) {
  auto [it, added] = g.store.keys.try_emplace(key);
  if (!added && it->second.kind == kind) return it->second;
  it->second = shadow_key{};
  it->second.kind = kind;
  std::erase_if(g.numbers, [&](const guard_number& n) { return n.key == key; });
  grew = true;
  return it->second;
}

// The state each of the script's reads is answered in (see script_effect.hpp): run
// again until it asks for nothing new. nullopt when a run's effect cannot be known.
std::optional<guard_state> guard_state_of(prober& p) {
  guard_state g;
  g.store.now_ms = p.now_ms();
  const std::string clock = std::to_string(p.now_ms());
  for (int round = 0; round < max_guard_rounds; ++round) {
    auto run = p.run(g.store);
    if (!run) return std::nullopt;
    bool grew = false;
    for (const state_read& r : run->result.state_reads) {
      const auto at = g.store.keys.find(r.key);
      switch (r.kind) {
        case state_read::what::key:
          if (at == g.store.keys.end()) {
            // A key only checked to exist: a hash (a settings record) until a read says otherwise.
            guard_key(g, r.key, shadow_key::type::hash, grew).fields.emplace_back("lockscope:probe", "1");
          }
          break;
        case state_read::what::value:
          if (at != g.store.keys.end() && at->second.kind == shadow_key::type::string) break;
          guard_key(g, r.key, shadow_key::type::string, grew).value = clock;
          if (g.numbers.size() < max_guard_numbers) g.numbers.push_back({r.key, {}});
          break;
        case state_read::what::field: {
          shadow_key& k = guard_key(g, r.key, shadow_key::type::hash, grew);
          if (field_of(k, r.name) != nullptr) break;
          k.fields.emplace_back(r.name, clock);
          if (g.numbers.size() < max_guard_numbers) g.numbers.push_back({r.key, r.name});
          grew = true;
          break;
        }
        case state_read::what::member: {
          shadow_key& k = guard_key(g, r.key, shadow_key::type::zset, grew);
          if (score_of(k, r.name) != nullptr) break;
          const std::pair<std::string, double> m{r.name, static_cast<double>(p.now_ms())};
          const auto before = std::find_if(k.members.begin(), k.members.end(), [&](const auto& x) {
            return x.second > m.second || (x.second == m.second && x.first > m.first);
          });
          k.members.insert(before, m);  // the sandbox keeps members ordered by (score, member)
          grew = true;
          break;
        }
        case state_read::what::set_member: {
          shadow_key& k = guard_key(g, r.key, shadow_key::type::set, grew);
          if (std::find(k.items.begin(), k.items.end(), r.name) != k.items.end()) break;
          k.items.push_back(r.name);
          grew = true;
          break;
        }
      }
    }
    if (!grew) return g;
  }
  return g;
}

// A count a run moved: the key (one of KEYS), the field (empty: a plain key), by how much.
struct count_move {
  std::string key, field;
  std::int64_t by = 0;
};

// The first count among KEYS that `r` raised (up) or lowered: a plain key's INCR/INCRBY,
// or a hash field that no argument names (a per-caller tally is no count of permits).
std::optional<count_move> moved_count(const prober& p, const probe_run& r, bool up) {
  for (const shadow_write& w : r.result.writes) {
    if (std::find(p.keys().begin(), p.keys().end(), w.key) == p.keys().end()) continue;
    count_move m;
    m.key = w.key;
    if (w.kind == shadow_write::what::hash_incr) {
      if (argv_of(p.argv(), w.value) != 0 || !number(w.ttl, m.by)) continue;
      m.field = w.value;
    } else if (w.kind == shadow_write::what::incr) {
      std::int64_t after = 0, before = 0;
      const auto b = r.before.keys.find(w.key);
      if (!number(w.value, after)) continue;
      if (b != r.before.keys.end() && (b->second.kind != shadow_key::type::string || !number(b->second.value, before))) continue;
      m.by = after - before;
    } else {
      continue;
    }
    if (up ? m.by > 0 : m.by < 0) return m;
  }
  return std::nullopt;
}

bool raised_again(const prober& p, const probe_run& r, const count_move& c) {
  const auto m = moved_count(p, r, true);
  return m && m->key == c.key && m->field == c.field;
}

// `s` with the count `c` (or a guard number) set to `value`.
shadow_store with_number(shadow_store s, const std::string& key, const std::string& field, const std::string& value) {
  shadow_key& k = s.keys[key];
  if (field.empty()) {
    k.kind = shadow_key::type::string;
    k.value = value;
    return s;
  }
  k.kind = shadow_key::type::hash;
  for (auto& [name, v] : k.fields) {
    if (name == field) {
      v = value;
      return s;
    }
  }
  k.fields.emplace_back(field, value);
  return s;
}

// Whether an argument's value is among what the guard state had to hold (a client id the
// script checks is registered): an identity known before, not a holder the call records.
bool read_by_guards(const guard_state& g, std::string_view v) {
  for (const auto& [key, k] : g.store.keys) {
    if (key == v || field_of(k, v) != nullptr || score_of(k, v) != nullptr ||
        std::find(k.items.begin(), k.items.end(), v) != k.items.end()) {
      return true;
    }
  }
  return false;
}

// The ARGV a run recorded (as a field, a member or a set member) in the most keys other
// than `count_key`, leaving out `skip` and values the guards read; 0 when none.
std::uint8_t recorded_holder(const prober& p, const probe_run& r, const guard_state& g, const std::string& count_key,
                             std::uint8_t skip) {
  std::uint8_t best = 0;
  std::size_t best_keys = 0;
  for (std::size_t i = 0; i < p.argv().size() && i < 255; ++i) {
    const auto a = static_cast<std::uint8_t>(i + 1);
    const std::string& v = p.argv()[i];
    if (a == skip || v.empty() || read_by_guards(g, v)) continue;
    std::vector<std::string_view> in;
    for (const shadow_write& w : r.result.writes) {
      using what = shadow_write::what;
      if (w.key == count_key || w.value != v) continue;
      if (w.kind != what::hash_set && w.kind != what::member_add && w.kind != what::set_add) continue;
      if (std::find(in.begin(), in.end(), w.key) == in.end()) in.push_back(w.key);
    }
    if (in.size() > best_keys) {
      best = a;
      best_keys = in.size();
    }
  }
  return best;
}

std::uint8_t key_position(const prober& p, std::string_view key) {
  for (std::size_t i = 0; i < p.keys().size() && i < 255; ++i) {
    if (p.keys()[i] == key) return static_cast<std::uint8_t>(i + 1);
  }
  return 0;
}

// Whether `text` holds `word` (lower case letters) in any case: the probes on the guards'
// state cost dozens of runs, spent only on a text that names a command they look for.
bool names(std::string_view text, std::string_view word) {
  for (std::size_t i = 0; i + word.size() <= text.size(); ++i) {
    std::size_t j = 0;
    while (j < word.size() && static_cast<char>(text[i + j] | 0x20) == word[j]) ++j;
    if (j == word.size()) return true;
  }
  return false;
}
// A count moves by INCR, INCRBY, DECR, DECRBY or HINCRBY.
bool moves_a_count(std::string_view text) { return names(text, "incr") || names(text, "decr"); }

bool try_counted_acquire(script_effect& e, prober& p) {
  auto g = guard_state_of(p);
  if (!g) return false;
  // The guard state holds every number at the clock; a count below its limit is 0.
  std::vector<shadow_store> candidates{g->store};
  for (const guard_number& n : g->numbers) candidates.push_back(with_number(g->store, n.key, n.field, "0"));
  // The first of them where a count is raised and a holder recorded, and that count
  // set to the clock refuses it.
  std::optional<probe_run> taken, refused;
  count_move count;
  std::uint8_t holder = 0, by_argv = 0;
  const std::string clock = std::to_string(p.now_ms());
  const std::string above = std::to_string(p.now_ms() * 3);
  shadow_store full;
  for (shadow_store& s : candidates) {
    auto run = p.run(std::move(s));
    if (!run) return false;
    const auto m = moved_count(p, *run, true);
    if (!m) continue;
    const std::uint8_t by = argv_of(p.argv(), std::to_string(m->by));
    if (by == 0 && m->by != 1) continue;  // raised by what no argument names
    const std::uint8_t h = recorded_holder(p, *run, *g, m->key, by);
    if (h == 0) continue;
    shadow_store at_clock = with_number(run->before, m->key, m->field, clock);
    auto again = p.run(at_clock);
    if (!again) return false;
    if (raised_again(p, *again, *m)) continue;  // raised whatever it holds: a tally, no limit
    taken = std::move(run);
    refused = std::move(again);
    full = std::move(at_clock);
    count = *m;
    holder = h;
    by_argv = by;
    break;
  }
  if (!taken) return false;
  // The limit: a number beside the count, or an ARGV, that raised above it lets the
  // acquire in again.
  for (const guard_number& n : g->numbers) {
    if (n.key != count.key || n.field == count.field || n.field.empty() || !e.limit_field.empty()) continue;
    auto run = p.run(with_number(full, n.key, n.field, above));
    if (!run) return false;
    if (raised_again(p, *run, count)) e.limit_field = n.field;
  }
  for (std::size_t i = 0; e.limit_field.empty() && i < p.argv().size() && i < 255; ++i) {
    const auto a = static_cast<std::uint8_t>(i + 1);
    std::int64_t v = 0;
    if (a == by_argv || a == holder || !number(p.argv()[i], v) || p.argv()[i] == clock) continue;
    auto run = p.run_with_argv(a, above, full);
    if (!run) return false;
    if (!raised_again(p, *run, count)) continue;
    e.limit_argv = a;
    break;
  }
  e.op = script_op::acquire;
  e.family = lock_family::semaphore;
  e.shared = true;
  e.counted = true;
  e.lock_key = key_position(p, count.key);
  e.owner_argv = holder;
  e.permits_argv = by_argv;
  e.counter_field = count.field;
  // The holder's lease: the expiry it is scored by, where a sorted set records it.
  for (const shadow_write& w : taken->result.writes) {
    if (w.kind != shadow_write::what::member_add || w.value != p.argv()[holder - 1u]) continue;
    p.lease_of(*taken, w.key, e, w.value);
    if (e.lease_argv == 0) continue;
    e.expiry_key = key_position(p, w.key);
    break;
  }
  add_path(e, p, *taken, 1, op_outcome::ok);
  add_path(e, p, *refused, 1, op_outcome::contended);
  return true;
}

// A release that lowers no count but scores an argument's member of a sorted set among
// KEYS at or before the clock (its expiry passed: a later call drops it): that argument
// and that set.
bool try_expiry_release(script_effect& e, const prober& p, const probe_run& r, const guard_state& g) {
  for (const shadow_write& w : r.result.writes) {
    if (w.kind != shadow_write::what::member_add) continue;
    const std::uint8_t a = argv_of(p.argv(), w.value);
    const std::uint8_t k = key_position(p, w.key);
    char* end = nullptr;
    const double score = std::strtod(w.ttl.c_str(), &end);
    // The past score is the script's own (0, or a literal): one an argument carries is
    // the caller's, any time at all.
    if (a == 0 || k == 0 || end == w.ttl.c_str() || !(score <= static_cast<double>(p.now_ms())) ||
        argv_of(p.argv(), w.ttl) != 0 || read_by_guards(g, w.value)) {
      continue;
    }
    e.op = script_op::unlock;
    e.family = lock_family::semaphore;
    e.shared = true;
    e.counted = true;
    e.lock_key = 0;
    e.expiry_key = k;
    e.owner_argv = a;
    add_path(e, p, r, 1, op_outcome::ok);
    return true;
  }
  return false;
}

bool try_counted_release(script_effect& e, prober& p) {
  auto g = guard_state_of(p);
  if (!g) return false;
  auto lowered = p.run(g->store);
  if (!lowered) return false;
  const auto count = moved_count(p, *lowered, false);
  if (!count) return !moved_count(p, *lowered, true) && try_expiry_release(e, p, *lowered, *g);
  // The count as it stands while a permit is held (the guard state may not hold it: a
  // script that lowers it without reading it first), so that what the release answers
  // differs from what it answers for no holder.
  g->store = with_number(std::move(g->store), count->key, count->field, std::to_string(p.now_ms()));
  auto run = p.run(g->store);
  if (!run || !moved_count(p, *run, false)) return false;
  // The record dropped: a field, member or set member named by an ARGV that was there.
  std::uint8_t holder = 0;
  for (const shadow_write& w : run->result.writes) {
    using what = shadow_write::what;
    if (w.key == count->key || (w.kind != what::hash_del && w.kind != what::member_del && w.kind != what::set_del)) continue;
    const std::uint8_t a = argv_of(p.argv(), w.value);
    const auto b = run->before.keys.find(w.key);
    if (a == 0 || b == run->before.keys.end()) continue;
    const shadow_key& k = b->second;
    if (field_of(k, w.value) != nullptr || score_of(k, w.value) != nullptr ||
        std::find(k.items.begin(), k.items.end(), w.value) != k.items.end()) {
      holder = a;
      break;
    }
  }
  if (holder == 0) return false;
  // Without that record (a holder never taken, or gone already) it lowers nothing.
  const std::string& value = p.argv()[holder - 1u];
  shadow_store without = g->store;
  for (auto& [key, k] : without.keys) {
    std::erase_if(k.fields, [&](const auto& f) { return f.first == value; });
    std::erase_if(k.members, [&](const auto& m) { return m.first == value; });
    std::erase_if(k.items, [&](const std::string& i) { return i == value; });
  }
  std::erase_if(without.keys, [](const auto& kv) {
    const shadow_key& k = kv.second;
    return (k.kind == shadow_key::type::hash && k.fields.empty()) || (k.kind == shadow_key::type::zset && k.members.empty()) ||
           (k.kind == shadow_key::type::set && k.items.empty());
  });
  auto unheld = p.run(std::move(without));
  if (!unheld) return false;
  if (moved_count(p, *unheld, false)) return false;
  e.op = script_op::unlock;
  e.family = lock_family::semaphore;
  e.shared = true;
  e.counted = true;
  e.lock_key = key_position(p, count->key);
  e.owner_argv = holder;
  e.counter_field = count->field;
  add_path(e, p, *run, 1, op_outcome::ok);
  add_path(e, p, *unheld, 1, op_outcome::rejected);
  return true;
}

bool same_sig(const reply_sig& a, const reply_sig& b) {
  return a.kind == b.kind && a.integer == b.integer && a.seconds == b.seconds && a.argv == b.argv && a.text == b.text &&
         a.first == b.first && a.first_integer == b.first_integer && a.first_argv == b.first_argv &&
         a.first_text == b.first_text;
}

}  // namespace

script_effect analyse_script(std::string_view text, std::span<const std::string_view> keys,
                             std::span<const std::string_view> argv, const sandbox_limits& limits) {
  script_effect e;
  if (keys.empty()) {
    e.finding = "no KEYS: no lock";
    return e;
  }
  // Repeated arguments are made distinct, so that a write names one position; when that
  // finds nothing, once more as sent: raised, a repeat may change what the script does
  // (a permit count equal to a limit of 1, raised above it, is always refused).
  probe_budget budget(limits);
  std::vector<std::vector<std::string>> tries{distinct_argv(argv)};
  if (std::vector<std::string> sent(argv.begin(), argv.end()); sent != tries.front()) tries.push_back(std::move(sent));
  for (std::size_t t = 0;; ++t) {
    e = script_effect{};
    prober p(text, keys, std::move(tries[t]), limits, budget);
    auto absent = p.run(shadow_store{});
    if (!absent) {
      e.finding = "not understood: " + p.failure();
      e.hit_limit = p.hit_limit();
      return e;
    }
    p.learn_derived(*absent);
    if (try_acquire(e, p, *absent) || (e.finding.empty() && try_release_or_extend(e, p, *absent))) break;
    if (e.finding.empty() && p.failure().empty() && t + 1 < tries.size()) continue;
    if (p.failure().empty() && (moves_a_count(text) || names(text, "zadd"))) {
      // Every probe ran and none found a lock: on a state its guards let through, a
      // counted semaphore's acquire or release?
      const std::string standard = std::move(e.finding);
      prober guarded(text, keys, distinct_argv(argv), limits, budget);
      e = script_effect{};
      if (moves_a_count(text) && try_counted_acquire(e, guarded)) break;
      e = script_effect{};
      // (Once a run is out of budget, no more: a hostile script costs one run here.)
      if (!guarded.hit_limit() && try_counted_release(e, guarded)) break;
      e = script_effect{};
      e.finding = standard;
    }
    std::string why = !e.finding.empty()      ? e.finding
                      : p.failure().empty() ? std::string("no lock effect found")
                                            : "not understood: " + p.failure();
    e = script_effect{};
    e.finding = std::move(why);
    e.hit_limit = p.hit_limit();
    e.ran = p.failure().empty();
    return e;
  }
  // One path per distinct (reply, outcome); a release that answers the same whether the
  // key is gone or another owner's is refused, not "expired".
  for (effect_path& path : e.paths) {
    if (path.outcome != op_outcome::expired) continue;
    for (const effect_path& other : e.paths) {
      if (other.outcome == op_outcome::rejected && same_sig(other.reply, path.reply)) path.outcome = op_outcome::rejected;
    }
  }
  std::vector<effect_path> unique;
  for (effect_path& path : e.paths) {
    const auto seen = std::find_if(unique.begin(), unique.end(), [&](const effect_path& u) {
      return u.outcome == path.outcome && same_sig(u.reply, path.reply);
    });
    // One path reached by several probes is own-hold-only when each of them was.
    if (seen != unique.end()) seen->own_hold_only = seen->own_hold_only && path.own_hold_only;
    else unique.push_back(std::move(path));
  }
  e.paths = std::move(unique);
  e.finding = describe(e);
  e.ran = true;
  return e;
}

namespace {

// 2: the reply is exactly this; 1: of this kind (a TTL, a value from the state); 0: no.
int matches(reply_sig::form kind, std::int64_t integer, std::uint8_t argv_at, const std::string& text,
            observed_reply::form got, std::int64_t got_integer, std::string_view got_text,
            std::span<const std::string_view> keys, std::span<const std::string_view> argv) {
  using form = reply_sig::form;
  using seen = observed_reply::form;
  switch (kind) {
    case form::nil: return got == seen::nil ? 2 : 0;
    case form::integer: return got == seen::integer && got_integer == integer ? 2 : 0;
    case form::ttl: return got == seen::integer ? 1 : 0;
    case form::key_count: return got == seen::integer && got_integer == static_cast<std::int64_t>(keys.size()) ? 2 : 0;
    case form::status: return (got == seen::status || got == seen::text) && got_text == text ? 2 : 0;
    case form::error: return got == seen::error ? 2 : 0;
    case form::argv:
      return (got == seen::text || got == seen::status) && argv_at >= 1 && argv_at <= argv.size() &&
                     got_text == argv[argv_at - 1]
                 ? 2
                 : 0;
    case form::key:
      return (got == seen::text || got == seen::status) && argv_at >= 1 && argv_at <= keys.size() &&
                     got_text == keys[argv_at - 1]
                 ? 2
                 : 0;
    case form::text: return (got == seen::text || got == seen::status) && got_text == text ? 2 : 0;
    case form::any_text: return got == seen::text ? 1 : 0;
    case form::array: return got == seen::array ? 1 : 0;
  }
  return 0;
}

}  // namespace

reply_reading read_reply(const script_effect& e, const observed_reply& reply, std::span<const std::string_view> keys,
                         std::span<const std::string_view> argv) {
  reply_reading out;
  int best = 0;
  const effect_path* chosen = nullptr;
  bool ok_fits = false;        // at the best level: a success fits
  bool others_own_only = true; // ... and every other outcome that fits needs the caller's own hold
  for (const effect_path& p : e.paths) {
    const reply_sig& s = p.reply;
    int level = 0;
    if (s.kind == reply_sig::form::array) {
      if (reply.kind != observed_reply::form::array) continue;
      level = reply.first == observed_reply::form::none && s.first == reply_sig::form::nil
                  ? 2
                  : matches(s.first, s.first_integer, s.first_argv, s.first_text, reply.first, reply.first_integer,
                            reply.first_text, keys, argv);
    } else {
      level = matches(s.kind, s.integer, s.argv, s.text, reply.kind, reply.integer, reply.text, keys, argv);
    }
    if (level == 0 || level < best) continue;
    if (level > best) {
      best = level;
      chosen = &p;
      out.ambiguous = false;
      out.outcome = p.outcome;
      ok_fits = false;
      others_own_only = true;
    } else if (p.outcome != out.outcome) {
      out.ambiguous = true;
    }
    if (p.outcome == op_outcome::ok) ok_fits = true;
    else others_own_only = others_own_only && p.own_hold_only;
  }
  if (chosen == nullptr) {
    out.ambiguous = true;
    out.outcome = op_outcome::none;
    return out;
  }
  if (out.ambiguous) {
    out.outcome = op_outcome::none;
    out.ok_unless_own_hold = ok_fits && others_own_only;
    return out;
  }
  const reply_sig& s = chosen->reply;
  if (s.kind == reply_sig::form::ttl && reply.kind == observed_reply::form::integer) {
    out.ttl_ms = s.seconds ? reply.integer * 1000 : reply.integer;
  } else if (s.kind == reply_sig::form::array && s.first == reply_sig::form::ttl &&
             reply.first == observed_reply::form::integer) {
    out.ttl_ms = s.first_seconds ? reply.first_integer * 1000 : reply.first_integer;
  }
  return out;
}

}  // namespace lockscope::locks::effect
