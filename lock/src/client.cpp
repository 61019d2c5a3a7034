#include "lockscope/lock/client.hpp"

#include <array>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>
#include <fmt/format.h>

#include "cluster_router.hpp"
#include "lockscope/lock/cluster.hpp"
#include "lockscope/lock/lock_fsm.hpp"
#include "lockscope/lock/naming.hpp"
#include "lockscope/lock/replica_sync.hpp"
#include "lockscope/lock/scripts.hpp"
#include "lockscope/lock/subscriptions.hpp"
#include "sentinel_monitor.hpp"
#include "subscriber_events.hpp"

namespace lockscope::lock {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace detail {

namespace {

// One script as a Redisson dialect sends it: its bytes, and the layout they take.
struct dialect_script {
  std::string_view text;
  std::string_view sha1;
  bool publish_argv = false;  // the publish command (PUBLISH / SPUBLISH) is an ARGV (3.22+)
  bool latched = false;       // an unlock that takes the unlock latch key and its life (3.24+)
};

// What one Redisson release sends for every lock type this client speaks, picked from
// the catalogue of every release's scripts (scripts.hpp), and how that release
// behaves where the scripts do not say.
struct redisson_dialect {
  std::string release;
  dialect_script acquire, unlock, force_unlock, renew;
  dialect_script fair_acquire, fair_try_acquire, fair_unlock, fair_force_unlock, fair_acquire_failed;
  dialect_script fenced_acquire;
  dialect_script read_acquire, read_unlock, read_renew, read_force_unlock;
  dialect_script write_acquire, write_unlock, write_force_unlock;
  // 3.44+: LockTask's renewal script, several locks per call, a list of 0/1 replies.
  bool batched_renewal = false;
  // 3.13.3+: a fair tryLock(wait) passes its wait as the queue's thread wait (before:
  // always threadWaitTime).
  bool fair_wait_is_callers = false;
  // When an unlock puts internalLockLeaseTime back to the watchdog timeout
  // (RedissonLock.cancelExpirationRenewal): not before 3.19.2; after every unlock from
  // 3.19.2; from 3.27.2 only when the reply is nil or 1 (or there was none).
  enum class lease_reset : std::uint8_t { never, always, unless_still_held } reset = lease_reset::never;
};

// The dialect of `release` ("4.7.0"), or nullopt with `why` set.
std::optional<redisson_dialect> make_dialect(std::string_view release, std::string& why) {
  // A release as tagged: three dotted numbers.
  int dots = 0;
  bool well_formed = !release.empty() && release.front() != '.' && release.back() != '.';
  for (std::size_t i = 0; i < release.size(); ++i) {
    if (release[i] == '.') {
      ++dots;
      well_formed = well_formed && release[i - 1] != '.';
    } else {
      well_formed = well_formed && release[i] >= '0' && release[i] <= '9';
    }
  }
  const std::vector<const redisson_script*> rows =
      well_formed && dots == 2 ? redisson_scripts_of(release) : std::vector<const redisson_script*>{};
  if (rows.empty()) {
    why = fmt::format("Redisson release '{}' is not a release this client speaks (3.11.1 to 4.7.0, as tagged: "
                      "e.g. 4.7.0, 3.27.2, 3.16.8)",
                      release);
    return std::nullopt;
  }
  if (compare_releases(release, "3.11.1") < 0) {
    // 3.10.x's fair lock passes `now + threadWaitTime` where later releases pass the wait.
    why = fmt::format("Redisson {}: releases before 3.11.1 are not spoken (their fair lock's arguments differ)",
                      release);
    return std::nullopt;
  }
  redisson_dialect d;
  d.release = std::string(release);
  std::string missing;
  const auto pick = [&](dialect_script& out, redisson_lock_type type, redisson_role role,
                        std::optional<redisson_role> alternative = std::nullopt) {
    for (const std::optional<redisson_role> wanted : {std::optional<redisson_role>(role), alternative}) {
      if (!wanted) continue;
      for (const redisson_script* row : rows) {
        if (row->type != type || row->role != *wanted) continue;
        out = {row->text, row->sha1, row->text.find("redis.call(ARGV[") != std::string_view::npos,
               row->latch_key != 0};
        return *wanted;
      }
    }
    missing += fmt::format(" {} {}", to_string(type), to_string(role));
    return role;
  };
  using T = redisson_lock_type;
  using R = redisson_role;
  pick(d.acquire, T::lock, R::acquire);
  pick(d.unlock, T::lock, R::unlock);
  pick(d.force_unlock, T::lock, R::force_unlock);
  d.batched_renewal = pick(d.renew, T::lock, R::renew, R::renew_batch) == R::renew_batch;
  pick(d.fair_acquire, T::fair, R::acquire);
  pick(d.fair_try_acquire, T::fair, R::try_acquire);
  pick(d.fair_unlock, T::fair, R::unlock);
  pick(d.fair_force_unlock, T::fair, R::force_unlock);
  pick(d.fair_acquire_failed, T::fair, R::acquire_failed);
  pick(d.read_acquire, T::read, R::acquire);
  pick(d.read_unlock, T::read, R::unlock);
  pick(d.read_renew, T::read, R::renew, R::renew_batch);
  pick(d.read_force_unlock, T::read, R::force_unlock);
  pick(d.write_acquire, T::write, R::acquire);
  pick(d.write_unlock, T::write, R::unlock);
  pick(d.write_force_unlock, T::write, R::force_unlock);
  if (!missing.empty()) {
    why = fmt::format("Redisson {} lacks scripts this client needs:{}", release, missing);
    return std::nullopt;
  }
  // The fenced lock first shipped in 3.19.0; an older dialect keeps the 3.19 script
  // (nothing older could share a fenced lock anyway).
  if (std::string missing_fenced; true) {
    std::swap(missing, missing_fenced);
    pick(d.fenced_acquire, T::fenced, R::acquire_token);
    if (!missing.empty()) {
      const script_info& own = script(script_kind::fenced_acquire);
      d.fenced_acquire = {own.text, own.sha1, false, false};
    }
    missing.clear();
  }
  d.fair_wait_is_callers = compare_releases(release, "3.13.3") >= 0;
  if (compare_releases(release, "3.27.2") >= 0)
    d.reset = redisson_dialect::lease_reset::unless_still_held;
  else if (compare_releases(release, "3.19.2") >= 0)
    d.reset = redisson_dialect::lease_reset::always;
  return d;
}

// Up to twelve keys and arguments of one script call. The views must stay valid until
// the reply: they point into the heap object of the operation that waits for it.
struct script_call {
  std::string_view text;
  std::string_view sha1;
  std::uint8_t keys = 0;
  std::array<std::string_view, 12> values;
  std::size_t count = 0;
  // An unlock latch (3.24+) the caller deletes once the unlock answered, as Redisson's
  // unlockInnerAsync does.
  std::string_view latch;

  explicit script_call(const dialect_script& s) : text(s.text), sha1(s.sha1) {}
  script_call& key(std::string_view v) {
    values[count++] = v;
    ++keys;
    return *this;
  }
  script_call& arg(std::string_view v) {
    values[count++] = v;
    return *this;
  }
};

void encode_script_call(std::string& out, bool by_sha, const script_call& call) {
  resp::writer w(out);
  w.array(3 + call.count);
  w.bulk_string(by_sha ? "EVALSHA" : "EVAL");
  w.bulk_string(by_sha ? call.sha1 : call.text);
  const char digit = static_cast<char>('0' + call.keys);
  w.bulk_string(std::string_view(&digit, 1));
  for (std::size_t i = 0; i < call.count; ++i) w.bulk_string(call.values[i]);
}

std::string decimal(std::int64_t v) {
  char buffer[24];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  (void)ec;
  return std::string(buffer, end);
}

status error_status(std::error_code ec, const resp::value& reply) {
  if (reply.is_error() && !reply.text.empty()) {
    if (const redirect r = parse_redirect(reply.text); r.kind == redirect_kind::moved || r.kind == redirect_kind::ask)
      // Only a client without cluster routing sees these.
      return {ec, reply.text + " (the server is a Redis Cluster node: use a redis-cluster:// URL)"};
    return {ec, reply.text};
  }
  return {ec, {}};
}

status unexpected(std::string_view what, const resp::value& reply) {
  return {errc::unexpected_reply,
          fmt::format("unexpected reply to {}: type {}", what, resp::to_string(reply.type))};
}

std::atomic<std::uint64_t> next_thread_id{1};

// Redisson's scripts take the caller's wall clock (System.currentTimeMillis()).
std::string unix_millis_now() {
  return decimal(std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

class client_impl;
class acquire_op;

struct lock_state {
  std::shared_ptr<void> io_keepalive;  // the client's own io_context; destroyed after impl
  std::shared_ptr<client_impl> impl;
  std::string name;
  std::string channel;
  std::optional<std::string> owner;  // explicit owner id
  lock_kind kind = lock_kind::reentrant;
  // The fair lock's queue and timeout set, and the thread wait time as ARGV text.
  std::string queue_name;
  std::string timeout_name;
  std::string thread_wait_text;
  // The fenced lock's token counter.
  std::string token_name;
  // Read/write locks: the writer's hash field is `<owner>:write`; a reader's timeout keys
  // are `<key_prefix>:<owner>:rwlock_timeout:<n>`, key_prefix being `{name}` (or `name`
  // when it holds '{': Redisson's suffixName).
  std::string field_suffix;
  std::string key_prefix;
  std::string field(std::string_view holder) const { return std::string(holder).append(field_suffix); }
  std::string timeout_prefix(std::string_view holder) const {
    return key_prefix + ":" + std::string(holder) + ":rwlock_timeout";
  }
  // Redisson's internalLockLeaseTime: the lease unlock passes to pexpire on a partial
  // release. The watchdog timeout, or the last explicit lease acquired; back to the
  // watchdog timeout when the lock is fully released or force-unlocked (Redisson 3.20,
  // RedissonLock.cancelExpirationRenewal), so that a later watchdog hold's partial
  // unlock does not re-arm the key with a stale, short lease.
  std::atomic<std::int64_t> internal_lease_ms;
  void reset_lease(const client_config& config) noexcept { internal_lease_ms = config.watchdog_timeout.count(); }
  // Blocking holds through a handle whose owner is not the calling thread (per_handle,
  // or an explicit owner), and the thread that took them. Such a handle is one owner,
  // so a second thread's lock() through it would re-enter the first thread's hold: two
  // threads inside at once, with no error. That is refused (std::logic_error) instead,
  // as a std::recursive_mutex's user would expect. `pending` counts acquires under way.
  struct blocking_holds {
    std::mutex mutex;
    std::thread::id thread;
    std::uint32_t count = 0;
    std::uint32_t pending = 0;
  } blocking;
  void note_unlocked(bool released) noexcept {
    const std::lock_guard guard(blocking.mutex);
    blocking.count = released || blocking.count == 0 ? 0 : blocking.count - 1;
  }
};

// The watchdog's entry for one (lock, owner): shared by all its reentrant holds.
struct renewal {
  std::string name;
  std::string owner;  // the hash field: `<owner>:write` for a writer
  std::string lease_text;
  script_kind kind = script_kind::renew;  // read_renew also renews the read holds' timeout keys
  std::string key_prefix;                 // read_renew's KEYS[2]
  std::uint32_t holds = 1;
  asio::steady_timer timer;
  clock_type::time_point last_confirmed;  // when the last successful renew was sent
  bool cancelled = false;
  renewal(const strand_type& strand, std::string n, std::string o, std::string lease)
      : name(std::move(n)), owner(std::move(o)), lease_text(std::move(lease)), timer(strand) {}
};

namespace {

constexpr std::string_view one_owner = "1";

// Per-call data of the one-command operations, on the heap so that views into it stay
// valid while the unique_function holding it is moved around.
struct call_data {
  std::shared_ptr<lock_state> lock;
  std::string owner;
  std::string lease_text;
  std::string now_text;
  std::string field;           // owner, or `<owner>:write`
  std::string timeout_prefix;  // a reader's
  std::string latch;           // the unlock latch `redisson_unlock_latch:{name}:<request id>` (3.24+)
  std::string latch_life;      // its PX in ms
};

const dialect_script& unlock_script(const redisson_dialect& d, lock_kind kind) noexcept {
  switch (kind) {
    case lock_kind::fair:
      return d.fair_unlock;
    case lock_kind::read:
      return d.read_unlock;
    case lock_kind::write:
      return d.write_unlock;
    case lock_kind::reentrant:
    case lock_kind::fenced:
      break;
  }
  return d.unlock;
}

// The publish command an unlock of this dialect passes: SPUBLISH on a cluster with
// sharded pub/sub (Redisson's getPublishCommand()), where its waiters SSUBSCRIBE.
std::string_view publish_command(bool sharded) noexcept { return sharded ? "SPUBLISH" : "PUBLISH"; }

// Appends the publish command and the latch's life to an unlock's (or a force
// unlock's) ARGV, and the latch to its KEYS, as the dialect's script takes them.
void finish_unlock_call(script_call& call, const dialect_script& s, const call_data& data, bool sharded,
                        std::size_t keys_end) {
  if (s.latched) {
    // The latch is the last key: move the arguments one place up.
    for (std::size_t i = call.count; i > keys_end; --i) call.values[i] = call.values[i - 1];
    call.values[keys_end] = data.latch;
    ++call.count;
    ++call.keys;
    call.latch = data.latch;
  }
  if (s.publish_argv) call.arg(publish_command(sharded));
  if (s.latched) call.arg(data.latch_life);
}

// The unlock script of `lock`'s kind for data.owner; fills the rest of `data`, which
// the call's views point into (data.latch, when the dialect latches, is set by the
// caller). `sharded`: a cluster with sharded pub/sub.
script_call unlock_call(const redisson_dialect& d, const lock_state& lock, call_data& data, bool sharded) {
  data.lease_text = decimal(lock.internal_lease_ms);
  data.field = lock.field(data.owner);
  const dialect_script& s = unlock_script(d, lock.kind);
  script_call call(s);
  switch (lock.kind) {
    case lock_kind::fair:
      data.now_text = unix_millis_now();
      call.key(lock.name).key(lock.queue_name).key(lock.timeout_name).key(lock.channel);
      call.arg(unlock_message).arg(data.lease_text).arg(data.owner).arg(data.now_text);
      break;
    case lock_kind::read:
      data.timeout_prefix = lock.timeout_prefix(data.owner);
      call.key(lock.name).key(lock.channel).key(data.timeout_prefix).key(lock.key_prefix);
      call.arg(unlock_message).arg(data.owner);
      break;
    case lock_kind::write:
      call.key(lock.name).key(lock.channel).arg(read_unlock_message).arg(data.lease_text).arg(data.field);
      break;
    case lock_kind::reentrant:
    case lock_kind::fenced:
      call.key(lock.name).key(lock.channel).arg(unlock_message).arg(data.lease_text).arg(data.owner);
      break;
  }
  finish_unlock_call(call, s, data, sharded, call.keys);
  return call;
}

// A script's completion with its replica sync (sync_outcome::synced when sync is off).
using synced_handler = unique_function<void(std::error_code ec, resp::value&& reply, const sync_result& sync)>;

// A script sent with WAIT behind it: the joiner and who wants the result.
struct synced_call {
  synced_write join;
  synced_handler done;
  void finish() { std::exchange(done, nullptr)(join.script_error(), std::move(join.script_reply()), join.sync()); }
};

}  // namespace

class client_impl : public std::enable_shared_from_this<client_impl> {
 public:
  client_impl(asio::io_context& io, client_config config)
      : io_(io), strand_(asio::make_strand(io)), config_(std::move(config)) {
    id_ = boost::uuids::to_string(boost::uuids::random_generator()());
    watchdog_lease_text_ = decimal(config_.watchdog_timeout.count());
    std::string why;
    dialect_ = *make_dialect(config_.redisson_dialect, why);  // checked by the client's constructor
    // The latch outlives the one attempt this client makes; the DEL behind the reply
    // removes it sooner (Redisson's: (timeout + retry delay) x attempts).
    latch_life_text_ = decimal(std::max<std::int64_t>(config_.command_timeout.count(), 1));
  }

  const redisson_dialect& dialect() const noexcept { return dialect_; }

  // An unlock's latch (3.24+): `redisson_unlock_latch:{name}:<request id>`, the request
  // id 32 hex digits as Redisson's ServiceManager.generateId makes them.
  void prepare_unlock(call_data& data) {
    if (!unlock_script(dialect_, data.lock->kind).latched) return;
    static constexpr char hex[] = "0123456789abcdef";
    std::string id(32, '0');
    for (std::size_t i = 0; i < id.size(); i += 16) {
      std::uint64_t bits = request_ids_();
      for (std::size_t j = 0; j < 16; ++j, bits >>= 4) id[i + j] = hex[bits & 15];
    }
    data.latch = prefixed_name("redisson_unlock_latch", data.lock->name) + ":" + id;
    data.latch_life = latch_life_text_;
  }

  void start() {
    auto self = shared_from_this();
    asio::dispatch(strand_, [self] {
      // The connection must not own the client: a weak reference breaks the cycle.
      std::weak_ptr<client_impl> weak = self;
      if (self->config_.cluster.enabled) return self->start_cluster(weak);
      if (self->config_.sentinel.enabled())
        self->sentinel_ = std::make_shared<sentinel_monitor>(self->strand_, self->config_);
      connection_events events;
      events.endpoints = self->sentinel_;
      events.on_ready = [weak] {
        if (auto impl = weak.lock()) impl->command_connection_ready();
      };
      events.on_down = [weak](std::error_code ec, const std::string& why) {
        if (auto impl = weak.lock()) impl->command_connection_down(ec, why);
      };
      self->commands_ = connection::create(self->strand_, self->config_, self->config_.client_name, false,
                                           std::move(events));
      if (self->sentinel_) self->sentinel_->attach(self->commands_);
      self->commands_->start();
    });
  }

  void start_cluster(const std::weak_ptr<client_impl>& weak) {
    cluster_router::events events;
    events.on_ready = [weak] {
      if (auto impl = weak.lock()) impl->command_connection_ready();
    };
    events.on_down = [weak](std::error_code ec, const std::string& why) {
      if (auto impl = weak.lock()) impl->command_connection_down(ec, why);
    };
    router_ = std::make_shared<cluster_router>(strand_, config_);
    router_->start(std::move(events));
  }

  const strand_type& strand() const noexcept { return strand_; }

  // Sends an encoded command: on a cluster to the master of `key`'s slot.
  void send(std::string_view key, std::string_view command, clock_type::time_point deadline, reply_handler done) {
    if (router_) return router_->execute(key_slot(key), command, deadline, std::move(done));
    commands_->execute_encoded(command, deadline, std::move(done));
  }
  template <class... Args>
  void query(std::string_view key, clock_type::time_point deadline, reply_handler done, const Args&... args) {
    std::string command;
    resp::append_command(command, args...);
    send(key, command, deadline, std::move(done));
  }
  // A cluster with sharded pub/sub, where a dialect whose unlock of `kind` takes the
  // publish command (3.22+) SPUBLISHes and its waiters SSUBSCRIBE; before 3.22 Redisson
  // PUBLISHes and SUBSCRIBEs everywhere.
  bool publishes_sharded(lock_kind kind) const noexcept {
    return router_ && router_->sharded_pubsub() && unlock_script(dialect_, kind).publish_argv;
  }
  // The semaphores and latches: their scripts (Redisson 4.7.0's, whatever the dialect)
  // take the publish command, and Redisson's RSemaphore, RPermitExpirableSemaphore and
  // RCountDownLatch send getPublishCommand() and subscribe with SSUBSCRIBE from the same
  // release as its locks (3.22.0): a cluster with sharded pub/sub gets SPUBLISH/SSUBSCRIBE
  // in a dialect from 3.22 on, PUBLISH/SUBSCRIBE before, where Java's waiters SUBSCRIBE.
  bool publishes_sharded() const noexcept { return publishes_sharded(lock_kind::reentrant); }
  const client_config& config() const noexcept { return config_; }
  const std::string& id() const noexcept { return id_; }
  asio::io_context& io() noexcept { return io_; }
  bool closed() const noexcept { return closed_; }
  // Set by ~client before its io_context stops: nothing started later could complete.
  void mark_destroyed() noexcept { destroyed_ = true; }
  bool destroyed() const noexcept { return destroyed_; }

  clock_type::time_point command_deadline() const { return clock_type::now() + config_.command_timeout; }

  // --- scripts ------------------------------------------------------------------

  // `last_words`: the connection is about to QUIT, so there is no second round trip
  // for a NOSCRIPT retry; send the full text. `sync`: a WAIT goes right behind each
  // sending of the script (the first, and a NOSCRIPT retry).
  void run_script(const script_call& call, clock_type::time_point deadline, reply_handler done,
                  bool last_words = false, std::shared_ptr<synced_call> sync = nullptr) {
    const bool by_sha = config_.scripts == script_mode::evalsha && !last_words;
    if (!call.latch.empty()) {
      // Redisson deletes the latch once the unlock answered (unlockInnerAsync).
      done = [self = shared_from_this(), key = std::string(call.values[0]), latch = std::string(call.latch),
              done = std::move(done)](std::error_code ec, resp::value&& reply) mutable {
        if (!self->closed()) {
          std::string del;
          resp::append_command(del, "DEL", latch);
          self->send(key, del, self->command_deadline(), [](std::error_code, resp::value&&) {});
        }
        done(ec, std::move(reply));
      };
    }
    if (sentinel_) done = sentinel_->watch_writes(std::move(done));
    scratch_.clear();
    encode_script_call(scratch_, by_sha, call);
    if (!by_sha) {
      send(call.values[0], scratch_, deadline, std::move(done));
      if (sync) send_wait(sync, deadline);
      return;
    }
    send(
        call.values[0], scratch_, deadline,
        [self = shared_from_this(), call, deadline, sync, done = std::move(done)](std::error_code ec,
                                                                                   resp::value&& reply) mutable {
          if (ec == errc::server_error && reply.text.starts_with("NOSCRIPT") && self->router_) {
            // On a cluster the retry may be redirected (ASK) to a node that lacks the
            // script too: send the text, which EVAL also caches there.
            self->scratch_.clear();
            encode_script_call(self->scratch_, false, call);
            return self->send(call.values[0], self->scratch_, deadline, std::move(done));
          }
          if (ec == errc::server_error && reply.text.starts_with("NOSCRIPT")) {
            // Load it and retry once, pipelined: one more round trip.
            self->commands_->execute(deadline, [](std::error_code, resp::value&&) {}, "SCRIPT", "LOAD", call.text);
            self->scratch_.clear();
            encode_script_call(self->scratch_, true, call);
            self->commands_->execute_encoded(self->scratch_, deadline, std::move(done));
            if (sync) self->send_wait(sync, deadline);
            return;
          }
          done(ec, std::move(reply));
        });
    if (sync) send_wait(sync, deadline);
  }

  // A write script followed by `WAIT sync_replicas sync_timeout` when the config asks
  // for replica sync; `done` gets both answers. Without sync, the script alone.
  void run_synced_script(const script_call& call, clock_type::time_point deadline, synced_handler done) {
    if (config_.sync_replicas <= 0) {
      run_script(call, deadline, [d = std::move(done)](std::error_code ec, resp::value&& reply) mutable {
        sync_result none_asked;
        none_asked.outcome = sync_outcome::synced;
        d(ec, std::move(reply), none_asked);
      });
      return;
    }
    auto sync = std::make_shared<synced_call>(synced_call{synced_write(config_.sync_replicas), std::move(done)});
    run_script(
        call, deadline,
        [sync](std::error_code ec, resp::value&& reply) {
          if (sync->join.on_script_reply(ec, std::move(reply))) sync->finish();
        },
        false, sync);
  }

  // The WAIT behind a script whose deadline is `script_deadline`: it may take the
  // sync timeout on top.
  void send_wait(const std::shared_ptr<synced_call>& sync, clock_type::time_point script_deadline) {
    wait_scratch_.clear();
    append_wait(wait_scratch_, config_.sync_replicas, config_.sync_timeout);
    commands_->execute_encoded(wait_scratch_, script_deadline + config_.sync_timeout,
                               [sync](std::error_code ec, resp::value&& reply) {
                                 if (sync->join.on_wait_reply(ec, reply)) sync->finish();
                               });
  }
  // An acquire that failed this way was never applied and may be sent again, within its
  // wait: Sentinel (no master, or a demoted one), and Cluster (a master unreachable, or
  // its slots unserved, longer than the command timeout: a failover takes
  // cluster-node-timeout, 15 s by default). A single server's outage stays an error.
  bool retry_after_failover(std::error_code ec, const resp::value& reply) const noexcept {
    if (router_) return cluster_router::retryable(ec, reply);
    return sentinel_ && sentinel_monitor::retryable(ec, reply);
  }

  std::string describe_sync(std::string_view what, const sync_result& sync) const {
    return describe_sync_failure(what, sync, config_.sync_replicas, config_.sync_timeout);
  }

  // --- connection events -------------------------------------------------------

  void command_connection_ready() {
    // Back after a drop (a failover, a restart): the locks may be gone. An immediate
    // renewal checks each one (the renew script answers 0 when the owner's field is
    // missing) and reports a missing one to on_lock_lost. On a cluster this runs after
    // every slot-map load, which follows a topology change (a failover, a resharding).
    if (router_ || commands_->ready_count() > 1)
      for (auto& [key, r] : renewals_) r->timer.cancel();  // its handler renews now
    complete_connect_waiters({});
  }
  void command_connection_down(std::error_code ec, const std::string& why) {
    complete_connect_waiters({ec, why});
  }
  void complete_connect_waiters(const status& s) {
    auto waiters = std::move(connect_waiters_);
    connect_waiters_.clear();
    for (auto& w : waiters) w(s, s.code ? false : true);
  }

  void connect(completion<bool> done) {
    if (closed_) return done({errc::shut_down, {}}, false);
    if (router_ ? router_->ready() : commands_->ready()) return done({}, true);
    connect_waiters_.push_back(std::move(done));
  }

  // --- pub/sub -----------------------------------------------------------------

  // `sharded_publisher`: the channel's unlock script publishes with SPUBLISH when the
  // cluster has sharded pub/sub (publishes_sharded()).
  subscription_registry::added subscribe(const std::string& channel, subscription_listener& listener,
                                         bool sharded_publisher = false) {
    if (router_) return router_->subscribe(channel, listener, sharded_publisher);
    if (!subscriber_) start_subscriber();
    std::string commands;
    auto added = registry_.add(channel, listener, commands);
    if (!commands.empty()) subscriber_->send_without_reply(commands);
    return added;
  }
  void unsubscribe(const std::string& channel, subscription_registry::waiter_id id) {
    if (router_) return router_->unsubscribe(channel, id);
    std::string commands;
    registry_.remove(channel, id, commands);
    if (!commands.empty() && subscriber_) subscriber_->send_without_reply(commands);
  }
  void start_subscriber() {
    connection_events events = subscriber_events(weak_from_this(), [](client_impl& self) {
      return std::pair{&self.registry_, self.subscriber_.get()};
    });
    events.endpoints = sentinel_;
    subscriber_ = connection::create(strand_, config_, subscriber_name(config_), true, std::move(events));
    if (sentinel_) sentinel_->attach(subscriber_);
    subscriber_->start();
  }

  // --- watchdog ----------------------------------------------------------------

  static std::string renewal_key(std::string_view name, std::string_view owner) {
    std::string key;
    key.reserve(name.size() + owner.size() + 1);
    key.append(name).push_back('\n');
    key.append(owner);
    return key;
  }

  void watchdog_add(const std::string& name, const std::string& owner, script_kind kind = script_kind::renew,
                    const std::string& key_prefix = {}) {
    const std::string key = renewal_key(name, owner);
    if (auto it = renewals_.find(key); it != renewals_.end()) {
      ++it->second->holds;
      return;
    }
    auto r = std::make_shared<renewal>(strand_, name, owner, watchdog_lease_text_);
    r->kind = kind;
    r->key_prefix = key_prefix;
    r->last_confirmed = clock_type::now();
    renewals_.emplace(key, r);
    schedule_renewal(r, config_.watchdog_timeout / 3);
  }

  // One hold released (`all`: the lock is gone for this owner).
  void watchdog_release(const std::string& name, const std::string& owner, bool all) {
    auto it = renewals_.find(renewal_key(name, owner));
    if (it == renewals_.end()) return;
    if (!all && --it->second->holds > 0) return;
    cancel_renewal(*it->second);
    renewals_.erase(it);
  }

  void watchdog_release_lock(const std::string& name) {
    for (auto it = renewals_.begin(); it != renewals_.end();) {
      if (it->second->name == name) {
        cancel_renewal(*it->second);
        it = renewals_.erase(it);
      } else {
        ++it;
      }
    }
  }

  static void cancel_renewal(renewal& r) {
    r.cancelled = true;
    r.timer.cancel();
  }

  void schedule_renewal(const std::shared_ptr<renewal>& r, milliseconds after) {
    r->timer.expires_after(after);
    r->timer.async_wait([self = shared_from_this(), r](boost::system::error_code) {
      if (!r->cancelled) self->renew(r);
    });
  }

  void renew(const std::shared_ptr<renewal>& r) {
    const clock_type::time_point sent = clock_type::now();
    const bool read = r->kind == script_kind::read_renew;
    script_call call(read ? dialect_.read_renew : dialect_.renew);
    call.key(r->name);
    if (read) call.key(r->key_prefix);
    call.arg(r->lease_text);
    // 3.44's batch for read locks: ARGV[2] counts the owners of each lock that follow.
    if (read && dialect_.batched_renewal) call.arg(one_owner);
    call.arg(r->owner);
    run_script(call, sent + std::min(config_.command_timeout, config_.watchdog_timeout / 3),
               [self = shared_from_this(), r, sent](std::error_code ec, resp::value&& reply) {
                 if (r->cancelled) return;
                 // A batch answers a list with one 0/1 per lock.
                 if (!ec && self->dialect_.batched_renewal && reply.type == resp::type::array &&
                     reply.elements.size() == 1) {
                   resp::value first = std::move(reply.elements[0]);
                   reply = std::move(first);
                 }
                 const milliseconds timeout = self->config_.watchdog_timeout;
                 const renew_outcome outcome = classify_renew(ec, reply, clock_type::now(), r->last_confirmed, timeout);
                 if (outcome == renew_outcome::lost) return self->lock_lost(r);
                 if (outcome == renew_outcome::renewed) r->last_confirmed = sent;
                 self->schedule_renewal(r, renew_delay(outcome, timeout));
               });
  }

  void lock_lost(const std::shared_ptr<renewal>& r) {
    auto it = renewals_.find(renewal_key(r->name, r->owner));
    if (it != renewals_.end() && it->second == r) renewals_.erase(it);
    cancel_renewal(*r);
    if (config_.on_lock_lost) {
      try {
        config_.on_lock_lost(r->name);
      } catch (...) {
        // A callback's exception must not unwind through the I/O loop.
      }
    }
  }

  void report_unlock_error(const std::string& name, const std::string& message) noexcept {
    try {
      if (config_.on_unlock_error) {
        config_.on_unlock_error(name, message);
      } else {
        std::fprintf(stderr, "lockscope: unlock of '%s' failed: %s\n", name.c_str(), message.c_str());
      }
    } catch (...) {
    }
  }

  // --- operations registry (for shutdown) ---------------------------------------

  void add_op(const std::shared_ptr<acquire_op>& op) { ops_.insert(op); }
  void remove_op(const std::shared_ptr<acquire_op>& op) { ops_.erase(op); }
  void abandon_waits();
  void add_waiting(const std::shared_ptr<abandonable>& wait) { primitive_waits_[wait.get()] = wait; }
  void remove_waiting(const abandonable* wait) noexcept { primitive_waits_.erase(wait); }

  void close(unique_function<void()> done);

 private:
  void finish_close();

  asio::io_context& io_;
  strand_type strand_;
  client_config config_;
  std::string id_;
  std::string watchdog_lease_text_;
  redisson_dialect dialect_;
  std::string latch_life_text_;
  std::mt19937_64 request_ids_{std::random_device{}()};
  std::shared_ptr<connection> commands_;
  std::shared_ptr<connection> subscriber_;
  std::shared_ptr<sentinel_monitor> sentinel_;  // Sentinel mode only
  std::shared_ptr<cluster_router> router_;  // redis-cluster://: instead of both above
  subscription_registry registry_;
  std::unordered_map<std::string, std::shared_ptr<renewal>> renewals_;
  std::unordered_set<std::shared_ptr<acquire_op>> ops_;
  // The semaphores' and latches' waits (primitive_wait.hpp), for abandon_waits().
  std::unordered_map<const abandonable*, std::weak_ptr<abandonable>> primitive_waits_;
  std::vector<completion<bool>> connect_waiters_;
  std::string scratch_;
  std::string wait_scratch_;
  std::vector<unique_function<void()>> close_waiters_;
  int connections_open_ = 0;
  bool closed_ = false;
  std::atomic<bool> destroyed_{false};
};

// One lock() / try_lock(): the Asio side of acquire_fsm. Attempts, subscribes, retries
// after the subscription is confirmed, then waits for an unlock message or the
// holder's TTL, and loops.
class acquire_op final : public subscription_listener,
                         public cancellable,
                         public std::enable_shared_from_this<acquire_op> {
 public:
  acquire_op(std::shared_ptr<client_impl> impl, std::shared_ptr<lock_state> lock, std::string owner,
             acquire_request request, completion<std::int64_t> done)
      : impl_(std::move(impl)),
        lock_(std::move(lock)),
        owner_(std::move(owner)),
        lease_(request.lease),
        field_(lock_->field(owner_)),
        timeout_prefix_(lock_->kind == lock_kind::read ? lock_->timeout_prefix(owner_) : std::string()),
        write_field_(lock_->kind == lock_kind::read ? owner_ + ":write" : std::string()),
        fsm_(request.wait, clock_type::now()),
        lease_text_(decimal(request.lease ? request.lease->count() : impl_->config().watchdog_timeout.count())),
        // A fair waiter is woken on its own channel: the unlock wakes only the queue's head.
        channel_(lock_->kind == lock_kind::fair ? lock_->channel + ":" + owner_ : lock_->channel),
        // Redisson's fair lock (3.13.3+): the caller's wait is the queue's thread wait;
        // without one (lock(), tryLock()), the configured threadWaitTime.
        thread_wait_text_(request.wait && request.wait->count() > 0 && impl_->dialect().fair_wait_is_callers
                              ? decimal(request.wait->count())
                              : lock_->thread_wait_text),
        try_once_(lock_->kind == lock_kind::fair && request.wait && request.wait->count() <= 0),
        done_(std::move(done)),
        timer_(impl_->strand()) {}

  void start(std::shared_ptr<cancel_link> link) {
    impl_->add_op(shared_from_this());
    link_ = std::move(link);
    if (link_) {
      link_->target = shared_from_this();
      if (link_->requested) return cancel();
    }
    attempt();
  }

  void on_subscribed() override { wake(); }
  void on_message(std::string_view) override { wake(); }

  // The handler's cancellation slot fired.
  void cancel() override { stop({operation_aborted(), {}}); }

  // Stops waiting and completes with `s` once nothing is left behind: the attempt in
  // flight answered (a hold it took is released; a fair waiter it queued leaves the
  // queue), the subscription dropped.
  void stop(status s) {
    if (finished_ || stopping_) return;
    stopping_ = true;
    stop_status_ = std::move(s);
    timer_.cancel();
    if (waiter_) impl_->unsubscribe(channel_, *std::exchange(waiter_, std::nullopt));
    // A reply on its way, or a cleanup (a leave-queue, a release), finishes it.
    if (in_flight_ || cleaning_up_) return;
    if (lock_->kind == lock_kind::fair && queued_) return leave_queue_then_finish(std::move(stop_status_));
    finish(std::move(stop_status_), 0);
  }

  // The client closes: completes now. A fair waiter queued, or maybe queued by the
  // attempt in flight, still leaves the queue: the script goes out behind that attempt
  // and before the QUIT that close() queues next, and nobody waits for its reply.
  void abort(status s) {
    if (finished_) return;
    if (lock_->kind == lock_kind::fair && (queued_ || in_flight_))
      send_leave_queue([self = shared_from_this()](std::error_code, resp::value&&) {}, true);
    finish(std::move(s), 0);
  }

 private:
  void wake() {
    if (stopping_) return;
    if (fsm_.on_signal()) timer_.cancel();
  }

  void attempt() {
    const redisson_dialect& d = impl_->dialect();
    switch (lock_->kind) {
      case lock_kind::fair: {
        now_text_ = unix_millis_now();
        // tryLock() without a wait: Redisson's one-shot form, which never queues.
        script_call call(try_once_ ? d.fair_try_acquire : d.fair_acquire);
        call.key(lock_->name).key(lock_->queue_name).key(lock_->timeout_name).arg(lease_text_).arg(owner_);
        if (try_once_) return send(call.arg(now_text_).arg(thread_wait_text_));
        return send(call.arg(thread_wait_text_).arg(now_text_));
      }
      case lock_kind::fenced:
        return send(script_call(d.fenced_acquire).key(lock_->name).key(lock_->token_name).arg(lease_text_).arg(owner_));
      case lock_kind::read:
        return send(
            script_call(d.read_acquire).key(lock_->name).key(timeout_prefix_).arg(lease_text_).arg(owner_).arg(
                write_field_));
      case lock_kind::write:
        return send(script_call(d.write_acquire).key(lock_->name).arg(lease_text_).arg(field_));
      case lock_kind::reentrant:
        break;
    }
    send(script_call(d.acquire).key(lock_->name).arg(lease_text_).arg(owner_));
  }

  void send(const script_call& call) {
    in_flight_ = true;
    impl_->run_synced_script(
        call, impl_->command_deadline(),
        [self = shared_from_this()](std::error_code ec, resp::value&& reply, const sync_result& sync) {
          self->on_reply(ec, std::move(reply), sync);
        });
  }

  void on_reply(std::error_code ec, resp::value&& reply, const sync_result& sync) {
    // A cancellation may be on its way to the strand: its request counts at once (with
    // the reply still in flight, stop() only marks the operation).
    if (!finished_ && !stopping_ && link_ && link_->requested) stop({operation_aborted(), {}});
    in_flight_ = false;
    if (finished_) return;
    if (stopping_) return on_reply_after_stop(ec, reply);
    if (ec && impl_->retry_after_failover(ec, reply) && clock_type::now() + failover_retry_delay < fsm_.deadline())
      return retry_later();
    if (ec) return give_up(error_status(ec, reply));
    const acquire_reply r = classify_acquire_reply(reply, lock_->kind == lock_kind::fenced);
    if (after_acquire_sync(r, sync) == synced_acquire::release_and_fail) return release_unsynced(sync);
    if (r.outcome == acquire_reply::kind::acquired) {
      fsm_.on_acquired();
      if (lease_) {
        lock_->internal_lease_ms = lease_->count();
      } else {
        const bool read = lock_->kind == lock_kind::read;
        impl_->watchdog_add(lock_->name, field_, read ? script_kind::read_renew : script_kind::renew,
                            lock_->key_prefix);
      }
      return finish({}, lock_->kind == lock_kind::fenced ? r.token : 1);
    }
    if (r.outcome != acquire_reply::kind::busy) return give_up(unexpected("the acquire script", reply));
    queued_ = !try_once_;
    act(fsm_.on_busy(r.ttl_ms, clock_type::now()));
  }

  // The attempt sent before the stop answered: undo whatever it did.
  void on_reply_after_stop(std::error_code ec, const resp::value& reply) {
    const acquire_reply r = ec ? acquire_reply{acquire_reply::kind::unexpected}
                               : classify_acquire_reply(reply, lock_->kind == lock_kind::fenced);
    if (!ec && r.outcome == acquire_reply::kind::acquired) return release_then_finish();
    const bool maybe_queued = queued_ || (ec && !impl_->closed()) || r.outcome == acquire_reply::kind::busy;
    if (lock_->kind == lock_kind::fair && maybe_queued && !impl_->closed())
      return leave_queue_then_finish(std::move(stop_status_));
    finish(std::move(stop_status_), 0);
  }

  // Gives back the hold the attempt took (a re-entry only counts down), then finishes
  // with the stop's status. Nothing was handed to the watchdog.
  void release_then_finish() {
    cleaning_up_ = true;
    auto data = std::make_shared<call_data>(call_data{lock_, owner_, {}, {}, {}, {}, {}, {}});
    impl_->prepare_unlock(*data);
    const script_call call = unlock_call(impl_->dialect(), *lock_, *data, impl_->publishes_sharded(lock_->kind));
    impl_->run_script(call, impl_->command_deadline(),
                      [self = shared_from_this(), data](std::error_code, resp::value&&) {
                        // A failed release expires after its lease.
                        self->finish(std::move(self->stop_status_), 0);
                      });
  }

  void leave_queue_then_finish(status s) {
    cleaning_up_ = true;
    pending_ = std::move(s);
    send_leave_queue([self = shared_from_this()](std::error_code, resp::value&&) {
      // A failed cleanup leaves a queue entry that the purge removes after its timeout.
      self->finish(std::move(self->pending_), 0);
    });
  }

  void act(acquire_action action) {
    switch (action) {
      case acquire_action::attempt:
        return attempt();
      case acquire_action::subscribe: {
        const auto added = impl_->subscribe(channel_, *this, impl_->publishes_sharded(lock_->kind));
        waiter_ = added.id;
        return act(fsm_.on_subscribe_started(added.subscribed, clock_type::now()));
      }
      case acquire_action::sleep:
        timer_.expires_at(fsm_.sleep_until());
        timer_.async_wait([self = shared_from_this()](boost::system::error_code) {
          if (self->finished_ || self->stopping_) return;
          self->act(self->fsm_.on_timer());
        });
        return;
      case acquire_action::gave_up:
        return give_up({});
      case acquire_action::acquired:
        return;
    }
  }

  // Sentinel or Cluster: no (reachable) master for now; the next attempt waits for one.
  static constexpr milliseconds failover_retry_delay{100};
  void retry_later() {
    timer_.expires_after(failover_retry_delay);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code) {
      if (!self->finished_ && !self->stopping_) self->attempt();
    });
  }

  // Not acquired (timeout or error). A fair waiter leaves the queue first, as Redisson's
  // acquireFailed does, or the waiters behind it would wait out its thread wait time.
  void give_up(status s) {
    if (lock_->kind != lock_kind::fair || !queued_ || impl_->closed()) return finish(std::move(s), 0);
    if (waiter_) impl_->unsubscribe(channel_, *std::exchange(waiter_, std::nullopt));
    leave_queue_then_finish(std::move(s));
  }

  // Acquired on the master, but the write did not reach enough replicas: undo this
  // hold with the unlock script (a re-entry only counts down) and fail. Nothing was
  // handed to the watchdog yet.
  void release_unsynced(const sync_result& sync) {
    cleaning_up_ = true;
    std::string message = impl_->describe_sync(fmt::format("lock '{}'", lock_->name), sync);
    auto data = std::make_shared<call_data>(call_data{lock_, owner_, {}, {}, {}, {}, {}, {}});
    impl_->prepare_unlock(*data);
    const script_call call = unlock_call(impl_->dialect(), *lock_, *data, impl_->publishes_sharded(lock_->kind));
    impl_->run_script(call, impl_->command_deadline(),
                      [self = shared_from_this(), data, message = std::move(message)](
                          std::error_code ec, resp::value&& reply) mutable {
                        const unlock_outcome outcome = classify_unlock_reply(reply);
                        if (ec || outcome == unlock_outcome::unexpected) {
                          // It expires after its lease.
                          message += "; releasing it failed: " + error_status(ec, reply).message();
                        } else {
                          message += "; released";
                        }
                        self->finish({errc::replica_sync_failed, std::move(message)}, 0);
                      });
  }

  // The reply handler must keep this operation alive: the call's views point into it.
  void send_leave_queue(reply_handler done, bool last_words = false) {
    script_call call(impl_->dialect().fair_acquire_failed);
    call.key(lock_->queue_name).key(lock_->timeout_name).arg(owner_).arg(thread_wait_text_);
    impl_->run_script(call, impl_->command_deadline(), std::move(done), last_words);
  }

  // `acquired`: 0 when not; the fencing token or 1 when acquired.
  void finish(status s, std::int64_t acquired) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    if (waiter_) impl_->unsubscribe(channel_, *waiter_);
    auto self = shared_from_this();
    impl_->remove_op(self);
    std::exchange(done_, nullptr)(std::move(s), acquired);
  }

  std::shared_ptr<client_impl> impl_;
  std::shared_ptr<lock_state> lock_;
  std::string owner_;
  std::optional<milliseconds> lease_;
  std::string field_;           // the hash field: owner, or `<owner>:write`
  std::string timeout_prefix_;  // a reader's `{name}:<owner>:rwlock_timeout`
  std::string write_field_;     // a reader's `<owner>:write`: the writer it may join
  acquire_fsm fsm_;
  std::string lease_text_;
  std::string channel_;
  std::string thread_wait_text_;
  bool try_once_;  // a fair tryLock() without a wait
  std::string now_text_;
  completion<std::int64_t> done_;
  status pending_;
  status stop_status_;
  std::shared_ptr<cancel_link> link_;
  asio::steady_timer timer_;
  std::optional<subscription_registry::waiter_id> waiter_;
  bool queued_ = false;       // a busy reply came: a fair waiter is in the queue
  bool in_flight_ = false;    // an acquire script is waiting for its reply
  bool cleaning_up_ = false;  // a leave-queue or a release is, and then finishes
  bool stopping_ = false;     // cancelled or abandoned: finishes once clean
  bool finished_ = false;
};

void client_impl::abandon_waits() {
  auto ops = ops_;  // each removes itself from ops_ when it finishes
  for (const auto& op : ops) op->stop({errc::shut_down, {}});
  auto waits = primitive_waits_;  // likewise from primitive_waits_
  for (const auto& [key, weak] : waits) {
    if (auto wait = weak.lock()) wait->abandon();
  }
}

void client_impl::close(unique_function<void()> done) {
  if (done) close_waiters_.push_back(std::move(done));
  if (closed_) {
    if (connections_open_ == 0) finish_close();
    return;
  }
  closed_ = true;
  auto ops = ops_;
  for (const auto& op : ops) op->abort({errc::shut_down, {}});
  for (auto& [key, r] : renewals_) cancel_renewal(*r);
  renewals_.clear();
  complete_connect_waiters({errc::shut_down, {}});
  // Both connections QUIT (after whatever is queued before); the waiters run when the
  // last one is closed (Sentinel: and the sentinel connections).
  connections_open_ = (subscriber_ ? 2 : 1) + (sentinel_ ? 1 : 0);
  auto self = shared_from_this();
  auto one_closed = [self] {
    if (--self->connections_open_ == 0) self->finish_close();
  };
  if (router_) {
    connections_open_ = 1;
    return router_->close(one_closed);
  }
  if (sentinel_) sentinel_->close(one_closed);
  if (subscriber_) subscriber_->close(one_closed);
  commands_->close(one_closed);
}

void client_impl::finish_close() {
  auto waiters = std::move(close_waiters_);
  close_waiters_.clear();
  for (auto& w : waiters) w();
}

// --- entry points: hop onto the strand ----------------------------------------------

namespace {

template <class T>
bool reject_if_closed(client_impl& impl, completion<T>& done) {
  if (!impl.closed()) return false;
  done({errc::shut_down, {}}, T{});
  return true;
}

}  // namespace

const strand_type& strand_of(const client_impl& impl) noexcept { return impl.strand(); }

void request_cancel(const std::shared_ptr<cancel_link>& link, const strand_type& strand) {
  link->requested = true;
  asio::post(strand, [link] {
    if (auto target = link->target.lock()) target->cancel();
  });
}

void ensure_usable(const lock_state& lock) {
  if (lock.impl->destroyed()) throw lock_error(errc::shut_down, "the client of lock '" + lock.name + "' was destroyed");
}
const strand_type& strand_of(const lock_state& lock) noexcept { return lock.impl->strand(); }
std::uint64_t subscribe_channel(client_impl& impl, const std::string& channel, subscription_listener& listener,
                                bool& confirmed) {
  const auto added = impl.subscribe(channel, listener, impl.publishes_sharded());
  confirmed = added.subscribed;
  return added.id;
}
void unsubscribe_channel(client_impl& impl, const std::string& channel, std::uint64_t id) {
  impl.unsubscribe(channel, id);
}
void add_waiting(client_impl& impl, const std::shared_ptr<abandonable>& wait) { impl.add_waiting(wait); }
void remove_waiting(client_impl& impl, const abandonable* wait) noexcept { impl.remove_waiting(wait); }
const char* publish_command(const client_impl& impl) noexcept {
  return impl.publishes_sharded() ? "SPUBLISH" : "PUBLISH";
}
void start_eval(const std::shared_ptr<client_impl>& impl, std::string_view text, std::string_view sha1,
                std::vector<std::string> keys, std::vector<std::string> argv, completion<resp::value> done) {
  asio::post(impl->strand(), [impl, text, sha1, keys = std::move(keys), argv = std::move(argv),
                              d = std::move(done)]() mutable {
    if (reject_if_closed(*impl, d)) return;
    auto encode = [&](bool by_sha) {
      std::string encoded;
      resp::writer w(encoded);
      w.array(3 + keys.size() + argv.size());
      w.bulk_string(by_sha ? "EVALSHA" : "EVAL");
      w.bulk_string(by_sha ? sha1 : text);
      w.bulk_string(decimal(static_cast<std::int64_t>(keys.size())));
      for (const std::string& k : keys) w.bulk_string(k);
      for (const std::string& a : argv) w.bulk_string(a);
      return encoded;
    };
    const bool by_sha = impl->config().scripts == script_mode::evalsha;
    const std::string key = keys.empty() ? std::string() : keys[0];
    auto finish = [](completion<resp::value>& to, std::error_code ec, resp::value&& reply) {
      if (ec) return to(error_status(ec, reply), resp::value{});
      to({}, std::move(reply));
    };
    if (!by_sha) {
      return impl->send(key, encode(false), impl->command_deadline(),
                        [d = std::move(d), finish](std::error_code ec, resp::value&& reply) mutable {
                          finish(d, ec, std::move(reply));
                        });
    }
    std::string full = encode(false);
    impl->send(key, encode(true), impl->command_deadline(),
               [impl, key, full = std::move(full), d = std::move(d), finish](std::error_code ec,
                                                                              resp::value&& reply) mutable {
                 if (ec == errc::server_error && reply.text.starts_with("NOSCRIPT")) {
                   // EVAL caches the script on the server: the next EVALSHA finds it.
                   return impl->send(key, full, impl->command_deadline(),
                                     [d = std::move(d), finish](std::error_code e, resp::value&& r) mutable {
                                       finish(d, e, std::move(r));
                                     });
                 }
                 finish(d, ec, std::move(reply));
               });
  });
}
void ensure_usable(const client_impl& impl) {
  if (impl.destroyed()) throw lock_error(errc::shut_down, "the client was destroyed");
}
std::chrono::milliseconds watchdog_timeout_of(const lock_state& lock) noexcept {
  return lock.impl->config().watchdog_timeout;
}
void report_unlock_error(const lock_state& lock, const std::string& message) noexcept {
  lock.impl->report_unlock_error(lock.name, message);
}

completion<std::int64_t> acquired_flag(completion<bool> done) {
  return [d = std::move(done)](status s, std::int64_t acquired) mutable { d(std::move(s), acquired != 0); };
}

void start_acquire(const std::shared_ptr<lock_state>& lock, std::string owner, acquire_request request,
                   completion<std::int64_t> done, std::shared_ptr<cancel_link> cancel) {
  if ((request.lease && request.lease->count() <= 0) || (request.wait && request.wait->count() < 0)) {
    asio::post(lock->impl->strand(), [d = std::move(done)]() mutable {
      d({errc::invalid_argument, "lease must be positive and wait not negative"}, 0);
    });
    return;
  }
  auto impl = lock->impl;
  asio::post(impl->strand(), [impl, lock, owner = std::move(owner), request, d = std::move(done),
                               cancel = std::move(cancel)]() mutable {
    if (reject_if_closed(*impl, d)) return;
    std::make_shared<acquire_op>(impl, lock, std::move(owner), request, std::move(d))->start(std::move(cancel));
  });
}

void start_unlock(const std::shared_ptr<lock_state>& lock, std::string owner, completion<bool> done) {
  auto impl = lock->impl;
  asio::post(impl->strand(), [impl, lock, owner = std::move(owner), d = std::move(done)]() mutable {
    if (reject_if_closed(*impl, d)) return;
    auto data = std::make_shared<call_data>(call_data{lock, std::move(owner), {}, {}, {}, {}, {}, {}});
    impl->prepare_unlock(*data);
    const script_call call = unlock_call(impl->dialect(), *lock, *data, impl->publishes_sharded(lock->kind));
    impl->run_synced_script(
        call, impl->command_deadline(),
        [impl, data, d = std::move(d)](std::error_code ec, resp::value&& reply, const sync_result& sync) mutable {
          const unlock_outcome outcome = classify_unlock_reply(reply);
          const unlock_effects effects = effects_of(outcome, static_cast<bool>(ec));
          if (!ec && outcome != unlock_outcome::unexpected)
            data->lock->note_unlocked(outcome != unlock_outcome::still_held);
          impl->watchdog_release(data->lock->name, data->field, effects.stop_renewal);
          // Redisson's cancelExpirationRenewal: the lease reset's rule depends on the release.
          switch (impl->dialect().reset) {
            case redisson_dialect::lease_reset::never:
              break;
            case redisson_dialect::lease_reset::always:
              data->lock->reset_lease(impl->config());
              break;
            case redisson_dialect::lease_reset::unless_still_held:
              if (ec || effects.reset_lease) data->lock->reset_lease(impl->config());
              break;
          }
          if (ec) return d(error_status(ec, reply), false);
          switch (outcome) {
            case unlock_outcome::not_owner:
              return d({errc::not_owner, not_owner_message(data->owner)}, false);
            case unlock_outcome::unexpected:
              return d(unexpected("the unlock script", reply), false);
            case unlock_outcome::released:
            case unlock_outcome::still_held:
              break;
          }
          // Done on the master whatever the replicas got: say so, as an error.
          if (!sync.ok())
            return d({errc::replica_sync_failed,
                      impl->describe_sync(fmt::format("unlock of '{}' (done on the master)", data->lock->name), sync)},
                     false);
          d({}, outcome == unlock_outcome::released);
        });
  });
}

void start_force_unlock(const std::shared_ptr<lock_state>& lock, completion<bool> done) {
  auto impl = lock->impl;
  asio::post(impl->strand(), [impl, lock, d = std::move(done)]() mutable {
    if (reject_if_closed(*impl, d)) return;
    impl->watchdog_release_lock(lock->name);
    if (impl->dialect().reset != redisson_dialect::lease_reset::never) lock->reset_lease(impl->config());
    auto data = std::make_shared<call_data>(call_data{lock, {}, {}, {}, {}, {}, {}, {}});
    const redisson_dialect& dialect = impl->dialect();
    const dialect_script* s = &dialect.force_unlock;
    if (lock->kind == lock_kind::read) s = &dialect.read_force_unlock;
    if (lock->kind == lock_kind::write) s = &dialect.write_force_unlock;
    if (lock->kind == lock_kind::fair) s = &dialect.fair_force_unlock;
    script_call call(*s);
    call.key(lock->name);
    if (lock->kind == lock_kind::fair) {
      data->now_text = unix_millis_now();
      call.key(lock->queue_name).key(lock->timeout_name);
    }
    call.key(lock->channel).arg(lock->kind == lock_kind::write ? read_unlock_message : unlock_message);
    if (lock->kind == lock_kind::fair) call.arg(data->now_text);
    finish_unlock_call(call, *s, *data, impl->publishes_sharded(lock->kind), call.keys);
    impl->run_synced_script(
        call, impl->command_deadline(),
        [impl, data, d = std::move(d)](std::error_code ec, resp::value&& reply, const sync_result& sync) mutable {
          if (ec) return d(error_status(ec, reply), false);
          if (reply.type != resp::type::integer) return d(unexpected("the forceUnlock script", reply), false);
          data->lock->note_unlocked(true);
          if (!sync.ok())
            return d({errc::replica_sync_failed,
                      impl->describe_sync(fmt::format("force-unlock of '{}' (done on the master)", data->lock->name),
                                          sync)},
                     false);
          d({}, reply.integer == 1);
        });
  });
}

void start_query(const std::shared_ptr<lock_state>& lock, query_kind kind, std::string owner,
                 completion<std::int64_t> done) {
  auto impl = lock->impl;
  asio::post(impl->strand(), [impl, lock, kind, owner = std::move(owner), d = std::move(done)]() mutable {
    if (reject_if_closed(*impl, d)) return;
    const bool read_write = lock->kind == lock_kind::read || lock->kind == lock_kind::write;
    if (kind == query_kind::is_locked && read_write) {
      // Redisson's RedissonReadLock/RedissonWriteLock.isLocked: held in this side's mode.
      const std::string_view mode = lock->kind == lock_kind::read ? "read" : "write";
      return impl->query(
          lock->name, impl->command_deadline(),
          [mode, d = std::move(d)](std::error_code ec, resp::value&& reply) mutable {
            if (ec) return d(error_status(ec, reply), 0);
            d({}, reply.type == resp::type::bulk_string && reply.text == mode ? 1 : 0);
          },
          "HGET", lock->name, "mode");
    }
    auto handler = [kind, d = std::move(d)](std::error_code ec, resp::value&& reply) mutable {
      if (ec) return d(error_status(ec, reply), 0);
      if (reply.type == resp::type::integer) return d({}, reply.integer);
      if (kind == query_kind::hold_count || kind == query_kind::fence_token) {
        if (reply.type == resp::type::null) return d({}, 0);
        std::int64_t v = 0;
        const auto [ptr, pec] = std::from_chars(reply.text.data(), reply.text.data() + reply.text.size(), v);
        if (pec == std::errc{} && ptr == reply.text.data() + reply.text.size()) return d({}, v);
      }
      if (kind == query_kind::is_held && reply.type == resp::type::boolean) return d({}, reply.boolean() ? 1 : 0);
      d(unexpected("a lock query", reply), 0);
    };
    // Views into `lock` and `owner` are encoded right away; nothing outlives this call.
    const clock_type::time_point deadline = impl->command_deadline();
    const std::string field = lock->field(owner);
    const std::string& key = lock->name;
    switch (kind) {
      case query_kind::is_locked: impl->query(key, deadline, std::move(handler), "EXISTS", lock->name); break;
      case query_kind::is_held: impl->query(key, deadline, std::move(handler), "HEXISTS", lock->name, field); break;
      case query_kind::hold_count: impl->query(key, deadline, std::move(handler), "HGET", lock->name, field); break;
      case query_kind::remain_ttl: impl->query(key, deadline, std::move(handler), "PTTL", lock->name); break;
      case query_kind::fence_token: impl->query(key, deadline, std::move(handler), "GET", lock->token_name); break;
    }
  });
}

void start_connect(const std::shared_ptr<client_impl>& impl, completion<bool> done) {
  asio::post(impl->strand(), [impl, d = std::move(done)]() mutable { impl->connect(std::move(d)); });
}

void start_command(const std::shared_ptr<client_impl>& impl, std::vector<std::string> args,
                   completion<resp::value> done) {
  asio::post(impl->strand(), [impl, args = std::move(args), d = std::move(done)]() mutable {
    if (reject_if_closed(*impl, d)) return;
    if (args.empty()) return d({errc::invalid_argument, "empty command"}, resp::value{});
    std::string encoded;
    resp::writer w(encoded);
    w.array(args.size());
    for (const std::string& a : args) w.bulk_string(a);
    // On a cluster: routed by the first argument after the command's name, the key of
    // most commands (a command without one goes to the master of slot 0).
    const std::string_view key = args.size() > 1 ? std::string_view(args[1]) : std::string_view();
    impl->send(
        key, encoded, impl->command_deadline(), [d = std::move(d)](std::error_code ec, resp::value&& reply) mutable {
          if (ec) {
            status s = error_status(ec, reply);
            return d(std::move(s), std::move(reply));
          }
          d({}, std::move(reply));
        });
  });
}

}  // namespace detail

// --- blocking calls ---------------------------------------------------------------

namespace {

// Runs an asynchronous operation and waits for it on the calling thread.
template <class T, class Start>
T wait_for(detail::client_impl& impl, Start&& start) {
  if (impl.destroyed()) throw lock_error(errc::shut_down, "the client was destroyed");
  if (impl.io().get_executor().running_in_this_thread())
    throw lock_error(errc::would_deadlock,
                     "blocking lockscope call on the client's own I/O thread; use the async_ API there");
  struct waiter {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    detail::status status;
    T value{};
  };
  auto w = std::make_shared<waiter>();
  start([w](detail::status s, T v) {
    std::lock_guard guard(w->mutex);
    w->status = std::move(s);
    w->value = std::move(v);
    w->done = true;
    w->cv.notify_one();
  });
  std::unique_lock guard(w->mutex);
  w->cv.wait(guard, [&] { return w->done; });
  if (w->status) throw lock_error(w->status.code, w->status.message());
  return std::move(w->value);
}

}  // namespace

struct client::io_thread {
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;
};

namespace {

// Configuration the client cannot work with, thrown before anything starts.
client_config checked(client_config config) {
  std::string why;
  if (const std::error_code ec = check_replica_sync(config, &why)) throw lock_error(ec, why);
  if (!detail::make_dialect(config.redisson_dialect, why)) throw lock_error(errc::invalid_argument, why);
  if (config.cluster.enabled && config.sentinel.enabled())
    throw lock_error(errc::invalid_argument,
                     "cluster and sentinel are both set: a client talks to a Redis Cluster or to a Sentinel-managed master");
  if (config.cluster.enabled && config.sync_replicas > 0)
    throw lock_error(errc::invalid_argument,
                     "replica sync (WAIT) is not supported with Redis Cluster yet: the WAIT would not follow a redirect");
  return config;
}

}  // namespace

client::client(client_config config)
    : own_io_(std::make_shared<asio::io_context>(1)),
      impl_(std::make_shared<detail::client_impl>(*own_io_, checked(std::move(config)))) {
  thread_ = std::make_unique<io_thread>(io_thread{asio::make_work_guard(*own_io_), {}});
  thread_->thread = std::thread([io = own_io_.get()] { io->run(); });
  impl_->start();
}

client::client(asio::io_context& io, client_config config)
    : impl_(std::make_shared<detail::client_impl>(io, checked(std::move(config)))) {
  impl_->start();
}

client::~client() {
  close();
  impl_->mark_destroyed();
  if (thread_) {
    thread_->work.reset();
    own_io_->stop();
    if (thread_->thread.joinable()) thread_->thread.join();
  }
  impl_.reset();
  // own_io_ is destroyed last: handlers still holding the impl go with it.
}

void client::abandon_waits() noexcept {
  if (auto impl = impl_) asio::dispatch(impl->strand(), [impl] { impl->abandon_waits(); });
}

void client::close() noexcept {
  auto impl = impl_;
  if (!impl) return;
  const bool can_block = thread_ && !own_io_->get_executor().running_in_this_thread() &&
                         thread_->thread.joinable() && !own_io_->stopped();
  if (!can_block) {
    asio::dispatch(impl->strand(), [impl] { impl->close(nullptr); });
    return;
  }
  try {
    wait_for<bool>(*impl, [&](detail::completion<bool> done) {
      asio::dispatch(impl->strand(), [impl, d = std::move(done)]() mutable {
        impl->close([d = std::move(d)]() mutable { d({}, true); });
      });
    });
  } catch (...) {
  }
}

void client::connect() {
  wait_for<bool>(*impl_, [&](detail::completion<bool> done) { detail::start_connect(impl_, std::move(done)); });
}

rlock client::get_lock(std::string name) {
  auto state = std::make_shared<detail::lock_state>();
  state->io_keepalive = own_io_;
  state->impl = impl_;
  state->channel = channel_name(name);
  state->name = std::move(name);
  state->internal_lease_ms = impl_->config().watchdog_timeout.count();
  // Numbered from the threads' counter: a handle's owner id never equals a thread's.
  if (impl_->config().owners == owner_model::per_handle)
    state->owner = make_owner_id(impl_->id(), detail::next_thread_id.fetch_add(1, std::memory_order_relaxed));
  return rlock(std::move(state));
}

fair_lock client::get_fair_lock(std::string name) {
  rlock base = get_lock(std::move(name));
  detail::lock_state& state = *base.state_;
  state.kind = detail::lock_kind::fair;
  state.queue_name = prefixed_name("redisson_lock_queue", state.name);
  state.timeout_name = prefixed_name("redisson_lock_timeout", state.name);
  state.thread_wait_text = detail::decimal(impl_->config().fair_lock_thread_wait.count());
  return fair_lock(std::move(base.state_));
}

fenced_lock client::get_fenced_lock(std::string name) {
  rlock base = get_lock(std::move(name));
  base.state_->kind = detail::lock_kind::fenced;
  base.state_->token_name = prefixed_name("redisson_lock_token", base.state_->name);
  return fenced_lock(std::move(base.state_));
}

fenced_lock client::get_fenced_lock(std::string name, std::string owner) {
  fenced_lock l = get_fenced_lock(std::move(name));
  l.state_->owner = std::move(owner);
  return l;
}

read_write_lock client::get_read_write_lock(std::string name) {
  rlock read = get_lock(name);
  rlock write = get_lock(std::move(name));
  for (detail::lock_state* state : {read.state_.get(), write.state_.get()}) {
    state->channel = prefixed_name("redisson_rwlock", state->name);
    state->key_prefix =
        state->name.find('{') != std::string::npos ? state->name : "{" + state->name + "}";
  }
  // One owner for both sides: a writer may take the read lock (a downgrade).
  write.state_->owner = read.state_->owner;
  read.state_->kind = detail::lock_kind::read;
  write.state_->kind = detail::lock_kind::write;
  write.state_->field_suffix = ":write";
  return read_write_lock(reader_lock(std::move(read.state_)), writer_lock(std::move(write.state_)));
}

read_write_lock client::get_read_write_lock(std::string name, std::string owner) {
  read_write_lock l = get_read_write_lock(std::move(name));
  l.read_.state_->owner = owner;
  l.write_.state_->owner = std::move(owner);
  return l;
}

fair_lock client::get_fair_lock(std::string name, std::string owner) {
  fair_lock l = get_fair_lock(std::move(name));
  l.state_->owner = std::move(owner);
  return l;
}

rlock client::get_lock(std::string name, std::string owner) {
  rlock l = get_lock(std::move(name));
  l.state_->owner = std::move(owner);
  return l;
}

const std::string& client::id() const noexcept { return impl_->id(); }
const client_config& client::config() const noexcept { return impl_->config(); }

std::uint64_t client::current_thread_id() noexcept {
  thread_local const std::uint64_t id = detail::next_thread_id.fetch_add(1, std::memory_order_relaxed);
  return id;
}

std::string client::thread_owner() const { return make_owner_id(impl_->id(), current_thread_id()); }

resp::value client::command(std::vector<std::string> args) {
  return wait_for<resp::value>(*impl_, [&](detail::completion<resp::value> done) {
    detail::start_command(impl_, std::move(args), std::move(done));
  });
}

// --- rlock ----------------------------------------------------------------------

const std::string& rlock::name() const noexcept { return state_->name; }
const std::string& rlock::channel() const noexcept { return state_->channel; }

std::string rlock::owner() const {
  if (state_->owner) return *state_->owner;
  return make_owner_id(state_->impl->id(), client::current_thread_id());
}

namespace {

std::int64_t query_blocking(const std::shared_ptr<detail::lock_state>& state, detail::query_kind kind,
                            std::string owner);

// Claims a shared-owner handle for the calling thread's blocking acquire, or throws
// std::logic_error when another thread holds (or is acquiring) through it. A count left
// by a hold whose lease ran out is not trusted: the server is asked before refusing.
void claim_for_this_thread(const std::shared_ptr<detail::lock_state>& state, const std::string& owner) {
  auto& b = state->blocking;
  const auto me = std::this_thread::get_id();
  std::unique_lock guard(b.mutex);
  if ((b.count > 0 || b.pending > 0) && b.thread != me) {
    if (b.pending == 0) {
      guard.unlock();
      const bool held = query_blocking(state, detail::query_kind::is_held, owner) != 0;
      guard.lock();
      if (!held && b.pending == 0) b.count = 0;
    }
    if ((b.count > 0 || b.pending > 0) && b.thread != me)
      throw std::logic_error(fmt::format(
          "lock '{}': this handle is held by another thread, and a handle is one owner (owner_model::per_handle "
          "or an explicit owner), so this thread would re-enter that hold; give each thread its own handle "
          "(client::get_lock), or use owner_model::per_thread",
          state->name));
  }
  b.thread = me;
  ++b.pending;
}

std::int64_t acquire_blocking(const std::shared_ptr<detail::lock_state>& state, std::string owner,
                              detail::acquire_request request) {
  if (!state->owner) {  // the calling thread is the owner: Redis itself excludes other threads
    return wait_for<std::int64_t>(*state->impl, [&](detail::completion<std::int64_t> done) {
      detail::start_acquire(state, std::move(owner), request, std::move(done));
    });
  }
  claim_for_this_thread(state, owner);
  auto& b = state->blocking;
  std::int64_t got = 0;
  try {
    got = wait_for<std::int64_t>(*state->impl, [&](detail::completion<std::int64_t> done) {
      detail::start_acquire(state, std::move(owner), request, std::move(done));
    });
  } catch (...) {
    const std::lock_guard guard(b.mutex);
    --b.pending;
    throw;
  }
  const std::lock_guard guard(b.mutex);
  --b.pending;
  if (got != 0) ++b.count;
  return got;
}

}  // namespace

void rlock::lock() { acquire_blocking(state_, owner(), {std::nullopt, std::nullopt}); }
void rlock::lock(duration lease) { acquire_blocking(state_, owner(), {std::nullopt, lease}); }
bool rlock::try_lock() { return acquire_blocking(state_, owner(), {duration(0), std::nullopt}) != 0; }
bool rlock::try_lock(duration wait) { return acquire_blocking(state_, owner(), {wait, std::nullopt}) != 0; }
bool rlock::try_lock(duration wait, duration lease) { return acquire_blocking(state_, owner(), {wait, lease}) != 0; }
std::int64_t rlock::acquire_token(detail::acquire_request request) {
  return acquire_blocking(state_, owner(), request);
}

void rlock::unlock_or_throw() {
  wait_for<bool>(*state_->impl, [&](detail::completion<bool> done) {
    detail::start_unlock(state_, owner(), std::move(done));
  });
}

void rlock::unlock() noexcept {
  try {
    unlock_or_throw();
  } catch (const std::exception& e) {
    state_->impl->report_unlock_error(state_->name, e.what());
  } catch (...) {
    state_->impl->report_unlock_error(state_->name, "unknown error");
  }
}

bool rlock::force_unlock() {
  return wait_for<bool>(*state_->impl, [&](detail::completion<bool> done) {
    detail::start_force_unlock(state_, std::move(done));
  });
}

namespace {

std::int64_t query_blocking(const std::shared_ptr<detail::lock_state>& state, detail::query_kind kind,
                            std::string owner) {
  return wait_for<std::int64_t>(*state->impl, [&](detail::completion<std::int64_t> done) {
    detail::start_query(state, kind, std::move(owner), std::move(done));
  });
}

}  // namespace

bool rlock::is_locked() { return query_blocking(state_, detail::query_kind::is_locked, {}) != 0; }
bool rlock::is_held_by_current_thread() { return query_blocking(state_, detail::query_kind::is_held, owner()) != 0; }
std::int64_t rlock::hold_count() { return query_blocking(state_, detail::query_kind::hold_count, owner()); }
rlock::duration rlock::remain_time_to_live() {
  return duration(query_blocking(state_, detail::query_kind::remain_ttl, {}));
}

// --- fenced_lock ------------------------------------------------------------------

namespace {
std::optional<std::int64_t> token_if_acquired(std::int64_t token) {
  if (token == 0) return std::nullopt;
  return token;
}
}  // namespace

const std::string& fenced_lock::token_name() const noexcept { return state_->token_name; }
std::int64_t fenced_lock::lock_and_get_token() { return acquire_token({std::nullopt, std::nullopt}); }
std::int64_t fenced_lock::lock_and_get_token(duration lease) { return acquire_token({std::nullopt, lease}); }
std::optional<std::int64_t> fenced_lock::try_lock_and_get_token() {
  return token_if_acquired(acquire_token({duration(0), std::nullopt}));
}
std::optional<std::int64_t> fenced_lock::try_lock_and_get_token(duration wait) {
  return token_if_acquired(acquire_token({wait, std::nullopt}));
}
std::optional<std::int64_t> fenced_lock::try_lock_and_get_token(duration wait, duration lease) {
  return token_if_acquired(acquire_token({wait, lease}));
}
std::int64_t fenced_lock::get_token() { return query_blocking(state_, detail::query_kind::fence_token, {}); }

}  // namespace lockscope::lock
