#include "sentinel_monitor.hpp"

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "lockscope/lock/error.hpp"

namespace lockscope::lock::detail {

namespace {

constexpr std::string_view switch_channel = "+switch-master";

// The watcher's addresses: the next sentinel on each attempt, so that one that went
// down is left for the others.
class sentinel_rotation final : public endpoint_source {
 public:
  sentinel_rotation(std::vector<server_address> sentinels, std::size_t first)
      : sentinels_(std::move(sentinels)), next_(first) {}
  void locate(unique_function<void(located)> done) override {
    done({{}, {}, sentinels_[next_++ % sentinels_.size()]});
  }
  std::string check_role(const server_address&, const resp::value&) override { return {}; }
  void dropped(const server_address&) override {}

 private:
  std::vector<server_address> sentinels_;
  std::size_t next_;
};

}  // namespace

sentinel_monitor::sentinel_monitor(strand_type strand, const client_config& data)
    : strand_(std::move(strand)), data_(data), discovery_(data.sentinel) {}

bool sentinel_monitor::retryable(std::error_code ec, const resp::value& reply) noexcept {
  return ec == errc::not_connected || (ec == errc::server_error && is_readonly_error(reply));
}

reply_handler sentinel_monitor::watch_writes(reply_handler done) {
  return [self = shared_from_this(), done = std::move(done)](std::error_code ec, resp::value&& reply) mutable {
    if (ec == errc::server_error && is_readonly_error(reply) && !self->closed_) {
      // The first attached connection is the command connection, which ran the write.
      if (auto commands = self->attached_.empty() ? nullptr : self->attached_.front().lock()) {
        const server_address demoted = commands->endpoint();
        self->forget_master(demoted);
        self->move_attached(demoted, address_text(demoted) + " refused a write (READONLY): asking the sentinels again",
                            false);
      }
    }
    done(ec, std::move(reply));
  };
}

// Reconnects the attached connections that are up: all of them, or (only_elsewhere)
// those not at `master`. One still connecting fails on its own, or its ROLE check does.
void sentinel_monitor::move_attached(const server_address& master, const std::string& why, bool only_elsewhere) {
  for (const auto& weak : attached_) {
    auto c = weak.lock();
    if (c && c->ready() && (!only_elsewhere || c->endpoint() != master)) c->reconnect(why);
  }
}

client_config sentinel_monitor::sentinel_connection_config(const server_address& at) const {
  client_config c;
  c.host = at.host;
  c.port = at.port;
  c.username = data_.sentinel.username;
  c.password = data_.sentinel.password;
  c.database = 0;  // sentinels have no databases
  c.protocol = 2;
  c.tls = data_.tls;
  c.connect_timeout = data_.connect_timeout;
  c.command_timeout = data_.command_timeout;
  c.ping_interval = data_.ping_interval;
  c.reconnect_backoff_min = data_.reconnect_backoff_min;
  c.reconnect_backoff_max = data_.reconnect_backoff_max;
  return c;
}

void sentinel_monitor::locate(unique_function<void(located)> done) {
  if (closed_) return done({errc::shut_down, "the client was closed", {}});
  if (master_) return done({{}, {}, *master_});
  waiters_.push_back(std::move(done));
  if (!discovery_.in_round()) start_round(false);
}

std::string sentinel_monitor::check_role(const server_address& at, const resp::value& reply) {
  std::string wrong = check_master_role(reply, at);
  if (!wrong.empty()) forget_master(at);
  return wrong;
}

void sentinel_monitor::forget_master(const server_address& at) {
  if (master_ && *master_ == at) master_.reset();
}

void sentinel_monitor::start_round(bool check) {
  round_is_check_ = check;
  switches_at_round_start_ = switches_;
  act(discovery_.begin());
}

void sentinel_monitor::act(sentinel_step step) {
  if (closed_) return;
  switch (step.kind) {
    case sentinel_step::kind_type::ask:
      return ask(step.sentinel);
    case sentinel_step::kind_type::found:
      return round_done({{}, {}, std::move(step.master)});
    case sentinel_step::kind_type::failed:
      return round_done({errc::no_master, std::move(step.why), {}});
  }
}

void sentinel_monitor::ask(std::size_t sentinel) {
  const std::uint64_t id = ++query_id_;
  std::weak_ptr<sentinel_monitor> weak = shared_from_this();
  connection_events events;
  events.on_ready = [weak, id, sentinel] {
    auto self = weak.lock();
    if (!self || id != self->query_id_) return;
    // Asking is part of connecting: a sentinel that accepts but does not answer costs
    // a connect timeout, like one that does not accept.
    self->query_->execute(
        clock_type::now() + self->data_.connect_timeout,
        [weak, id, sentinel](std::error_code ec, resp::value&& reply) {
          auto me = weak.lock();
          if (!me || id != me->query_id_ || me->closed_) return;
          me->end_query();
          me->act(me->discovery_.on_reply(sentinel, ec, reply));
        },
        "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self->discovery_.master_name());
  };
  // Down before it answered: refused, timed out, wrong password. One attempt only.
  events.on_down = [weak, id, sentinel](std::error_code, const std::string& why) {
    auto self = weak.lock();
    if (!self || id != self->query_id_ || self->closed_) return;
    self->end_query();
    self->act(self->discovery_.on_unreachable(sentinel, why));
  };
  const std::string name = data_.client_name.empty() ? std::string() : data_.client_name + ":sentinel";
  query_ = connection::create(strand_, sentinel_connection_config(discovery_.sentinels()[sentinel]), name, false,
                              std::move(events));
  query_->start();
}

// Called from the query connection's own callbacks: it is closed from the strand
// afterwards, the handler keeping it alive until then.
void sentinel_monitor::end_query() {
  ++query_id_;
  std::erase_if(retired_, [](const auto& c) { return c->current_state() == connection::state::closed; });
  retired_.push_back(std::exchange(query_, nullptr));
  boost::asio::post(strand_, [q = retired_.back()] { q->close(nullptr); });
}

void sentinel_monitor::round_done(located result) {
  // A +switch-master that came during the round is newer than what a sentinel that has
  // not caught up yet may have answered.
  if (switches_ != switches_at_round_start_ && master_) {
    result = {{}, {}, *master_};
  } else if (!result.ec) {
    learned(result.address, round_is_check_);
  }
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) w(result);
  if (!result.ec && !watcher_) watch_switches();
}

// An address from a round or a +switch-master. `announce`: connections elsewhere move
// to it (a round that only serves a reconnect does not need that).
void sentinel_monitor::learned(const server_address& master, bool announce) {
  master_ = master;
  const bool moved = last_master_ && *last_master_ != master;
  last_master_ = master;
  if (moved && announce)
    move_attached(master, fmt::format("the sentinels moved master '{}' to {}", discovery_.master_name(),
                                      address_text(master)), true);
}

void sentinel_monitor::watch_switches() {
  std::weak_ptr<sentinel_monitor> weak = shared_from_this();
  connection_events events;
  events.on_ready = [weak] {
    auto self = weak.lock();
    if (!self || self->closed_) return;
    std::string subscribe;
    resp::append_command(subscribe, "SUBSCRIBE", switch_channel);
    self->watcher_->send_without_reply(subscribe);
    // A switch announced while no sentinel was watched would be missed: ask again.
    if (self->watcher_->ready_count() > 1 && !self->discovery_.in_round()) self->start_round(true);
  };
  events.on_push = [weak](resp::value&& push) {
    if (auto self = weak.lock()) self->on_watcher_push(push);
  };
  events.endpoints = std::make_shared<sentinel_rotation>(discovery_.sentinels(), discovery_.preferred());
  const std::string name = data_.client_name.empty() ? std::string() : data_.client_name + ":sentinel:sub";
  // The address is the rotation's; the config's host and port are only a placeholder.
  watcher_ = connection::create(strand_, sentinel_connection_config(discovery_.sentinels()[discovery_.preferred()]),
                                name, true, std::move(events));
  watcher_->start();
}

void sentinel_monitor::on_watcher_push(const resp::value& push) {
  if (closed_ || push.elements.size() != 3 || push.elements[0].text != "message" ||
      push.elements[1].text != switch_channel)
    return;
  if (const auto master = discovery_.on_switch_master(push.elements[2].text)) {
    ++switches_;
    learned(*master, true);
  }
}

void sentinel_monitor::close(unique_function<void()> done) {
  closed_ = true;
  ++query_id_;
  std::vector<std::shared_ptr<connection>> open = std::move(retired_);
  retired_.clear();
  if (query_) open.push_back(std::exchange(query_, nullptr));
  if (watcher_) open.push_back(std::exchange(watcher_, nullptr));
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& w : waiters) w({errc::shut_down, "the client was closed", {}});
  // Each QUIT's handler holds its connection: the client's I/O must run until all are
  // closed, or they would never be freed.
  auto remaining = std::make_shared<std::size_t>(open.size());
  auto all_closed = std::make_shared<unique_function<void()>>(std::move(done));
  if (open.empty()) {
    if (*all_closed) (*all_closed)();
    return;
  }
  for (const auto& c : open)
    c->close([remaining, all_closed] {
      if (--*remaining == 0 && *all_closed) (*all_closed)();
    });
}

}  // namespace lockscope::lock::detail
