#include "lockscope/live/metrics_server.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"

namespace lockscope::live {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t max_connections = 16;
constexpr std::uint32_t max_header_bytes = 8192;
constexpr auto request_timeout = 10s;
constexpr auto fresh_enough = 100ms;
constexpr auto snapshot_wait = 500ms;
constexpr auto snapshot_check = 5ms;

tcp::endpoint parse_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    throw std::runtime_error("expected ADDR:PORT (IPv6: [ADDR]:PORT)");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port_text = listen.substr(colon + 1);
  unsigned long port = 0;
  try {
    std::size_t used = 0;
    port = std::stoul(port_text, &used);
    if (used != port_text.size() || port > 65535) throw std::invalid_argument("port");
  } catch (const std::exception&) {
    throw std::runtime_error("bad port '" + port_text + "'");
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("bad address '" + host + "' (a numeric IPv4 or IPv6 address)");
  return {address, static_cast<unsigned short>(port)};
}

std::uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

struct metrics_server::impl {
  lock_metrics metrics;
  std::function<capture_gauges()> gather;
  std::string scratch;  // capture thread: rendered here, then swapped into snapshot

  // Shared between the capture thread and the HTTP thread.
  std::atomic<bool> wanted{false};
  std::mutex mutex;
  std::string snapshot;
  std::uint64_t generation = 0;
  std::chrono::steady_clock::time_point rendered_at{};

  std::size_t connections = 0;  // HTTP thread only (sessions count themselves)
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;

  explicit impl(const metrics_options& o) : metrics(o) {}

  void accept();
  class session;
};

class metrics_server::impl::session : public std::enable_shared_from_this<session> {
 public:
  session(impl& server, tcp::socket socket) : server_(server), stream_(std::move(socket)), timer_(server.io) {
    ++server_.connections;
  }
  ~session() { --server_.connections; }

  void read() {
    parser_.emplace();
    parser_->header_limit(max_header_bytes);
    parser_->body_limit(0);
    stream_.expires_after(request_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->on_read(ec);
    });
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream) return close();
    if (ec) {
      if (ec == http::error::header_limit || ec == http::error::body_limit || ec == http::error::unexpected_body) {
        return respond(http::status::bad_request, "request too large or with a body\n");
      }
      return;  // timed out or broken: the socket goes with the session
    }
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    const std::string_view target(req.target().data(), req.target().size());
    if (target.substr(0, target.find('?')) != "/metrics") {  // a scrape config's `params` come as a query
      return respond(http::status::not_found, "only /metrics is served here\n");
    }
    if (req.method() != http::verb::get && !head_) return respond(http::status::method_not_allowed, "GET or HEAD\n");
    {
      const std::lock_guard<std::mutex> l(server_.mutex);
      if (server_.generation > 0 && std::chrono::steady_clock::now() - server_.rendered_at < fresh_enough) {
        return respond(http::status::ok, server_.snapshot, true);
      }
      asked_generation_ = server_.generation;
    }
    server_.wanted.store(true, std::memory_order_release);
    deadline_ = std::chrono::steady_clock::now() + snapshot_wait;
    wait_for_snapshot();
  }

  // Polls (on this thread's timer, never blocking it) for the capture thread's render.
  void wait_for_snapshot() {
    {
      const std::lock_guard<std::mutex> l(server_.mutex);
      const bool fresh = server_.generation > asked_generation_;
      if (fresh || std::chrono::steady_clock::now() >= deadline_) {
        if (server_.generation == 0) return respond(http::status::service_unavailable, "no snapshot yet\n");
        return respond(http::status::ok, server_.snapshot, true);
      }
    }
    timer_.expires_after(snapshot_check);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->wait_for_snapshot();
    });
  }

  void respond(http::status status, const std::string& body, bool prometheus_text = false) {
    response_ = {};
    response_.version(11);
    response_.result(status);
    response_.set(http::field::server, "lockscope");
    response_.set(http::field::content_type,
                  prometheus_text ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8");
    if (status == http::status::method_not_allowed) response_.set(http::field::allow, "GET, HEAD");
    if (status != http::status::ok) keep_alive_ = false;
    response_.keep_alive(keep_alive_);
    response_.body() = head_ ? std::string() : body;
    response_.content_length(body.size());  // HEAD: the length GET would send
    stream_.expires_after(request_timeout);
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      if (self->keep_alive_) self->read();
      else self->close();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  impl& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{max_header_bytes};
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> response_;
  asio::steady_timer timer_;
  std::chrono::steady_clock::time_point deadline_;
  std::uint64_t asked_generation_ = 0;
  bool keep_alive_ = false;
  bool head_ = false;
};

void metrics_server::impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      if (connections < max_connections) std::make_shared<session>(*this, std::move(socket))->read();
      // else: the socket closes here
    }
    accept();
  });
}

metrics_server::metrics_server(const std::string& listen, const metrics_options& options)
    : impl_(std::make_unique<impl>(options)) {
  const tcp::endpoint endpoint = parse_listen(listen);
  beast::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen: " + ec.message());
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

metrics_server::~metrics_server() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

lock_metrics& metrics_server::metrics() noexcept { return impl_->metrics; }

std::string metrics_server::address() const {
  beast::error_code ec;
  const tcp::endpoint e = impl_->acceptor.local_endpoint(ec);
  if (ec) return "?";
  const std::string host = e.address().to_string();
  return e.address().is_v6() ? fmt::format("[{}]:{}", host, e.port()) : fmt::format("{}:{}", host, e.port());
}

void metrics_server::attach(std::function<capture_gauges()> gather) {
  impl_->gather = std::move(gather);
  impl_->wanted.store(true, std::memory_order_relaxed);  // a first snapshot right away
  poll();
}

void metrics_server::poll() {
  if (!impl_->wanted.load(std::memory_order_acquire) || !impl_->gather) return;
  impl_->wanted.store(false, std::memory_order_relaxed);
  impl_->metrics.render(impl_->scratch, impl_->gather());
  const std::lock_guard<std::mutex> l(impl_->mutex);
  impl_->snapshot.swap(impl_->scratch);
  ++impl_->generation;
  impl_->rendered_at = std::chrono::steady_clock::now();
}

std::unique_ptr<metrics_server> open_metrics_server(const char* command, const std::string& listen,
                                                    std::size_t max_locks) {
  try {
    metrics_options o;
    o.max_locks = max_locks;
    auto server = std::make_unique<metrics_server>(listen, o);
    print_diagnostic("lockscope {}: serving metrics at http://{}/metrics\n", command, server->address());
    return server;
  } catch (const std::exception& e) {
    print_diagnostic("lockscope {}: --metrics-listen {}: {}\n", command, listen, e.what());
    return nullptr;
  }
}

capture_gauges gather_capture_gauges(const ingest::ingest_pipeline& ingest,
                                               const locks::lock_recognizer& recognizer,
                                               const locks::lock_timeline& timeline,
                                               const ingest::packet_source& live, std::size_t max_flows,
                                               std::size_t max_locks) {
  const ingest::ingest_stats s = ingest.stats();
  const auto drops = live.stats();
  const locks::timeline_memory memory = timeline.memory();
  capture_gauges g;
  g.packets = s.packets;
  g.bytes = s.bytes;
  g.kernel_drops = drops.dropped + drops.interface_dropped;
  g.exchanges = s.exchanges + s.pushes;
  g.decode_errors = s.decode_errors;
  g.gap_bytes = s.gap_bytes;
  g.flows_open = ingest.active_flows();
  g.buffered_bytes = s.held_bytes;
  g.buffer_sheds = s.buffer_sheds;
  g.rss_bytes = resident_bytes();
  g.owners = memory.owners;
  g.connections = memory.connections;
  g.locks = timeline.lock_count();
  g.locks_cap = max_locks;
  g.locks_forgotten = timeline.forgotten().locks;
  g.scripts = recognizer.cached_scripts();
  g.scripts_cap = locks::script_cache_entries;
  g.shas = recognizer.cached_shas();
  g.shas_cap = locks::sha_cache_entries;
  g.values = recognizer.stats().values_tracked;
  g.values_cap = locks::value_flow_entries;
  g.flows_cap = max_flows;
  return g;
}

}  // namespace lockscope::live
