// Test certificates, generated at run time with the openssl CLI
// (tests/support/scripts/make-test-certs) into a temporary directory that lives as
// long as the process.
//
//   const auto& certs = lockscope::test::tls_certificates::shared();   // once per process
//   redis_server server(redis_server_options{.tls = certs.server_tls()});
//   config.tls.ca = certs.file("ca.pem");
#pragma once

#include <filesystem>
#include <string>

#include "lockscope/test/redis_server.hpp"

namespace lockscope::test {

class tls_certificates {
 public:
  // Generates on first use; throws std::runtime_error with openssl's output if that fails.
  static const tls_certificates& shared();

  const std::filesystem::path& directory() const noexcept { return directory_; }
  // A file of the set, e.g. "ca.pem", "client.key", "expired.pem" (see the script).
  std::string file(const std::string& name) const { return (directory_ / name).string(); }
  // A server with `<name>.pem` / `<name>.key` ("server", "expired", "other-name",
  // "other-ca-server"), checking client certificates against ca.pem.
  redis_tls_options server_tls(const std::string& name = "server", bool auth_clients = false) const;

  tls_certificates(const tls_certificates&) = delete;
  tls_certificates& operator=(const tls_certificates&) = delete;
  ~tls_certificates();

 private:
  tls_certificates();
  std::filesystem::path directory_;
};

// Whether the openssl CLI is there to make them.
bool openssl_cli_available();

}  // namespace lockscope::test
