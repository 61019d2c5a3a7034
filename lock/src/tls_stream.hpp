// The OpenSSL side of detail/tls.hpp, for tls.cpp and connection.cpp only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "lockscope/lock/detail/tls.hpp"

namespace lockscope::lock::detail {

class tls_context {
 public:
  tls_context() : context_(boost::asio::ssl::context::tls_client) {}
  boost::asio::ssl::context& get() noexcept { return context_; }

 private:
  boost::asio::ssl::context context_;
};

// One connect attempt's TLS stream over the connection's socket. Shared with the
// completion handlers of its operations, so that a reconnect can start a new session
// while the old one's aborted operations are still finishing.
struct tls_session {
  tls_session(boost::asio::ip::tcp::socket& socket, boost::asio::ssl::context& context) : stream(socket, context) {}
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket&> stream;
  certificate_failure failure;
};

}  // namespace lockscope::lock::detail
