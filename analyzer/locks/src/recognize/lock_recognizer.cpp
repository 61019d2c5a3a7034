#include "lockscope/locks/lock_recognizer.hpp"
#include "lockscope/locks/lock_report.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "lockscope/locks/command_words.hpp"
#include "lockscope/locks/lock_patterns.hpp"
#include "lru_cache.hpp"
#include "value_flow.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/resp/ascii.hpp"

namespace lockscope::locks {

namespace {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using string_map = std::unordered_map<std::string, V, string_hash, std::equal_to<>>;

using resp::iequals;

bool parse_int(std::string_view s, std::int64_t& out) noexcept { return parse_wire_int(s, out); }

// Seconds to milliseconds, saturating (the value comes from the wire).
std::int64_t seconds_to_ms(std::int64_t s) noexcept {
  constexpr std::int64_t limit = INT64_MAX / 1000;
  return s > limit ? INT64_MAX : s < -limit ? -INT64_MAX : s * 1000;
}

bool is_number(std::string_view s) noexcept {
  std::int64_t v = 0;
  return parse_int(s, v);
}

// An owner id: Redisson's `<uuid>:<thread>` or anything with a ':' that is not a number.
bool looks_like_owner(std::string_view s) noexcept {
  return lock::parse_owner_id(s).has_value() || (s.find(':') != std::string_view::npos && !is_number(s));
}

bool starts_with(std::string_view s, std::string_view p) noexcept { return s.substr(0, p.size()) == p; }

// The reply, reduced to what lock outcomes need.
struct reply_view {
  enum class shape : std::uint8_t { none, null, integer, ok, error, array, other } kind = shape::none;
  std::int64_t integer = 0;
  const message* m = nullptr;
  std::size_t root = message::npos;
};

// A reply that is a string: OK, a number (RESP2 clients' integers as bulk strings), or other.
[[gnu::noinline]] void read_string_reply(reply_view& r, const message_node& n) {
  const message& m = *r.m;
  if (n.type == resp::type::simple_string) {
    r.kind = iequals(m.text(n), "OK") ? reply_view::shape::ok : reply_view::shape::other;
    return;
  }
  if ((n.flags & resp::node_flags::null_bulk) != 0) {
    r.kind = reply_view::shape::null;
    return;
  }
  r.kind = iequals(m.text(n), "OK") ? reply_view::shape::ok : reply_view::shape::other;
  std::int64_t v = 0;
  if (parse_int(m.text(n), v)) {
    r.kind = reply_view::shape::integer;
    r.integer = v;
  }
}

inline reply_view read_reply(const message* m) {
  reply_view r;
  if (m == nullptr || m->empty()) return r;
  r.m = m;
  r.root = m->root();
  if (r.root == message::npos) return r;
  const message_node& n = m->nodes()[r.root];
  switch (n.type) {
    case resp::type::null:
      r.kind = reply_view::shape::null;
      break;
    case resp::type::integer:
      r.kind = reply_view::shape::integer;
      r.integer = n.integer;
      break;
    case resp::type::boolean:
      r.kind = reply_view::shape::integer;
      r.integer = n.integer != 0 ? 1 : 0;
      break;
    case resp::type::simple_error:
    case resp::type::bulk_error:
      r.kind = reply_view::shape::error;
      break;
    case resp::type::array:
    case resp::type::set:
      r.kind = (n.flags & resp::node_flags::null_array) != 0 ? reply_view::shape::null : reply_view::shape::array;
      break;
    case resp::type::simple_string:
    case resp::type::bulk_string:
      read_string_reply(r, n);
      break;
    default:
      r.kind = reply_view::shape::other;
  }
  return r;
}

// Integer elements of an array reply (up to `out.size()`); returns how many.
std::size_t array_integers(const reply_view& r, std::span<std::int64_t> out, std::size_t& total) {
  std::size_t k = 0;
  total = 0;
  if (r.kind != reply_view::shape::array) return 0;
  r.m->for_each_child(r.root, [&](const message_node& e) {
    std::int64_t v = -1;
    if (e.type == resp::type::integer) v = e.integer;
    else if (e.type == resp::type::boolean) v = e.integer != 0 ? 1 : 0;
    else if (e.type == resp::type::bulk_string || e.type == resp::type::simple_string) {
      if (!parse_int(r.m->text(e), v)) v = -1;
    }
    if (k < out.size()) out[k++] = v;
    ++total;
    return true;
  });
  return k;
}

}  // namespace

struct lock_recognizer::state {
  // Classification by exact script text (EVAL) and by SHA1 (EVALSHA).
  struct sha_entry {
    script_class cls;
    bool inferred = false;       // learnt from the argument shape, not from the text
    bool acquire_proven = false; // an inferred SHA that answered nil or a PTTL >= 2
    // Value flow (an inferred [value, ttl] script): calls that showed it to be the
    // first script of a value (an acquire) or a later one (an extend).
    std::uint32_t acquire_votes = 0;
    std::uint32_t extend_votes = 0;
  };
  // The built-in scripts: always known, never evicted.
  string_map<script_class> builtin_text;
  // By SHA1: built at the first lookup by SHA1 (EVALSHA, SCRIPT LOAD, a new EVAL), as
  // hashing the scripts costs more than a short capture's whole analysis.
  string_map<sha_entry> builtin_sha_table;
  bool builtin_sha_ready = false;
  string_map<sha_entry>& builtin_sha() {
    if (!builtin_sha_ready) {
      builtin_sha_ready = true;
      auto add = [this](std::string_view text, const std::string& sha) {
        builtin_sha_table[sha] = sha_entry{builtin_text.find(text)->second, false, false};
      };
      for (const lock::script_info& s : lock::all_scripts()) add(s.text, std::string(s.sha1));
      for (const known_script& s : known_scripts()) add(s.text, lock::sha1_hex(s.text));
      for (const known_script& s : client_scripts()) add(s.text, lock::sha1_hex(s.text));
    }
    return builtin_sha_table;
  }
  // Scripts and SHA1s learnt from the capture, least recently used forgotten first.
  recognizer_detail::lru_cache<script_class> by_text{script_cache_entries, script_cache_bytes};
  recognizer_detail::lru_cache<sha_entry> by_sha{sha_cache_entries, sha_cache_entries * 40};
  // The last EVAL's script (clients repeat one, and comparing its text is cheaper than
  // hashing it): a built-in's, or a by_text entry's, forgotten whenever by_text changes
  // (an insert may evict it).
  const std::string* last_eval_text = nullptr;
  const script_class* last_eval_class = nullptr;
  // The ingest interner's identity of last_eval_text's bytes (exchange::interned_identity),
  // when the last EVAL carried one; 0: none. Valid only with last_eval_text: an EVAL
  // with this identity has that script, known with no compare of its (by then cold)
  // bytes. Forgotten with last_eval_text.
  std::uint64_t last_eval_identity = 0;
  std::array<char, 40> sha_scratch{};
  std::array<char, 40> vote_scratch{};
  // The database of each connection not simply in db 0 since its SYN: SELECTed (or
  // RESET) ones, and -1 for those whose earlier commands may be missing. One entry a
  // connection, dropped when it ends; the last one looked up is cached.
  std::unordered_map<std::uint64_t, std::int32_t> databases;
  std::uint64_t last_db_connection = 0;
  std::int32_t last_db = 0;

  std::int32_t database(const exchange& e) {
    if (e.connection == last_db_connection && (e.client_from_start || last_db != 0)) return last_db;
    std::int32_t db = 0;
    if (const auto it = databases.find(e.connection); it != databases.end()) db = it->second;
    else if (!e.client_from_start) databases.emplace(e.connection, db = -1);
    last_db_connection = e.connection;
    last_db = db;
    return db;
  }
  void set_database(std::uint64_t connection, std::int32_t db) {
    databases[connection] = db;
    last_db_connection = connection;
    last_db = db;
  }
  // Lock values seen recently (see value_flow.hpp), and the script of the current call
  // (binary SHA1; zero for an EVAL, whose script is known by its text).
  recognizer_detail::value_flow flow{value_flow_entries};
  std::array<std::uint8_t, 20> current_sha{};
  // current_sha = {} in three stores (an EVAL per exchange; GCC zeroed it with `rep stos`).
  void clear_current_sha() noexcept {
    static constexpr std::uint8_t zeros[20] = {};
    std::memcpy(current_sha.data(), zeros, 8);
    std::memcpy(current_sha.data() + 8, zeros, 8);
    std::memcpy(current_sha.data() + 16, zeros, 4);
  }
  bool current_is_script = false;
  // Redis Cluster: connections whose last command was an answered ASKING (the next
  // call is the asked one), the current redirect's target text, and the node pairs
  // already reported as cluster_link (a hash each; capped, then forgotten and
  // reported again, which the timeline takes as no change).
  std::unordered_set<std::uint64_t> asking;
  // The lock channels each connection is subscribed to, as its confirmed (S)SUBSCRIBEs,
  // (S)UNSUBSCRIBEs and messages show: an UNSUBSCRIBE naming no channel (redis-py's
  // unsubscribe(), go-redis) or a RESET leaves them all without naming them. At most
  // max_tracked_channels a connection (the oldest forgotten); dropped when it ends.
  struct tracked_channel {
    std::string name;
    bool sharded = false;
  };
  static constexpr std::size_t max_tracked_channels = 256;
  std::unordered_map<std::uint64_t, std::vector<tracked_channel>> channels;
  void note_subscribed(std::uint64_t connection, std::string_view channel, bool sharded) {
    auto& list = channels[connection];
    for (const tracked_channel& c : list) {
      if (c.name == channel) return;
    }
    if (list.size() >= max_tracked_channels) list.erase(list.begin());
    list.push_back({std::string(channel), sharded});
  }
  void note_unsubscribed(std::uint64_t connection, std::string_view channel) {
    const auto it = channels.find(connection);
    if (it == channels.end()) return;
    std::erase_if(it->second, [&](const tracked_channel& c) { return c.name == channel; });
    if (it->second.empty()) channels.erase(it);
  }
  // The channels a bare (S)UNSUBSCRIBE (sharded: SUNSUBSCRIBE) or a RESET (all) leaves;
  // forgotten here.
  std::vector<tracked_channel> take_channels(std::uint64_t connection, bool all, bool sharded) {
    std::vector<tracked_channel> out;
    const auto it = channels.find(connection);
    if (it == channels.end()) return out;
    std::erase_if(it->second, [&](tracked_channel& c) {
      if (!all && c.sharded != sharded) return false;
      out.push_back(std::move(c));
      return true;
    });
    if (it->second.empty()) channels.erase(it);
    return out;
  }
  std::string redirect_text;
  std::string link_text;
  std::unordered_set<std::uint64_t> links_reported;

  state() {
    auto add = [this](std::string_view text) {
      if (builtin_text.find(text) == builtin_text.end()) builtin_text.emplace(std::string(text), classify_script(text));
    };
    for (const lock::script_info& s : lock::all_scripts()) add(s.text);
    for (const known_script& s : known_scripts()) add(s.text);
    for (const known_script& s : client_scripts()) add(s.text);
  }

  // Makes `text` the last EVAL's script when it is known.
  bool find_eval(std::string_view text) {
    if (const auto it = builtin_text.find(text); it != builtin_text.end()) {
      last_eval_text = &it->first;
      last_eval_class = &it->second;
      return true;
    }
    if (auto* e = by_text.find(text)) {
      last_eval_text = &e->key;
      last_eval_class = &e->value;
      return true;
    }
    return false;
  }
  sha_entry* find_sha(std::string_view sha) {
    if (const auto it = builtin_sha().find(sha); it != builtin_sha().end()) return &it->second;
    if (auto* e = by_sha.find(sha)) return &e->value;
    return nullptr;
  }
  // A script seen in full (EVAL, SCRIPT LOAD) and its SHA1.
  script_class learn(std::string_view text, std::string_view sha, recognizer_stats& stats) {
    script_class c;
    if (const auto it = builtin_text.find(text); it != builtin_text.end()) {
      c = it->second;
    } else if (auto* e = by_text.find(text)) {
      c = e->value;
    } else {
      c = classify_script(text);
      last_eval_text = nullptr;
      last_eval_class = nullptr;
      last_eval_identity = 0;
      by_text.insert(text, c);
      stats.scripts_evicted = by_text.evictions();
    }
    if (builtin_sha().find(sha) == builtin_sha().end()) {
      by_sha.insert(sha, sha_entry{c, false, false});
      stats.shas_evicted = by_sha.evictions();
    }
    return c;
  }

  // The role value flow has shown an inferred script to play (acquire or extend),
  // once the votes agree (4 to 1 at least); none before.
  static script_op learned_role(const sha_entry& e) noexcept {
    if (e.acquire_votes >= 2 && e.extend_votes * 4 <= e.acquire_votes) return script_op::acquire;
    if (e.extend_votes >= 2 && e.acquire_votes * 4 <= e.extend_votes) return script_op::extend;
    return script_op::none;
  }
  static std::array<std::uint8_t, 20> sha_bytes(std::string_view hex) noexcept {
    std::array<std::uint8_t, 20> out{};
    auto nibble = [](char c) { return static_cast<std::uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
    for (std::size_t i = 0; i < 20 && 2 * i + 1 < hex.size(); ++i) {
      out[i] = static_cast<std::uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    }
    return out;
  }
  // The script that carried a value first turns out to be that value's acquire.
  void vote_first_acquire(recognizer_detail::value_record& rec) {
    if (!rec.first_is_sha || rec.first_voted) return;
    rec.first_voted = true;
    static constexpr char digits[] = "0123456789abcdef";
    for (std::size_t i = 0; i < 20; ++i) {
      vote_scratch[2 * i] = digits[rec.first_sha[i] >> 4];
      vote_scratch[2 * i + 1] = digits[rec.first_sha[i] & 15];
    }
    if (auto* e = by_sha.find({vote_scratch.data(), 40}); e != nullptr && e->value.inferred) ++e->value.acquire_votes;
  }

  // The role of an unseen [value, ttl] script from how its value flowed so far (see
  // the header): the first script a value meets is its acquire, a later one its extend.
  script_op value_role(sha_entry& se, std::string_view server, std::string_view key, std::string_view value,
                       const std::array<std::uint8_t, 20>& sha, bool answered_yes, std::int64_t at_us) {
    script_op by_flow = script_op::acquire;  // a fresh value
    if (recognizer_detail::value_record* rec = flow.find(recognizer_detail::value_key(server, key, value))) {
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

  // Follows a value through a SET-based or node-redlock operation about to be
  // emitted; a value-checked call that changed nothing gets outcome `none`.
  void track_value(lock_operation& op) {
    if (op.owner.empty() || op.lock.empty()) return;
    const std::uint64_t k = recognizer_detail::value_key(op.server_text, op.lock, op.owner);
    recognizer_detail::value_record* rec = flow.find(k);
    const std::int64_t at = op.at_us();
    auto fresh = [&](script_op role) -> recognizer_detail::value_record& {
      recognizer_detail::value_record& r = flow.insert(k);
      r.first_is_sha = current_is_script;
      r.first_sha = current_sha;
      r.first_role = role;
      return r;
    };
    auto holds = [&](recognizer_detail::value_record& r) {
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
            recognizer_detail::value_record& r = fresh(script_op::none);
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

  // Redisson ≥ 3.24 / node-redisson: an unlock names a latch key per unlock call; a
  // retry of the call names it again, and the script then replays the first reply
  // (the latch value) without doing anything. The client DELs the latch afterwards.
  static std::uint64_t latch_key(std::string_view server, std::string_view latch) noexcept {
    return recognizer_detail::value_key(server, latch, "\x01latch");
  }
  bool replayed_unlock(std::string_view server, std::string_view latch) {
    const std::uint64_t k = latch_key(server, latch);
    if (flow.find(k) != nullptr) return true;
    flow.insert(k);
    return false;
  }

  // The SHA1 lower-cased into sha_scratch; empty when it is not 40 hex digits.
  std::string_view normal_sha(std::string_view s) {
    if (s.size() != 40) return {};
    for (std::size_t i = 0; i < 40; ++i) {
      const char c = resp::ascii_lower(s[i]);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
      sha_scratch[i] = c;
    }
    return {sha_scratch.data(), 40};
  }
};

lock_recognizer::lock_recognizer(lock_operation_sink& sink) : sink_(sink), state_(std::make_unique<state>()) {}
lock_recognizer::~lock_recognizer() = default;

std::size_t lock_recognizer::cached_scripts() const noexcept { return state_->by_text.size(); }
std::size_t lock_recognizer::cached_shas() const noexcept { return state_->by_sha.size(); }

void lock_recognizer::on_connection_end(std::uint64_t connection, std::int64_t at_us) {
  state& st = *state_;
  st.databases.erase(connection);
  st.asking.erase(connection);
  st.channels.erase(connection);
  if (st.last_db_connection == connection) {
    st.last_db_connection = 0;
    st.last_db = 0;
  }
  sink_.on_connection_end(connection, at_us);
}

std::string_view to_string(lock_op_kind k) noexcept {
  static constexpr std::string_view names[] = {"acquire",   "unlock",      "renew",   "force_unlock", "expire",
                                               "del",       "subscribe",   "unsubscribe", "message", "cluster_link"};
  return names[static_cast<std::size_t>(k)];
}

std::string_view to_string(cluster_reply r) noexcept {
  static constexpr std::string_view names[] = {"none", "moved", "ask", "tryagain", "clusterdown"};
  return names[static_cast<std::size_t>(r)];
}

cluster_redirect parse_cluster_error(std::string_view t) noexcept {
  cluster_redirect r;
  auto word_is = [&](std::string_view w) {
    return t.size() >= w.size() && t.substr(0, w.size()) == w && (t.size() == w.size() || t[w.size()] == ' ');
  };
  if (word_is("TRYAGAIN")) {
    r.kind = cluster_reply::tryagain;
    return r;
  }
  if (word_is("CLUSTERDOWN")) {
    r.kind = cluster_reply::clusterdown;
    return r;
  }
  const bool moved = word_is("MOVED");
  if (!moved && !word_is("ASK")) return r;
  r.malformed = true;  // until every part parsed
  const std::string_view rest = t.substr(std::min(t.size(), moved ? std::size_t{6} : std::size_t{4}));
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return r;
  std::int64_t slot = -1;
  if (!parse_int(rest.substr(0, space), slot) || slot < 0 || slot > 16383) return r;
  const std::string_view target = rest.substr(space + 1);
  const std::size_t colon = target.rfind(':');
  if (colon == std::string_view::npos || target.find(' ') != std::string_view::npos) return r;
  std::int64_t port = 0;
  if (!parse_int(target.substr(colon + 1), port) || port < 1 || port > 65535) return r;
  std::string_view host = target.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  r.kind = moved ? cluster_reply::moved : cluster_reply::ask;
  r.slot = static_cast<std::int32_t>(slot);
  r.host = host;
  r.port = static_cast<std::uint16_t>(port);
  r.malformed = false;
  return r;
}

std::string cluster_node_text(std::string_view host, std::uint16_t port) {
  return host.find(':') != std::string_view::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

void lock_recognizer::warn(const exchange& e, std::string_view what) {
  if (!warn_ || ++warnings_ > warning_limit) return;
  std::string line = fmt::format("{} > {}: {}", e.client_text, e.server_text, what);
  if (warnings_ == warning_limit) line += " (further such warnings are only counted)";
  // It quotes the wire (a server's error text): no escape sequence reaches the terminal.
  warn_(std::string(printable(line)));
}

void lock_recognizer::report_link(const exchange& e, std::string_view other_node) {
  state& st = *state_;
  if (other_node == e.server_text) return;
  std::uint64_t h = 1469598103934665603ull;
  for (std::string_view part : {e.server_text, std::string_view("\n"), other_node}) {
    for (char c : part) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  if (st.links_reported.size() >= 4096) st.links_reported.clear();
  if (!st.links_reported.insert(h).second) return;
  lock_operation op;
  op.kind = lock_op_kind::cluster_link;
  op.outcome = op_outcome::ok;
  op.connection = e.connection;
  op.client = e.client;
  op.client_text = e.client_text;
  op.server_text = e.server_text;
  op.redirect_to = other_node;
  op.request_us = e.request_us;
  op.reply_us = e.reply_us;
  ++stats_.operations;
  sink_.on_operation(op);
}

// CLUSTER SLOTS: [[start, end, [ip, port, id, ...], replicas...], ...]; CLUSTER SHARDS:
// [{slots: [...], nodes: [{id, port, ip, ...}, ...]}, ...] (maps, or flat arrays in RESP2).
void lock_recognizer::report_cluster_nodes(const exchange& e, bool shards) {
  const message& m = *e.reply;
  const auto& nodes = m.nodes();
  const std::size_t root = m.root();
  const std::uint32_t node_depth = nodes[root].depth + (shards ? 3 : 2);
  std::string text;
  for (std::size_t i = root + 1; i < nodes.size() && nodes[i].depth > nodes[root].depth; ++i) {
    const message_node& n = nodes[i];
    if (n.depth != node_depth || !(n.type == resp::type::array || n.type == resp::type::map)) continue;
    std::string_view host;
    std::int64_t port = -1;
    if (!shards) {
      if (i + 2 < nodes.size() && nodes[i + 1].depth == node_depth + 1 && nodes[i + 2].depth == node_depth + 1 &&
          nodes[i + 2].type == resp::type::integer) {
        host = m.text(nodes[i + 1]);
        port = nodes[i + 2].integer;
      }
    } else {
      std::string_view key;
      std::size_t k = 0;
      m.for_each_child(i, [&](const message_node& c) {
        if (k++ % 2 == 0) {
          key = m.text(c);
        } else if (key == "ip") {
          host = m.text(c);
        } else if (key == "port" && c.type == resp::type::integer) {
          port = c.integer;
        }
        return true;
      });
    }
    if (port < 1 || port > 65535 || host.empty() || host == "?") continue;
    text = cluster_node_text(host, static_cast<std::uint16_t>(port));
    report_link(e, text);
  }
}

namespace {

// The host part of an "ip:port" / "[ip]:port" endpoint text (for `-MOVED 3999 :6381`,
// which means the node's own address).
std::string_view host_of(std::string_view endpoint) {
  const std::size_t colon = endpoint.rfind(':');
  std::string_view host = endpoint.substr(0, colon == std::string_view::npos ? endpoint.size() : colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

// The lock a channel belongs to: `redisson_lock__channel:{x}`, `…:{x}:<owner>` (fair
// lock), `redisson_rwlock:{x}`, the very old `redisson_lock__channel__{x}`.
std::string_view lock_of_channel(std::string_view ch) {
  std::string_view rest;
  if (starts_with(ch, "redisson_lock__channel:")) rest = ch.substr(23);
  else if (starts_with(ch, "redisson_rwlock:")) rest = ch.substr(16);
  else if (starts_with(ch, "redisson_lock__channel__")) rest = ch.substr(24);
  else return {};
  if (!rest.empty() && rest.front() == '{') {
    const std::size_t close = rest.find('}');
    if (close != std::string_view::npos) return rest.substr(1, close - 1);
  }
  return rest;
}

bool is_lock_channel(std::string_view ch) { return !lock_of_channel(ch).empty(); }

}  // namespace

void lock_recognizer::on_exchange(const exchange& e) {
  ++stats_.exchanges;
  state& st = *state_;
  lock_operation op;
  op.connection = e.connection;
  op.db = st.database(e);
  op.client = e.client;
  op.client_text = e.client_text;
  op.server_text = e.server_text;
  op.request_us = e.request_us;
  op.reply_us = e.reply_us;
  st.current_is_script = false;
  // `in` is left as it is (a caller may emit it again with other fields changed): an
  // operation whose outcome emit changes (a redirect, a value-checked call) is copied.
  auto emit = [&](const lock_operation& in) {
    const bool redirect = in.redirect != cluster_reply::none && in.outcome == op_outcome::error;
    const bool value_checked =
        in.family == lock_family::set_based || in.family == lock_family::redlock_multi || in.family == lock_family::setnx;
    ++stats_.operations;
    if (in.inferred) ++stats_.inferred;
    if (!redirect && !value_checked) {
      sink_.on_operation(in);
      return;
    }
    lock_operation o = in;
    if (redirect) {
      o.outcome = op_outcome::redirected;  // not run on this node: retried elsewhere or later
      ++stats_.redirects;
    }
    if (o.outcome != op_outcome::redirected && value_checked) {
      st.track_value(o);
      stats_.values_tracked = st.flow.size();
      stats_.values_evicted = st.flow.evictions();
    }
    sink_.on_operation(o);
  };

  if (e.kind == exchange_kind::push) {
    if (e.reply == nullptr) return;
    const message& m = *e.reply;
    const std::size_t root = m.root();
    if (root == message::npos) return;
    std::array<std::string_view, 4> parts{};
    std::size_t k = 0;
    m.for_each_child(root, [&](const message_node& n) {
      if (k < parts.size()) parts[k] = m.text(n);
      ++k;
      return k < parts.size();
    });
    op.reply_us = e.request_us;
    if (iequals(parts[0], "sunsubscribe") && k >= 2 && is_lock_channel(parts[1])) {
      // Answering no SUNSUBSCRIBE: the server dropped the shard channel (its slot moved
      // to another node); the subscriber has to subscribe again on the new owner.
      op.kind = lock_op_kind::unsubscribe;
      op.server_dropped = true;
      op.channel = parts[1];
      op.lock = lock_of_channel(parts[1]);
      op.outcome = op_outcome::ok;
      op.family = starts_with(parts[1], "redisson_rwlock") ? lock_family::redisson_read : lock_family::redisson;
      st.note_unsubscribed(e.connection, parts[1]);
      emit(op);
      return;
    }
    if ((iequals(parts[0], "message") || iequals(parts[0], "smessage")) && k >= 3 && is_lock_channel(parts[1])) {
      op.kind = lock_op_kind::message;
      op.channel = parts[1];
      op.lock = lock_of_channel(parts[1]);
      op.message = parts[2];
      op.outcome = op_outcome::ok;
      op.family = starts_with(parts[1], "redisson_rwlock") ? lock_family::redisson_read : lock_family::redisson;
      st.note_subscribed(e.connection, parts[1], iequals(parts[0], "smessage"));  // maybe begun before the capture
      emit(op);
    }
    return;
  }

  if (e.command.empty()) return;
  const std::string_view name = e.command[0];
  const command_word cmd = identify_command(name);
  const reply_view reply = read_reply(e.reply);
  const auto& args = e.command;

  // Redis Cluster: the asked call after an ASKING, and a redirecting reply.
  if (!st.asking.empty()) {
    if (const auto it = st.asking.find(e.connection); it != st.asking.end()) {
      op.asking = true;
      st.asking.erase(it);
    }
  }
  if (cmd == command_word::asking && args.size() == 1) {
    if (reply.kind == reply_view::shape::ok) st.asking.insert(e.connection);
    return;
  }
  if (reply.kind == reply_view::shape::error) {
    const std::string_view text = e.reply->text(e.reply->nodes()[reply.root]);
    const cluster_redirect r = parse_cluster_error(text);
    if (r.malformed) {
      ++stats_.malformed_redirects;
      warn(e, fmt::format("{} answered by a malformed cluster redirect \"{}\" (expected MOVED|ASK <slot 0-16383> "
                          "<host>:<port>): kept as an error reply",
                          name, text.substr(0, 80)));
    } else if (r.kind != cluster_reply::none) {
      op.redirect = r.kind;
      op.slot = r.slot;
      if (r.kind == cluster_reply::moved || r.kind == cluster_reply::ask) {
        st.redirect_text = cluster_node_text(r.host.empty() ? host_of(e.server_text) : r.host, r.port);
        op.redirect_to = st.redirect_text;
        report_link(e, st.redirect_text);
      }
    }
  }
  if (cmd == command_word::cluster && args.size() == 2 && (iequals(args[1], "SLOTS") || iequals(args[1], "SHARDS")) &&
      reply.kind == reply_view::shape::array) {
    report_cluster_nodes(e, iequals(args[1], "SHARDS"));
    return;
  }
  if (cmd == command_word::other) return;  // none of the commands below

  // Plain commands first: they are cheap to tell apart by name length.
  if (cmd == command_word::select && args.size() == 2) {
    std::int64_t db = 0;
    if (reply.kind == reply_view::shape::ok && parse_int(args[1], db) && db >= 0 && db <= INT32_MAX) {
      st.set_database(e.connection, static_cast<std::int32_t>(db));
    }
    return;
  }
  if (cmd == command_word::reset && args.size() == 1) {
    // Answered +RESET: the connection is back in db 0 (HELLO keeps the database).
    if (e.reply != nullptr && e.reply->root() != message::npos &&
        iequals(e.reply->text(e.reply->nodes()[e.reply->root()]), "RESET")) {
      st.set_database(e.connection, 0);
      // It also left every channel: each lock channel's subscription ends here.
      for (const auto& c : st.take_channels(e.connection, true, false)) {
        op.kind = lock_op_kind::unsubscribe;
        op.outcome = op_outcome::ok;
        op.channel = c.name;
        op.lock = lock_of_channel(c.name);
        op.family = starts_with(c.name, "redisson_rwlock") ? lock_family::redisson_read : lock_family::redisson;
        op.sub_count = -1;
        emit(op);
      }
    }
    return;
  }
  if (cmd == command_word::set && args.size() >= 3) {
    bool nx = false;
    std::int64_t lease = -1;
    for (std::size_t i = 3; i < args.size(); ++i) {
      if (iequals(args[i], "NX")) nx = true;
      else if ((iequals(args[i], "PX") || iequals(args[i], "EX")) && i + 1 < args.size()) {
        std::int64_t v = 0;
        if (parse_int(args[i + 1], v)) lease = iequals(args[i], "EX") ? seconds_to_ms(v) : v;
        ++i;
      }
    }
    if (!nx) return;
    op.kind = lock_op_kind::acquire;
    op.family = lock_family::set_based;
    op.lock = args[1];
    op.owner = args[2];
    op.lease_ms = lease;
    op.outcome = reply.kind == reply_view::shape::ok     ? op_outcome::ok
                 : reply.kind == reply_view::shape::null ? op_outcome::contended
                 : reply.kind == reply_view::shape::none ? op_outcome::no_reply
                                                         : op_outcome::error;
    emit(op);
    return;
  }
  if (cmd == command_word::setnx && args.size() == 3) {
    op.kind = lock_op_kind::acquire;
    op.family = lock_family::setnx;
    op.lock = args[1];
    op.owner = args[2];
    op.outcome = reply.kind != reply_view::shape::integer ? (reply.kind == reply_view::shape::none ? op_outcome::no_reply
                                                                                                   : op_outcome::error)
                 : reply.integer == 1                     ? op_outcome::ok
                                                          : op_outcome::contended;
    emit(op);
    return;
  }
  if ((cmd == command_word::expire || cmd == command_word::pexpire) && args.size() >= 3) {
    std::int64_t v = 0;
    if (!parse_int(args[2], v)) return;
    op.kind = lock_op_kind::expire;
    op.lock = args[1];
    op.lease_ms = cmd == command_word::expire ? seconds_to_ms(v) : v;
    op.outcome = reply.kind != reply_view::shape::integer ? op_outcome::no_reply
                 : reply.integer == 1                     ? op_outcome::ok
                                                          : op_outcome::none;
    emit(op);
    return;
  }
  if ((cmd == command_word::del || cmd == command_word::unlink) && args.size() == 2) {
    if (starts_with(args[1], "redisson_unlock_latch")) {
      st.flow.erase(state::latch_key(e.server_text, args[1]));
      return;
    }
    op.kind = lock_op_kind::del;
    op.lock = args[1];
    op.outcome = reply.kind != reply_view::shape::integer ? op_outcome::no_reply
                 : reply.integer >= 1                     ? op_outcome::ok
                                                          : op_outcome::none;
    emit(op);
    return;
  }
  const bool sub = cmd == command_word::subscribe || cmd == command_word::ssubscribe;
  const bool unsub = cmd == command_word::unsubscribe || cmd == command_word::sunsubscribe;
  if (sub || unsub) {
    if (sub && args.size() < 2) {
      ++stats_.skipped;
      warn(e, fmt::format("{} with no channel: skipped", name));
      return;
    }
    op.kind = sub ? lock_op_kind::subscribe : lock_op_kind::unsubscribe;
    op.outcome = reply.kind == reply_view::shape::error ? op_outcome::error : op_outcome::ok;
    // The paired confirmation (["unsubscribe", channel, count], RESP2 array or RESP3
    // push) is the first channel's; the others' arrive as pushes of their own.
    std::string_view confirmed;
    std::int64_t count = -1;
    if (e.reply != nullptr && e.reply->root() != message::npos) {
      std::size_t k = 0;
      e.reply->for_each_child(e.reply->root(), [&](const message_node& n) {
        if (k == 1) confirmed = e.reply->text(n);
        if (k == 2 && n.type == resp::type::integer) count = n.integer;
        return ++k < 3;
      });
    }
    const bool sharded = cmd == command_word::ssubscribe || cmd == command_word::sunsubscribe;
    auto emit_channel = [&](std::string_view channel) {
      op.channel = channel;
      op.lock = lock_of_channel(channel);
      op.family = starts_with(channel, "redisson_rwlock") ? lock_family::redisson_read : lock_family::redisson;
      op.sub_count = channel == confirmed ? count : -1;
      emit(op);
    };
    if (unsub && args.size() == 1) {
      // No channel named: it left all it was subscribed to. The confirmation names the
      // first (the others' come as pushes); the rest are the ones seen subscribed.
      if (op.outcome != op_outcome::ok) return;
      std::vector<state::tracked_channel> left = st.take_channels(e.connection, false, sharded);
      if (is_lock_channel(confirmed) &&
          std::none_of(left.begin(), left.end(), [&](const state::tracked_channel& c) { return c.name == confirmed; })) {
        left.push_back({std::string(confirmed), sharded});
      }
      for (const auto& c : left) emit_channel(c.name);
      return;
    }
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (!is_lock_channel(args[i])) continue;
      if (op.outcome == op_outcome::ok) {
        if (sub) st.note_subscribed(e.connection, args[i], sharded);
        else st.note_unsubscribed(e.connection, args[i]);
      }
      emit_channel(args[i]);
    }
    return;
  }
  if (cmd == command_word::script && args.size() == 3 && iequals(args[1], "LOAD")) {
    if (e.reply == nullptr) return;
    const std::size_t root = e.reply->root();
    if (root == message::npos) return;
    const std::string_view sha = st.normal_sha(e.reply->text(e.reply->nodes()[root]));
    if (sha.empty()) return;
    if (st.find_sha(sha) == nullptr) {
      ++stats_.scripts_seen;
      st.learn(args[2], sha, stats_);
    }
    return;
  }

  const bool eval = cmd == command_word::eval || cmd == command_word::eval_ro;
  const bool evalsha = cmd == command_word::evalsha || cmd == command_word::evalsha_ro;
  if (!(eval || evalsha) || args.size() < 3) return;
  std::int64_t numkeys = 0;
  if (!parse_int(args[2], numkeys) || numkeys < 0 || static_cast<std::size_t>(numkeys) > args.size() - 3) return;
  const std::span<const std::string_view> keys = args.subspan(3, static_cast<std::size_t>(numkeys));
  const std::span<const std::string_view> argv = args.subspan(3 + static_cast<std::size_t>(numkeys));

  script_class cls;
  state::sha_entry* sha_entry = nullptr;
  st.current_is_script = true;
  st.clear_current_sha();
  // The script's interned identity, when the session held it once (see exchange).
  const std::uint64_t script_identity = e.interned_argument == 1 ? e.interned_identity : 0;
  if (eval && script_identity != 0 && script_identity == st.last_eval_identity) {
    cls = *st.last_eval_class;  // the same bytes as the last EVAL's script: no compare
  } else if (eval && st.last_eval_text != nullptr && *st.last_eval_text == args[1]) {
    cls = *st.last_eval_class;
    st.last_eval_identity = script_identity;
  } else if (eval) {
    if (!st.find_eval(args[1])) {
      ++stats_.scripts_seen;
      cls = st.learn(args[1], lock::sha1_hex(args[1]), stats_);
      if (!cls.is_lock_script()) ++stats_.unknown_scripts;
      st.find_eval(args[1]);
    }
    cls = *st.last_eval_class;
    st.last_eval_identity = script_identity;
  } else {
    const std::string_view sha = st.normal_sha(args[1]);
    if (sha.empty()) return;
    st.current_sha = state::sha_bytes(sha);
    sha_entry = st.find_sha(sha);
    if (sha_entry == nullptr) {
      ++stats_.unknown_shas;
      sha_entry = &st.by_sha.insert(sha, state::sha_entry{{}, true, false}).value;
      stats_.shas_evicted = st.by_sha.evictions();
    }
    cls = sha_entry->cls;
    op.inferred = sha_entry->inferred;
  }
  if (!cls.is_lock_script() && !(sha_entry != nullptr && sha_entry->inferred)) return;

  auto arg_at = [](std::span<const std::string_view> v, std::uint8_t i) -> std::string_view {
    return i >= 1 && i <= v.size() ? v[i - 1] : std::string_view();
  };
  auto int_arg = [&](std::uint8_t i) -> std::int64_t {
    std::int64_t v = -1;
    if (!parse_int(arg_at(argv, i), v)) v = -1;
    return v;
  };

  if (sha_entry != nullptr && sha_entry->inferred) {
    // Unknown script: guess from the argument shape and the reply (see the header).
    const std::string_view k2 = keys.size() >= 2 ? keys[1] : std::string_view();
    script_class g;
    g.lock_key = 1;
    if (starts_with(k2, "redisson_lock_queue:")) {
      g.family = lock_family::redisson_fair;
      g.op = keys.size() == 3 ? script_op::acquire : script_op::unlock;
      g.owner_argv = g.op == script_op::acquire ? 2 : 3;
      g.lease_argv = g.op == script_op::acquire ? 1 : 2;
      g.channel_key = g.op == script_op::unlock ? 4 : 0;
    } else if (is_lock_channel(k2)) {
      g.family = starts_with(k2, "redisson_rwlock") ? lock_family::redisson_write : lock_family::redisson;
      g.channel_key = 2;
      if (argv.size() >= 3 && looks_like_owner(argv[2])) {
        g.op = script_op::unlock;
        g.owner_argv = 3;
        g.lease_argv = 2;
      } else if (argv.size() >= 2 && looks_like_owner(argv[1])) {
        g.op = script_op::unlock;  // read lock unlock: [message, owner]
        g.owner_argv = 2;
        g.family = lock_family::redisson_read;
      } else {
        g.op = script_op::force_unlock;
      }
    } else if (starts_with(k2, "redisson_lock_token:")) {
      g.family = lock_family::redisson_fenced;
      g.op = script_op::acquire;
      g.owner_argv = 2;
      g.lease_argv = 1;
    } else if (keys.size() >= 1 && argv.size() == keys.size() + 1 && is_number(argv[0]) && looks_like_owner(argv[1]) &&
               reply.kind == reply_view::shape::array) {
      g.family = lock_family::redisson;
      g.op = script_op::renew_batch;
      g.owner_argv = 2;
      g.lease_argv = 1;
    } else if (keys.size() == 1 && argv.size() == 2 && is_number(argv[0]) && looks_like_owner(argv[1])) {
      g.family = lock_family::redisson;
      g.owner_argv = 2;
      g.lease_argv = 1;
      const bool decisive = reply.kind == reply_view::shape::null ||
                            (reply.kind == reply_view::shape::integer && reply.integer >= 2) ||
                            (reply.kind == reply_view::shape::integer && reply.integer == -1);
      if (decisive) sha_entry->acquire_proven = true;
      g.op = sha_entry->acquire_proven || decisive ? script_op::acquire : script_op::renew;
    } else if (keys.size() >= 1 && argv.size() == 1 && reply.kind == reply_view::shape::integer) {
      // get == value → del: one key (redis-py, redsync, redis-plus-plus) or node-redlock's N.
      g.family = keys.size() == 1 ? lock_family::set_based : lock_family::redlock_multi;
      g.op = keys.size() == 1 ? script_op::release : script_op::multi_release;
      g.owner_argv = 1;
    } else if (keys.size() >= 1 && argv.size() >= 2 && !is_number(argv[0]) && is_number(argv[1]) &&
               reply.kind == reply_view::shape::integer) {
      // [value, ttl]: node-redlock's acquire and extend have the same shape; how the
      // value flows tells them apart.
      const script_op role = st.value_role(*sha_entry, e.server_text, keys[0], argv[0], st.current_sha,
                                           reply.integer >= 1, op.at_us());
      const bool multi = keys.size() > 1;
      g.family = multi ? lock_family::redlock_multi : lock_family::set_based;
      g.op = role == script_op::acquire ? (multi ? script_op::multi_acquire : script_op::acquire)
                                        : (multi ? script_op::multi_extend : script_op::extend);
      g.owner_argv = 1;
      g.lease_argv = 2;
      // redis-py's extend: [token, ms, "0" | "1"], the time added unless "1" (replace_ttl).
      if (g.op == script_op::extend && argv.size() == 3 && (argv[2] == "0" || argv[2] == "1")) {
        g.lease_added = true;
        g.replace_argv = 3;
      }
    }
    if (g.op == script_op::none) return;
    cls = g;
    op.inferred = true;
  }

  op.family = cls.family;
  op.shared = cls.family == lock_family::redisson_read;
  op.lock = arg_at(keys, cls.lock_key);
  op.owner = arg_at(argv, cls.owner_argv);
  op.channel = arg_at(keys, cls.channel_key);
  op.lease_ms = int_arg(cls.lease_argv);
  if (op.lock.empty() && cls.op != script_op::renew_batch && cls.op != script_op::multi_acquire &&
      cls.op != script_op::multi_extend && cls.op != script_op::multi_release) {
    return;
  }
  const bool no_reply = reply.kind == reply_view::shape::none;
  const bool error = reply.kind == reply_view::shape::error;

  switch (cls.op) {
    case script_op::acquire: {
      op.kind = lock_op_kind::acquire;
      if (no_reply) op.outcome = op_outcome::no_reply;
      else if (error) op.outcome = op_outcome::error;
      else if (cls.family == lock_family::redisson_fenced && reply.kind == reply_view::shape::array) {
        std::array<std::int64_t, 2> v{-1, -1};
        std::size_t total = 0;
        array_integers(reply, v, total);
        if (v[0] == -1) {
          op.outcome = op_outcome::ok;
          op.token = v[1];
        } else {
          op.outcome = op_outcome::contended;
          op.ttl_ms = v[0];
        }
      } else if (reply.kind == reply_view::shape::null && cls.family != lock_family::set_based) op.outcome = op_outcome::ok;
      else if (cls.family == lock_family::set_based && reply.kind == reply_view::shape::integer) {
        op.outcome = reply.integer >= 1 ? op_outcome::ok : op_outcome::contended;  // a script's 1 / 0
      } else if (cls.family == lock_family::set_based) op.outcome = reply.kind == reply_view::shape::ok ? op_outcome::ok : op_outcome::contended;
      else if (reply.kind == reply_view::shape::integer) {
        op.outcome = op_outcome::contended;
        op.ttl_ms = reply.integer;
      } else op.outcome = op_outcome::error;
      emit(op);
      return;
    }
    case script_op::unlock:
    case script_op::release: {
      op.kind = lock_op_kind::unlock;
      if (no_reply) op.outcome = op_outcome::no_reply;
      else if (error) op.outcome = op_outcome::error;
      else if (reply.kind == reply_view::shape::null) op.outcome = op_outcome::rejected;
      else if (reply.kind == reply_view::shape::integer) {
        if (cls.op == script_op::release) {
          op.outcome = reply.integer >= 1 ? op_outcome::ok : reply.integer == -1 ? op_outcome::expired : op_outcome::rejected;
        } else {
          op.outcome = reply.integer == 1 ? op_outcome::ok : reply.integer == 0 ? op_outcome::partial : op_outcome::rejected;
        }
      } else op.outcome = op_outcome::error;
      // (An error reply ran nothing: a TRYAGAIN/ASK'd unlock's retry is the first run.)
      if (!no_reply && !error && cls.op == script_op::unlock && keys.size() >= 3 &&
          starts_with(keys[2], "redisson_unlock_latch") && st.replayed_unlock(e.server_text, keys[2])) {
        op.outcome = op_outcome::none;  // a retried unlock: the reply replays the first
      }
      emit(op);
      return;
    }
    case script_op::renew:
    case script_op::extend: {
      op.kind = lock_op_kind::renew;
      op.lease_added = cls.lease_added && (cls.replace_argv == 0 || arg_at(argv, cls.replace_argv) != "1");
      op.outcome = no_reply ? op_outcome::no_reply
                   : error  ? op_outcome::error
                   : reply.kind == reply_view::shape::integer ? (reply.integer >= 1 ? op_outcome::ok : op_outcome::rejected)
                   : reply.kind == reply_view::shape::ok      ? op_outcome::ok
                                                              : op_outcome::rejected;
      emit(op);
      return;
    }
    case script_op::force_unlock: {
      op.kind = lock_op_kind::force_unlock;
      op.owner = {};
      op.lease_ms = -1;
      op.outcome = no_reply ? op_outcome::no_reply
                   : error  ? op_outcome::error
                   : reply.kind == reply_view::shape::integer && reply.integer == 1 ? op_outcome::ok
                                                                                     : op_outcome::none;
      emit(op);
      return;
    }
    case script_op::renew_batch: {
      op.kind = lock_op_kind::renew;
      op.lease_ms = int_arg(1);
      std::array<std::int64_t, 64> results{};
      std::size_t total = 0;
      const std::size_t n = array_integers(reply, results, total);
      for (std::size_t i = 0; i < keys.size(); ++i) {
        op.lock = keys[i];
        op.owner = i + 2 <= argv.size() ? argv[i + 1] : std::string_view();
        if (no_reply) op.outcome = op_outcome::no_reply;
        else if (error) op.outcome = op_outcome::error;
        else if (reply.kind == reply_view::shape::integer) op.outcome = reply.integer >= 1 ? op_outcome::ok : op_outcome::rejected;
        else if (i < n) op.outcome = results[i] >= 1 ? op_outcome::ok : op_outcome::rejected;
        else op.outcome = op_outcome::no_reply;
        emit(op);
      }
      return;
    }
    case script_op::multi_acquire:
    case script_op::multi_extend:
    case script_op::multi_release: {
      op.owner = arg_at(argv, cls.owner_argv);
      op.lease_ms = int_arg(cls.lease_argv);
      const bool all = reply.kind == reply_view::shape::integer && reply.integer >= static_cast<std::int64_t>(keys.size());
      for (std::string_view key : keys) {
        op.lock = key;
        if (cls.op == script_op::multi_acquire) {
          op.kind = lock_op_kind::acquire;
          op.outcome = no_reply ? op_outcome::no_reply : error ? op_outcome::error : all ? op_outcome::ok : op_outcome::contended;
        } else if (cls.op == script_op::multi_extend) {
          op.kind = lock_op_kind::renew;
          op.outcome = no_reply ? op_outcome::no_reply : error ? op_outcome::error : all ? op_outcome::ok : op_outcome::rejected;
        } else {
          op.kind = lock_op_kind::unlock;
          // The count says how many keys still held this value; which ones is not known.
          op.outcome = no_reply ? op_outcome::no_reply
                       : error  ? op_outcome::error
                       : reply.kind == reply_view::shape::integer && reply.integer > 0 ? op_outcome::ok
                                                                                        : op_outcome::rejected;
        }
        emit(op);
      }
      return;
    }
    case script_op::none:
      return;
  }
}

}  // namespace lockscope::locks
