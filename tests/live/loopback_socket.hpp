// Loopback TCP for the metrics tests: a free port to listen on, a connection to one,
// and reading from it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include <catch2/catch.hpp>

namespace lockscope::timeline_test {

// A port nothing listens on now (bound, read and closed: free until someone takes it).
inline std::uint16_t free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t n = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(s);
  return ntohs(a.sin_port);
}

// A connected socket to 127.0.0.1:port, or -1.
inline int connect_to(std::uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

// Waits up to 100 ms for bytes on `s` and appends them to `into`. False: the peer
// closed the connection, or the read failed.
inline bool read_more(int s, std::string& into) {
  pollfd p{s, POLLIN, 0};
  if (::poll(&p, 1, 100) <= 0) return true;
  char buf[65536];
  const ssize_t n = ::read(s, buf, sizeof buf);
  if (n <= 0) return false;
  into.append(buf, static_cast<std::size_t>(n));
  return true;
}

}  // namespace lockscope::timeline_test
