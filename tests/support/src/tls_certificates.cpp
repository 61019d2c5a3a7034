#include "lockscope/test/tls_certificates.hpp"

#include <stdlib.h>

#include <cstdio>
#include <stdexcept>

namespace lockscope::test {

tls_certificates::tls_certificates() {
  std::string pattern = (std::filesystem::temp_directory_path() / "lockscope-certs-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a directory for certificates");
  directory_ = pattern;
  const std::string command =
      std::string("'") + LOCKSCOPE_MAKE_TEST_CERTS + "' '" + directory_.string() + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + command);
  std::string output;
  char buffer[512];
  while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  if (::pclose(pipe) != 0) throw std::runtime_error("make-test-certs failed: " + output);
}

tls_certificates::~tls_certificates() {
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

const tls_certificates& tls_certificates::shared() {
  static const tls_certificates instance;
  return instance;
}

redis_tls_options tls_certificates::server_tls(const std::string& name, bool auth_clients) const {
  redis_tls_options o;
  o.certificate = directory_ / (name + ".pem");
  o.private_key = directory_ / (name + ".key");
  o.ca = directory_ / "ca.pem";
  o.auth_clients = auth_clients;
  return o;
}

bool openssl_cli_available() { return std::system("openssl version >/dev/null 2>&1") == 0; }

}  // namespace lockscope::test
