// The client over rediss:// against a real `redis-server --tls-port`, with certificates
// generated at run time by the openssl CLI (tests/support/scripts/make-test-certs): a
// CA, a server certificate for localhost/127.0.0.1, a client certificate, an expired
// one, one for another host name and two from a CA the client does not trust.
#include <openssl/x509_vfy.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <boost/asio/ssl/error.hpp>
#include <catch2/catch.hpp>

#include "lockscope/lock/client.hpp"
#include "lockscope/lock/detail/tls.hpp"
#include "lockscope/lock/error.hpp"
#include "lockscope/test/catch_support.hpp"
#include "lockscope/test/redis_server.hpp"
#include "lockscope/test/resp_connection.hpp"
#include "lockscope/test/tls_certificates.hpp"
#include "client_fixtures.hpp"

using namespace std::chrono_literals;
namespace lock = lockscope::lock;
using lockscope::test::redis_server;
using lockscope::test::redis_server_options;
using lockscope::test::resp_connection;
using lockscope::test::since;
using lockscope::test::tls_certificates;

namespace {

#define LOCKSCOPE_REQUIRE_TLS()                                   \
  LOCKSCOPE_REQUIRE_REDIS_SERVER();                               \
  do {                                                            \
    if (!lockscope::test::openssl_cli_available()) {              \
      WARN("the openssl CLI is not installed: skipping");         \
      return;                                                     \
    }                                                             \
  } while (false)

const tls_certificates& certs() { return tls_certificates::shared(); }

redis_server tls_server(const std::string& certificate = "server", bool auth_clients = false,
                        bool plain_port_too = false) {
  redis_server_options o;
  o.tls = certs().server_tls(certificate, auth_clients);
  o.tls->plain_port_too = plain_port_too;
  return redis_server(std::move(o));
}

lock::client_config tls_config_for(const redis_server& server, const std::string& host = "127.0.0.1") {
  lock::client_config c = lockscope::test::config_for(server);
  c.host = host;
  c.port = server.tls_port();
  c.tls.enabled = true;
  c.tls.ca = certs().file("ca.pem");
  return c;
}

// The one-line error connect() throws.
std::pair<std::error_code, std::string> connect_error(const lock::client_config& config) {
  lock::client client(config);
  try {
    client.connect();
  } catch (const lock::lock_error& e) {
    return {e.code(), e.what()};
  }
  return {{}, "connected"};
}

void lock_and_unlock(const lock::client_config& config) {
  lock::client client(config);
  client.connect();
  auto l = client.get_lock("tls-lock");
  l.lock();
  CHECK(l.is_locked());
  l.unlock_or_throw();
  CHECK_FALSE(l.is_locked());
}

}  // namespace

TEST_CASE("TLS: lock, unlock, contention and the pub/sub wake-up over rediss://", "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  // The plain port is for the test's own checks; the clients use the TLS port only.
  redis_server server = tls_server("server", false, true);
  resp_connection raw(server.host(), server.port());
  const auto config = tls_config_for(server);
  REQUIRE(lock::client_config::from_url("rediss://127.0.0.1:" + std::to_string(server.tls_port())).tls.enabled);

  lock::client a(config);
  lock::client b(config);
  a.connect();
  b.connect();
  auto held = a.get_lock("tls-wake");
  held.lock();  // watchdog lease: 30 s, so only the unlock message can wake the waiter
  CHECK(raw.command("HGET", "tls-wake", held.owner()).text == "1");

  auto waiter = b.get_lock("tls-wake", "waiter:1");
  auto acquired = std::async(std::launch::async, [&] { return waiter.try_lock(20s); });
  REQUIRE(lockscope::test::eventually(
      [&] { return raw.command("PUBSUB", "NUMSUB", "redisson_lock__channel:{tls-wake}").elements.at(1).integer == 1; },
      10s));
  const auto released = std::chrono::steady_clock::now();
  held.unlock_or_throw();
  REQUIRE(acquired.wait_for(10s) == std::future_status::ready);
  CHECK(acquired.get());
  CHECK(since(released) < 5s);  // far below the 30 s lease: woken by the message
  CHECK(raw.command("HGET", "tls-wake", "waiter:1").text == "1");
  waiter.unlock_or_throw();

  // Two clients, two threads each, a read-modify-write through Redis under the lock:
  // the count is exact only if the lock excludes.
  raw.command("SET", "tls-counter", "0");
  constexpr int rounds = 25;
  std::vector<std::thread> workers;
  for (lock::client* c : {&a, &b, &a, &b}) {
    workers.emplace_back([c] {
      auto l = c->get_lock("tls-counter-lock");
      for (int i = 0; i < rounds; ++i) {
        std::scoped_lock hold(l);
        const auto v = std::stoi(c->command({"GET", "tls-counter"}).text);
        c->command({"SET", "tls-counter", std::to_string(v + 1)});
      }
    });
  }
  for (auto& t : workers) t.join();
  CHECK(raw.command("GET", "tls-counter").text == std::to_string(4 * rounds));
}

TEST_CASE("TLS: a CA directory in OpenSSL's hashed layout, and localhost as the host name", "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  redis_server server = tls_server();
  auto config = tls_config_for(server, "localhost");
  config.tls.ca = certs().file("ca-dir");
  lock_and_unlock(config);
}

TEST_CASE("TLS: mutual TLS with tls-auth-clients yes", "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  redis_server server = tls_server("server", true);
  auto config = tls_config_for(server);
  SECTION("the client certificate is accepted") {
    config.tls.certificate = certs().file("client.pem");
    config.tls.private_key = certs().file("client.key");
    lock_and_unlock(config);
  }
  SECTION("no client certificate: a clear error") {
    const auto [ec, what] = connect_error(config);
    CHECK(ec == lock::errc::tls_failed);
    CHECK_THAT(what, Catch::Contains("requires a client certificate") || Catch::Contains("closed the connection"));
    CHECK(what.find('\n') == std::string::npos);
  }
  SECTION("a client certificate from a CA the server does not trust") {
    config.tls.certificate = certs().file("other-ca-client.pem");
    config.tls.private_key = certs().file("other-ca-client.key");
    const auto [ec, what] = connect_error(config);
    CHECK(ec == lock::errc::tls_failed);
    CHECK_THAT(what, Catch::Contains("rejected the client certificate") || Catch::Contains("closed the connection"));
  }
}

TEST_CASE("TLS: a server certificate from an unknown CA is not trusted", "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  redis_server server = tls_server("other-ca-server");
  const auto [ec, what] = connect_error(tls_config_for(server));
  CHECK(ec == lock::errc::tls_failed);
  CHECK_THAT(what, Catch::StartsWith("TLS: certificate not trusted (unknown CA)") &&
                       Catch::Contains("CN=lockscope other CA") && Catch::Contains(std::to_string(server.tls_port())));
  SECTION("the system trust store does not know the test CA either") {
    auto config = tls_config_for(server);
    config.tls.ca.clear();
    CHECK_THAT(connect_error(config).second, Catch::StartsWith("TLS: certificate not trusted (unknown CA)"));
  }
  SECTION("--insecure accepts it") {
    auto config = tls_config_for(server);
    config.tls.verify_peer = false;
    lock_and_unlock(config);
  }
}

TEST_CASE("TLS: a certificate for another host name", "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  redis_server server = tls_server("other-name");
  const std::string host = GENERATE(std::string("127.0.0.1"), std::string("localhost"));
  const auto [ec, what] = connect_error(tls_config_for(server, host));
  CHECK(ec == lock::errc::tls_failed);
  CHECK_THAT(what, Catch::StartsWith("TLS: host name mismatch") && Catch::Contains("DNS:redis.other.example") &&
                       Catch::EndsWith("not " + host));
  auto insecure = tls_config_for(server, host);
  insecure.tls.verify_peer = false;
  lock_and_unlock(insecure);
}

TEST_CASE("TLS: an expired server certificate", "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  redis_server server = tls_server("expired");
  const auto [ec, what] = connect_error(tls_config_for(server));
  CHECK(ec == lock::errc::tls_failed);
  CHECK_THAT(what, Catch::StartsWith("TLS: certificate expired") && Catch::Contains("2020"));
  auto insecure = tls_config_for(server);
  insecure.tls.verify_peer = false;
  lock_and_unlock(insecure);
}

TEST_CASE("TLS: a plain port, and files that cannot be loaded", "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  SECTION("rediss:// to a plain Redis port") {
    redis_server plain;
    auto config = lockscope::test::config_for(plain);
    config.tls.enabled = true;
    config.tls.ca = certs().file("ca.pem");
    config.connect_timeout = 1s;
    const auto [ec, what] = connect_error(config);
    CHECK(ec == lock::errc::tls_failed);
    CHECK_THAT(what, Catch::Contains("plain redis:// port"));
  }
  SECTION("redis:// to a TLS port") {
    redis_server server = tls_server();
    auto config = tls_config_for(server);
    config.tls.enabled = false;
    const auto [ec, what] = connect_error(config);
    CHECK(ec);
    CHECK(ec != lock::errc::tls_failed);
  }
  redis_server server = tls_server();
  auto config = tls_config_for(server);
  SECTION("a missing CA file") {
    config.tls.ca = certs().file("nope.pem");
    const auto [ec, what] = connect_error(config);
    CHECK(ec == lock::errc::invalid_argument);
    CHECK(what == "TLS: cannot load the CA file '" + certs().file("nope.pem") + "': no such file or directory");
  }
  SECTION("a key that is not the certificate's") {
    config.tls.certificate = certs().file("client.pem");
    config.tls.private_key = certs().file("server.key");
    const auto [ec, what] = connect_error(config);
    CHECK(ec == lock::errc::invalid_argument);
    CHECK_THAT(what, Catch::Contains("does not belong to the certificate"));
  }
  SECTION("a certificate without its key") {
    config.tls.certificate = certs().file("client.pem");
    CHECK(connect_error(config).second == "TLS: a client certificate was given without its private key");
  }
}

TEST_CASE("TLS: failure texts for OpenSSL's verify results and alerts", "[lock][tls]") {
  lock::detail::certificate_failure f;
  f.subject = "CN=redis";
  f.issuer = "CN=Corp CA";
  f.names = "DNS:redis.internal";
  f.not_after = "Jan  2 00:00:00 2020 GMT";
  const auto text = [&](long error) {
    f.error = error;
    return lock::detail::describe_certificate_failure(f, "10.0.0.5:6380", "10.0.0.5");
  };
  for (long untrusted : {X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
                         X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE}) {
    CHECK(text(untrusted) ==
          "TLS: certificate not trusted (unknown CA): the certificate of 10.0.0.5:6380 (CN=redis) is issued by "
          "CN=Corp CA, which is not among the trusted CAs (tls.ca / --tls-ca)");
  }
  CHECK(text(X509_V_ERR_IP_ADDRESS_MISMATCH) ==
        "TLS: host name mismatch: the certificate of 10.0.0.5:6380 (CN=redis) is for DNS:redis.internal, not 10.0.0.5");
  CHECK(text(X509_V_ERR_CERT_HAS_EXPIRED) ==
        "TLS: certificate expired: the certificate of 10.0.0.5:6380 (CN=redis) expired on Jan  2 00:00:00 2020 GMT");
  CHECK_THAT(text(X509_V_ERR_CERT_REVOKED), Catch::StartsWith("TLS: certificate revoked"));
  CHECK_THAT(text(X509_V_ERR_INVALID_PURPOSE), Catch::StartsWith("TLS: the certificate of 10.0.0.5:6380 (CN=redis) "
                                                                 "failed verification: "));
  f.depth = 1;
  CHECK_THAT(text(X509_V_ERR_CERT_HAS_EXPIRED), Catch::Contains("a CA certificate in the chain of 10.0.0.5:6380"));

  const auto alert = [](int reason, bool has_certificate = false) {
    const boost::system::error_code ec(ERR_PACK(ERR_LIB_SSL, 0, reason), boost::asio::error::get_ssl_category());
    return lock::detail::describe_tls_error(ec, "h:6380", has_certificate);
  };
  CHECK_THAT(alert(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED), Catch::Contains("requires a client certificate"));
  CHECK_THAT(alert(SSL_R_TLSV1_ALERT_UNKNOWN_CA, true), Catch::Contains("rejected the client certificate"));
  CHECK_THAT(alert(SSL_R_SSLV3_ALERT_BAD_CERTIFICATE, true), Catch::Contains("rejected the client certificate"));
  CHECK_THAT(alert(SSL_R_WRONG_VERSION_NUMBER), Catch::Contains("does not speak TLS"));
  CHECK_THAT(alert(SSL_R_UNSUPPORTED_PROTOCOL), Catch::Contains("TLS 1.2 or newer"));
  CHECK_THAT(alert(SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE), Catch::StartsWith("TLS handshake refused by h:6380"));
  CHECK_THAT(lock::detail::describe_tls_error(boost::asio::ssl::error::stream_truncated, "h:6380", false),
             Catch::Contains("closed the connection during the handshake"));
}

TEST_CASE("TLS: a restarted server is a dropped connection: the client reconnects and the waiter resubscribes",
          "[lock][tls][redis]") {
  LOCKSCOPE_REQUIRE_TLS();
  redis_server server = tls_server("server", false, true);
  auto config = tls_config_for(server);
  config.reconnect_backoff_max = 200ms;
  lock::client client(config);
  client.connect();
  auto l = client.get_lock("tls-restart", "holder:1");
  l.lock();
  server.restart();  // no persistence: the lock is gone with the old process
  resp_connection raw(server.host(), server.port());
  raw.command("HSET", "tls-restart", "someone-else:1", 1);
  auto waiter = client.get_lock("tls-restart", "waiter:1");
  auto acquired = std::async(std::launch::async, [&] { return waiter.try_lock(20s); });
  // The waiter's channel is subscribed again over the new TLS connection...
  REQUIRE(lockscope::test::eventually(
      [&] {
        return raw.command("PUBSUB", "NUMSUB", "redisson_lock__channel:{tls-restart}").elements.at(1).integer == 1;
      },
      15s));
  // ...and an unlock message published now wakes it.
  raw.command("DEL", "tls-restart");
  raw.command("PUBLISH", "redisson_lock__channel:{tls-restart}", "0");
  REQUIRE(acquired.wait_for(15s) == std::future_status::ready);
  CHECK(acquired.get());
  CHECK(raw.command("HGET", "tls-restart", "waiter:1").text == "1");
  waiter.unlock_or_throw();
}
