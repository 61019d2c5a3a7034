// TLS for the connection: the SSL context built from tls_config, one session per
// connect attempt, and one-line explanations of what failed. OpenSSL stays out of this
// header: the connection holds these as opaque pointers, and the explanations take
// OpenSSL's numbers (X509_V_ERR_*, SSL_R_* reasons) so they are testable without a
// handshake.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include "lockscope/lock/config.hpp"

namespace lockscope::lock::detail {

class tls_context;
struct tls_session;

// Loads the CA, client certificate and key of `config`; TLS 1.2 minimum. On failure
// returns nullptr and sets `why` to one line naming the file and the problem.
std::shared_ptr<tls_context> make_tls_context(const tls_config& config, std::string& why);

// What the verify callback saw on the first certificate it rejected.
struct certificate_failure {
  long error = 0;  // X509_V_ERR_*; 0: no certificate was rejected
  int depth = 0;   // 0: the server's own certificate
  std::string subject;
  std::string issuer;
  std::string names;      // its subjectAltName entries, "DNS:a, IP:127.0.0.1"
  std::string not_after;  // "Jan  2 00:00:00 2020 GMT"
  std::string not_before;
};

// One line for a rejected server certificate: not trusted, host name mismatch,
// expired, or another verification error. `host` is the name it was checked against.
std::string describe_certificate_failure(const certificate_failure& f, std::string_view endpoint,
                                         std::string_view host);

// One line for an OpenSSL error in the handshake or a later read: a TLS alert from the
// server (client certificate missing or rejected, no common version), a peer that does
// not speak TLS. `has_client_certificate`: whether one was configured.
std::string describe_tls_error(const boost::system::error_code& ec, std::string_view endpoint,
                               bool has_client_certificate);

// A fresh session over `socket` for one connect attempt: SNI for a DNS name, and
// (unless verification is off) chain verification plus the host name check.
std::shared_ptr<tls_session> make_tls_session(tls_context& context, boost::asio::ip::tcp::socket& socket,
                                              const tls_config& config, const std::string& host);

}  // namespace lockscope::lock::detail
