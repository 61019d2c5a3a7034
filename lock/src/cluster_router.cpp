#include "cluster_router.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "lockscope/lock/error.hpp"
#include "subscriber_events.hpp"
#include "lockscope/resp/encoder.hpp"

namespace lockscope::lock::detail {

namespace asio = boost::asio;

namespace {

std::vector<node_address> seeds_of(const client_config& config) {
  std::vector<node_address> seeds;
  for (const std::string& seed : config.cluster.seeds)
    if (auto node = parse_node_address(seed)) seeds.push_back(std::move(*node));
  if (seeds.empty()) seeds.push_back({config.host, config.port});
  return seeds;
}

// The channel of each `*2 $n CMD $m channel` command the subscription registry wrote.
std::vector<std::string> channels_of(std::string_view commands) {
  std::vector<std::string> out;
  std::size_t at = 0;
  auto bulk = [&](std::string& into) {
    if (at >= commands.size() || commands[at] != '$') return false;
    const std::size_t eol = commands.find("\r\n", at);
    if (eol == std::string_view::npos) return false;
    const std::size_t length = std::stoul(std::string(commands.substr(at + 1, eol - at - 1)));
    into = std::string(commands.substr(eol + 2, length));
    at = eol + 2 + length + 2;
    return true;
  };
  while (at < commands.size() && commands[at] == '*') {
    at = commands.find("\r\n", at);
    if (at == std::string_view::npos) break;
    at += 2;
    std::string name, channel;
    if (!bulk(name) || !bulk(channel)) break;
    out.push_back(std::move(channel));
  }
  return out;
}

}  // namespace

// One command on its way through redirects.
struct cluster_router::routed {
  std::uint16_t slot;
  std::string command;
  clock_type::time_point deadline;
  reply_handler done;
  route_attempts attempts;
  std::unique_ptr<asio::steady_timer> timer;
};

// A channel as its waiters see it: it keeps their ids stable while the channel moves
// between shard subscribers, and is itself the one listener of its current registry.
struct cluster_router::relay final : subscription_listener {
  struct waiter {
    subscription_registry::waiter_id id;
    subscription_listener* listener;
  };
  std::string channel;
  bool sharded = false;
  std::vector<waiter> waiters;
  subscription_registry* registry = nullptr;  // where it is subscribed; null: homeless
  std::string node_key;                       // the shard subscriber's node (sharded)
  subscription_registry::waiter_id inner = 0;
  bool confirmed = false;
  clock_type::time_point evicted_at{};  // when the node dropped or refused it

  void on_subscribed() override {
    confirmed = true;
    fan_out(false, {});
  }
  void on_message(std::string_view payload) override { fan_out(true, payload); }
  void fan_out(bool message, std::string_view payload) {
    const std::vector<waiter> snapshot = waiters;
    for (const waiter& w : snapshot) {
      if (std::none_of(waiters.begin(), waiters.end(), [&](const waiter& x) { return x.id == w.id; })) continue;
      if (message) {
        w.listener->on_message(payload);
      } else {
        w.listener->on_subscribed();
      }
    }
  }
};

cluster_router::~cluster_router() = default;

cluster_router::cluster_router(strand_type strand, client_config config)
    : strand_(strand),
      config_(std::move(config)),
      node_states_(seeds_of(config_)),
      map_reloads_(config_.reconnect_backoff_min, config_.reconnect_backoff_max),
      pending_timer_(strand),
      refresh_timer_(strand),
      rehome_timer_(strand) {
  policy_.max_redirects = std::max(1, config_.cluster.max_redirects);
}

void cluster_router::start(events e) {
  events_ = std::move(e);
  refresh();
}

std::shared_ptr<connection> cluster_router::node_connection(const node_address& node) {
  const std::string key = node.text();
  if (auto it = nodes_.find(key); it != nodes_.end()) return it->second;
  client_config node_config = config_;
  node_config.host = node.host;
  node_config.port = node.port;
  connection_events handlers;
  handlers.on_ready = [weak = weak_from_this(), key] {
    if (auto self = weak.lock()) self->node_states_.mark_up(key);
  };
  handlers.on_down = [weak = weak_from_this(), key](std::error_code, const std::string&) {
    // After drop() returns: the held commands' completions may route more commands.
    auto self = weak.lock();
    if (!self || self->closed_) return;
    self->node_states_.mark_down(key);
    asio::post(self->strand_, [weak, key] {
      if (auto router = weak.lock()) router->node_down(key);
    });
  };
  auto conn = connection::create(strand_, node_config, config_.client_name, false, std::move(handlers));
  nodes_.emplace(key, conn);
  if (closed_) return conn;
  conn->start();
  return conn;
}

// A node's connection failed an attempt or dropped (a reconnect follows, with backoff).
// Its held commands come back (not_connected: they never ran) to be retried where the
// slot map says, and the map is reloaded: after a failover it names the promoted
// replica. Each failed reconnect lands here again, so the map keeps being reloaded
// while a master of it stays unreachable.
void cluster_router::node_down(const std::string& key) {
  if (closed_ || !node_states_.is_down(key)) return;
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return;
  const std::shared_ptr<connection> conn = it->second;
  last_code_ = errc::not_connected;
  last_error_ = conn->last_error_text();
  const bool mapped = is_master(map_, key);
  if (mapped) refresh();
  conn->fail_held(errc::not_connected, last_error_);
  if (!mapped) forget_unmapped_nodes();
}

// Closes the connections of down nodes the slot map does not name (cluster_nodes::
// take_unmapped_down), and shard subscribers nobody needs.
void cluster_router::forget_unmapped_nodes() {
  if (closed_) return;
  for (const std::string& key : node_states_.take_unmapped_down(map_)) {
    if (auto n = nodes_.find(key); n != nodes_.end()) {
      const std::shared_ptr<connection> conn = std::move(n->second);
      nodes_.erase(n);
      conn->fail_held(errc::not_connected, conn->last_error_text());
      conn->close({});
    }
  }
  for (auto it = shard_subscribers_.begin(); it != shard_subscribers_.end();) {
    shard_subscriber& sub = *it->second;
    if (sub.conn->ready() || sub.registry.channels() != 0 || is_master(map_, it->first)) {
      ++it;
      continue;
    }
    const std::shared_ptr<connection> conn = sub.conn;
    it = shard_subscribers_.erase(it);
    conn->close({});
  }
}

// --- commands ------------------------------------------------------------------

void cluster_router::execute(std::uint16_t slot, std::string_view command, clock_type::time_point deadline,
                             reply_handler done) {
  auto op = std::make_shared<routed>(
      routed{slot, std::string(command), deadline, std::move(done), route_attempts{}, nullptr});
  if (closed_) return op->done(errc::shut_down, resp::value{});
  if (!ready()) {
    pending_.push_back(op);
    pending_timer_.expires_at(std::min_element(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) {
                                return a->deadline < b->deadline;
                              })->get()->deadline);
    pending_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->expire_pending();
    });
    return;
  }
  dispatch(op);
}

void cluster_router::expire_pending() {
  const auto now = clock_type::now();
  auto expired = std::stable_partition(pending_.begin(), pending_.end(),
                                       [now](const auto& op) { return op->deadline > now; });
  std::vector<std::shared_ptr<routed>> due(expired, pending_.end());
  pending_.erase(expired, pending_.end());
  for (auto& op : due)
    op->done(errc::not_connected, resp::value::error(last_error_.empty() ? "no cluster slot map yet" : last_error_));
  if (!pending_.empty()) {
    pending_timer_.expires_at(std::min_element(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) {
                                return a->deadline < b->deadline;
                              })->get()->deadline);
    pending_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->expire_pending();
    });
  }
}

void cluster_router::dispatch(const std::shared_ptr<routed>& op) {
  const node_address* node = map_.node_for(op->slot);
  if (node == nullptr) {
    // No master serves the slot (yet): as CLUSTERDOWN.
    refresh();
    return retry_later(op, errc::server_error,
                       resp::value::error(fmt::format("CLUSTERDOWN Hash slot {} not served (client's slot map)", op->slot)));
  }
  send_to(op, *node, false);
}

bool cluster_router::retryable(std::error_code ec, const resp::value& reply) {
  if (ec == errc::not_connected) return true;
  if (ec != errc::server_error) return false;
  const redirect_kind kind = parse_redirect(reply.text).kind;
  return kind == redirect_kind::cluster_down || kind == redirect_kind::try_again;
}

void cluster_router::send_to(const std::shared_ptr<routed>& op, const node_address& node, bool asking) {
  if (node_states_.is_down(node)) {
    refresh();
    return retry_later(op, errc::not_connected,
                       resp::value::error(fmt::format("{} is unreachable: {}", node.text(),
                                                      nodes_.at(node.text())->last_error_text())));
  }
  auto conn = node_connection(node);
  if (asking) conn->execute_encoded("*1\r\n$6\r\nASKING\r\n", op->deadline, [](std::error_code, resp::value&&) {});
  conn->execute_encoded(op->command, op->deadline,
                        [weak = weak_from_this(), op, node](std::error_code ec, resp::value&& reply) mutable {
                          if (auto self = weak.lock()) return self->on_reply(op, node, ec, std::move(reply));
                          op->done(ec, std::move(reply));
                        });
}

void cluster_router::on_reply(const std::shared_ptr<routed>& op, const node_address& node, std::error_code ec,
                              resp::value&& reply) {
  const route_decision next =
      after_reply(ec, reply, node, op->attempts, policy_, clock_type::now() < op->deadline, closed_);
  if (next.learn_slot) learn_redirect(next.slot, next.to);
  if (next.reload_map) refresh();
  switch (next.what) {
    case route_decision::action::resend:
      return send_to(op, next.to, next.asking);
    case route_decision::action::retry_later:
      return retry_later(op, ec, std::move(reply));
    case route_decision::action::finish:
      break;
  }
  op->done(ec, std::move(reply));
}

void cluster_router::retry_later(const std::shared_ptr<routed>& op, std::error_code ec, resp::value&& reply) {
  const auto pause = retry_pause(op->attempts, policy_, op->deadline - clock_type::now());
  if (!pause) return op->done(ec, std::move(reply));
  if (!op->timer) op->timer = std::make_unique<asio::steady_timer>(strand_);
  op->timer->expires_after(*pause);
  op->timer->async_wait([weak = weak_from_this(), op](boost::system::error_code) {
    auto self = weak.lock();
    if (!self || self->closed_) return op->done(errc::shut_down, resp::value{});
    self->dispatch(op);
  });
}

// --- the slot map ----------------------------------------------------------------

void cluster_router::refresh() {
  if (closed_ || !map_reloads_.request()) return;
  candidates_ = node_states_.reload_candidates(map_);
  load_from(0, false);
}

void cluster_router::load_from(std::size_t candidate, bool use_slots) {
  if (closed_) return;
  if (candidate >= candidates_.size()) return load_round_failed();
  const node_address node = candidates_[candidate];
  auto conn = node_connection(node);
  const clock_type::time_point deadline = clock_type::now() + config_.connect_timeout;
  std::string command;
  resp::append_command(command, "CLUSTER", use_slots ? "SLOTS" : "SHARDS");
  conn->execute_encoded(
      command, deadline,
      [weak = weak_from_this(), candidate, use_slots, node](std::error_code ec, resp::value&& reply) {
        auto self = weak.lock();
        if (!self || self->closed_) return;
        // Any refusal of CLUSTER SHARDS (Redis < 7: unknown subcommand; an ACL or a
        // managed service that denies it: NOPERM) falls back to CLUSTER SLOTS on the same
        // node, whose own error, if any, is the one reported.
        if (ec == errc::server_error && !use_slots) return self->load_from(candidate, true);
        std::optional<std::string> bad;
        if (!ec) bad = use_slots ? self->map_.load_slots(reply) : self->map_.load_shards(reply, self->config_.tls.enabled);
        if (ec || bad) {
          if (ec == errc::server_error && reply.text.find("cluster support disabled") != std::string::npos) {
            self->last_code_ = errc::handshake_failed;
            self->last_error_ = fmt::format("{} is not a cluster node ({}): use a redis:// URL for a single server",
                                            node.text(), reply.text);
          } else {
            self->last_code_ = ec ? ec : make_error_code(errc::unexpected_reply);
            self->last_error_ =
                fmt::format("slot map from {}: {}", node.text(), bad ? *bad : reply.text.empty() ? ec.message() : reply.text);
          }
          return self->load_from(candidate + 1, false);
        }
        self->sharded_ = !use_slots;
        self->map_loaded();
      });
}

void cluster_router::load_round_failed() {
  const std::chrono::milliseconds delay = map_reloads_.round_failed();
  if (events_.on_down) events_.on_down(last_code_ ? last_code_ : make_error_code(errc::not_connected), last_error_);
  // Try again later: the first map (commands are waiting), or after a failover.
  refresh_within(delay);
}

void cluster_router::refresh_within(std::chrono::milliseconds delay) {
  if (closed_) return;
  const clock_type::time_point at = clock_type::now() + delay;
  if (refresh_armed_ && refresh_timer_.expiry() <= at) return;  // a sooner one is set
  refresh_armed_ = true;
  refresh_timer_.expires_at(at);
  refresh_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec) return;  // cancelled: closed, or re-armed sooner
    self->refresh_armed_ = false;
    self->refresh();
  });
}

void cluster_router::learn_redirect(std::uint16_t slot, const node_address& node) {
  map_.assign(slot, node);
  redirects_.learned(slot, node, clock_type::now());
}

void cluster_router::map_loaded() {
  // Before anything is routed by it: a node that has not caught up yet may have sent it.
  const bool contradicted = redirects_.reconcile(map_, clock_type::now());
  const std::optional<std::chrono::milliseconds> reload = map_reloads_.loaded(map_.covered());
  auto waiting = std::move(pending_);
  pending_.clear();
  pending_timer_.cancel();
  for (auto& op : waiting) dispatch(op);
  rehome_moved_channels();
  forget_unmapped_nodes();
  if (events_.on_ready) events_.on_ready();
  if (reload) refresh_within(*reload);
  if (contradicted) refresh_within(std::chrono::milliseconds(100));
}

// --- pub/sub ------------------------------------------------------------------------

cluster_router::shard_subscriber& cluster_router::shard_for(const node_address& node) {
  const std::string key = node.text();
  if (auto it = shard_subscribers_.find(key); it != shard_subscribers_.end()) return *it->second;
  auto sub = std::make_unique<shard_subscriber>();
  shard_subscriber& s = *sub;
  shard_subscribers_.emplace(key, std::move(sub));
  client_config node_config = config_;
  node_config.host = node.host;
  node_config.port = node.port;
  std::weak_ptr<cluster_router> weak = weak_from_this();
  connection_events handlers;
  // The subscriber may be gone (forget_unmapped_nodes) while its connection closes.
  handlers.on_ready = [weak, key] {
    auto self = weak.lock();
    if (!self) return;
    auto it = self->shard_subscribers_.find(key);
    if (it == self->shard_subscribers_.end()) return;
    std::string commands;
    it->second->registry.on_connected(commands);
    self->send_to_shard(*it->second, commands);
  };
  handlers.on_down = [weak, key](std::error_code, const std::string&) {
    auto self = weak.lock();
    if (!self) return;
    auto it = self->shard_subscribers_.find(key);
    if (it == self->shard_subscribers_.end()) return;
    it->second->registry.on_disconnected();
    it->second->unanswered.clear();
  };
  handlers.on_push = [weak, key](resp::value&& push) {
    if (auto self = weak.lock()) self->on_shard_push(key, std::move(push));
  };
  s.conn = connection::create(strand_, node_config, detail::subscriber_name(config_), true, std::move(handlers));
  if (!closed_) s.conn->start();
  return s;
}

connection& cluster_router::classic_subscriber() {
  if (classic_connection_) return *classic_connection_;
  const node_address node = map_.empty() ? node_states_.seeds().front() : map_.masters().front();
  client_config node_config = config_;
  node_config.host = node.host;
  node_config.port = node.port;
  connection_events handlers = detail::subscriber_events(weak_from_this(), [](cluster_router& self) {
    return std::pair{&self.classic_registry_, self.classic_connection_.get()};
  });
  classic_connection_ = connection::create(strand_, node_config, detail::subscriber_name(config_), true,
                                           std::move(handlers));
  if (!closed_) classic_connection_->start();
  return *classic_connection_;
}

void cluster_router::send_to_shard(shard_subscriber& sub, const std::string& commands) {
  if (commands.empty() || !sub.conn->ready()) return;  // on_connected sends them later
  for (std::string& channel : channels_of(commands)) sub.unanswered.push_back(std::move(channel));
  sub.conn->send_without_reply(commands);
}

void cluster_router::evict(relay& r, shard_subscriber& sub) {
  sub.registry.take_waiters(r.channel);
  r.registry = nullptr;
  r.confirmed = false;
  r.evicted_at = clock_type::now();
}

void cluster_router::on_shard_push(const std::string& node_key, resp::value&& push) {
  auto it = shard_subscribers_.find(node_key);
  if (it == shard_subscribers_.end()) return;
  shard_subscriber& sub = *it->second;
  if (push.is_error()) {
    // An SSUBSCRIBE refused: MOVED (the map was stale), ASK (its slot is migrating),
    // CLUSTERDOWN. Try again where the map says, shortly.
    if (sub.unanswered.empty()) return;
    const std::string channel = std::move(sub.unanswered.front());
    sub.unanswered.pop_front();
    redirect r = parse_redirect(push.text);
    if (r.kind == redirect_kind::moved) {
      if (r.node.host.empty()) r.node.host = parse_node_address(node_key)->host;
      learn_redirect(r.slot, r.node);
    }
    if (auto relay_it = relays_.find(channel); relay_it != relays_.end() && relay_it->second->registry == &sub.registry)
      evict(*relay_it->second, sub);
    refresh();
    return rehome_soon();
  }
  const auto& e = push.elements;
  const bool answer = e.size() >= 2 && e[0].is_string() && e[1].is_string() &&
                      (e[0].text == "ssubscribe" || e[0].text == "sunsubscribe");
  const std::optional<std::string> dropped = sub.registry.on_push(push);
  if (dropped) {
    // The node gave the channel's slot away (a sunsubscribe of its own): subscribe
    // where the map says once it is refreshed; the waiters are told (and retry) when
    // the new SSUBSCRIBE is confirmed.
    if (auto r = relays_.find(*dropped); r != relays_.end()) {
      evict(*r->second, sub);
    } else {
      sub.registry.take_waiters(*dropped);
    }
    refresh();
    return;
  }
  if (answer && !sub.unanswered.empty() && sub.unanswered.front() == e[1].text) sub.unanswered.pop_front();
}

void cluster_router::rehome_soon() {
  if (rehome_armed_ || closed_) return;
  rehome_armed_ = true;
  rehome_timer_.expires_after(std::chrono::milliseconds(50));
  rehome_timer_.async_wait([weak = weak_from_this()](boost::system::error_code) {
    auto self = weak.lock();
    if (!self || self->closed_) return;
    self->rehome_armed_ = false;
    self->rehome_moved_channels();
  });
}

// Subscribes a homeless relay where it belongs now.
void cluster_router::home(relay& r) {
  std::string commands;
  if (r.sharded && sharded_) {
    const node_address* node = map_.node_for(key_slot(r.channel));
    if (node == nullptr) return;  // homeless until a map serves the slot
    shard_subscriber& sub = shard_for(*node);
    r.registry = &sub.registry;
    r.node_key = node->text();
    const auto added = r.registry->add(r.channel, r, commands);
    r.inner = added.id;
    send_to_shard(sub, commands);
    if (added.subscribed) r.on_subscribed();
    return;
  }
  connection& conn = classic_subscriber();
  r.registry = &classic_registry_;
  r.node_key.clear();
  const auto added = r.registry->add(r.channel, r, commands);
  r.inner = added.id;
  if (!commands.empty()) conn.send_without_reply(commands);
  if (added.subscribed) r.on_subscribed();
}

void cluster_router::rehome_moved_channels() {
  bool still_homeless = false;
  for (auto& [channel, r] : relays_) {
    if (r->registry != nullptr && r->sharded && sharded_) {
      const node_address* node = map_.node_for(key_slot(channel));
      if (node != nullptr && node->text() != r->node_key) {
        // Moved without a sunsubscribe reaching us (we were reconnecting): leave the old shard.
        std::string commands;
        r->registry->remove(channel, r->inner, commands);
        send_to_shard(*shard_subscribers_.at(r->node_key), commands);
        r->registry = nullptr;
        r->confirmed = false;
      }
    }
    if (r->registry == nullptr) {
      const node_address* node = r->sharded && sharded_ ? map_.node_for(key_slot(channel)) : nullptr;
      if (node != nullptr && node->text() == r->node_key &&
          clock_type::now() - r->evicted_at < std::chrono::seconds(2)) {
        // The map still names the node that dropped or refused it: it has not caught
        // up yet (or the slot is still migrating). After 2 s, try that node again.
        still_homeless = true;
        continue;
      }
      home(*r);
      if (r->registry == nullptr) still_homeless = true;
    }
  }
  if (still_homeless) refresh_within(std::chrono::milliseconds(100));
}

subscription_registry::added cluster_router::subscribe(const std::string& channel, subscription_listener& listener,
                                                       bool sharded) {
  auto it = relays_.find(channel);
  if (it == relays_.end()) {
    auto r = std::make_unique<relay>();
    r->channel = channel;
    r->sharded = sharded;
    it = relays_.emplace(channel, std::move(r)).first;
    if (ready()) home(*it->second);
  }
  relay& r = *it->second;
  const subscription_registry::waiter_id id = next_waiter_++;
  r.waiters.push_back({id, &listener});
  return {id, r.confirmed};
}

void cluster_router::unsubscribe(const std::string& channel, subscription_registry::waiter_id id) {
  auto it = relays_.find(channel);
  if (it == relays_.end()) return;
  relay& r = *it->second;
  std::erase_if(r.waiters, [id](const relay::waiter& w) { return w.id == id; });
  if (!r.waiters.empty()) return;
  if (r.registry == &classic_registry_) {
    std::string commands;
    r.registry->remove(channel, r.inner, commands);
    if (!commands.empty()) classic_connection_->send_without_reply(commands);
  } else if (r.registry != nullptr) {
    std::string commands;
    r.registry->remove(channel, r.inner, commands);
    send_to_shard(*shard_subscribers_.at(r.node_key), commands);
  }
  relays_.erase(it);
}

// --- close ---------------------------------------------------------------------------

void cluster_router::close(unique_function<void()> done) {
  closed_ = true;
  close_done_ = std::move(done);
  pending_timer_.cancel();
  refresh_timer_.cancel();
  rehome_timer_.cancel();
  auto waiting = std::move(pending_);
  pending_.clear();
  for (auto& op : waiting) op->done(errc::shut_down, resp::value{});
  std::vector<std::shared_ptr<connection>> all;
  for (auto& [key, conn] : nodes_) all.push_back(conn);
  for (auto& [key, sub] : shard_subscribers_) all.push_back(sub->conn);
  if (classic_connection_) all.push_back(classic_connection_);
  closing_ = static_cast<int>(all.size()) + 1;
  auto one_closed = [self = shared_from_this()] {
    if (--self->closing_ == 0 && self->close_done_) std::exchange(self->close_done_, nullptr)();
  };
  for (auto& conn : all) conn->close(one_closed);
  one_closed();
}

}  // namespace lockscope::lock::detail
