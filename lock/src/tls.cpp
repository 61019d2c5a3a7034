#include "tls_stream.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <filesystem>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <fmt/format.h>

namespace lockscope::lock::detail {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

namespace {

std::string openssl_reason(const boost::system::error_code& ec) {
  std::string text = ec.message();
  // "certificate verify failed (SSL routines)": the library part says nothing useful.
  if (const std::size_t paren = text.rfind(" ("); paren != std::string::npos && text.back() == ')')
    text.resize(paren);
  return text;
}

std::string name_text(X509_NAME* name) {
  if (name == nullptr) return "(none)";
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "(unknown)";
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<std::size_t>(size > 0 ? size : 0));
  BIO_free(bio);
  return text;
}

std::string time_text(const ASN1_TIME* time) {
  if (time == nullptr) return {};
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  ASN1_TIME_print(bio, time);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<std::size_t>(size > 0 ? size : 0));
  BIO_free(bio);
  return text;
}

std::string alt_names(X509* cert) {
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return {};
  std::string text;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (!text.empty()) text += ", ";
    if (n->type == GEN_DNS) {
      const ASN1_STRING* s = n->d.dNSName;
      text += "DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                   static_cast<std::size_t>(ASN1_STRING_length(s)));
    } else if (n->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = n->d.iPAddress;
      const unsigned char* b = ASN1_STRING_get0_data(s);
      if (ASN1_STRING_length(s) == 4) {
        text += fmt::format("IP:{}.{}.{}.{}", b[0], b[1], b[2], b[3]);
      } else if (ASN1_STRING_length(s) == 16) {
        asio::ip::address_v6::bytes_type bytes;
        std::copy(b, b + 16, bytes.begin());
        text += "IP:" + asio::ip::address_v6(bytes).to_string();
      }
    } else {
      text += "other";
    }
  }
  GENERAL_NAMES_free(names);
  return text;
}

void record(certificate_failure& f, X509_STORE_CTX* store, long error) {
  f.error = error;
  f.depth = X509_STORE_CTX_get_error_depth(store);
  X509* cert = X509_STORE_CTX_get_current_cert(store);
  if (cert == nullptr) return;
  f.subject = name_text(X509_get_subject_name(cert));
  f.issuer = name_text(X509_get_issuer_name(cert));
  f.names = alt_names(cert);
  f.not_after = time_text(X509_get0_notAfter(cert));
  f.not_before = time_text(X509_get0_notBefore(cert));
}

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

std::shared_ptr<tls_context> make_tls_context(const tls_config& config, std::string& why) {
  auto context = std::make_shared<tls_context>();
  ssl::context& c = context->get();
  boost::system::error_code ec;
  SSL_CTX_set_min_proto_version(c.native_handle(), TLS1_2_VERSION);
  c.set_options(ssl::context::default_workarounds | ssl::context::no_compression, ec);
  if (config.verify_peer) {
    if (config.ca.empty()) {
      c.set_default_verify_paths(ec);
      if (ec) {
        why = "TLS: cannot load the system's trust store: " + openssl_reason(ec);
        return nullptr;
      }
    } else {
      std::error_code fs_error;
      const bool is_directory = std::filesystem::is_directory(config.ca, fs_error);
      if (is_directory) {
        c.add_verify_path(config.ca, ec);
      } else {
        c.load_verify_file(config.ca, ec);
      }
      if (ec) {
        why = fmt::format("TLS: cannot load the CA {} '{}': {}", is_directory ? "directory" : "file", config.ca,
                          std::filesystem::exists(config.ca, fs_error) ? openssl_reason(ec)
                                                                        : "no such file or directory");
        return nullptr;
      }
    }
  }
  if (config.certificate.empty() != config.private_key.empty()) {
    why = config.certificate.empty() ? "TLS: a client key was given without its certificate"
                                     : "TLS: a client certificate was given without its private key";
    return nullptr;
  }
  if (!config.certificate.empty()) {
    std::error_code fs_error;
    c.use_certificate_chain_file(config.certificate, ec);
    if (ec) {
      why = fmt::format("TLS: cannot load the client certificate '{}': {}", config.certificate,
                        std::filesystem::exists(config.certificate, fs_error) ? openssl_reason(ec)
                                                                              : "no such file");
      return nullptr;
    }
    c.use_private_key_file(config.private_key, ssl::context::pem, ec);
    if (ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
      why = fmt::format("TLS: the client key '{}' does not belong to the certificate '{}'", config.private_key,
                        config.certificate);
      return nullptr;
    }
    if (ec) {
      why = fmt::format("TLS: cannot load the client key '{}': {}", config.private_key,
                        std::filesystem::exists(config.private_key, fs_error) ? openssl_reason(ec)
                                                                              : "no such file");
      return nullptr;
    }
    if (SSL_CTX_check_private_key(c.native_handle()) != 1) {
      ERR_clear_error();
      why = fmt::format("TLS: the client key '{}' does not belong to the certificate '{}'", config.private_key,
                        config.certificate);
      return nullptr;
    }
  }
  return context;
}

std::shared_ptr<tls_session> make_tls_session(tls_context& context, asio::ip::tcp::socket& socket,
                                              const tls_config& config, const std::string& host) {
  auto session = std::make_shared<tls_session>(socket, context.get());
  // SNI carries DNS names only (RFC 6066).
  if (!is_ip_literal(host)) SSL_set_tlsext_host_name(session->stream.native_handle(), host.c_str());
  if (!config.verify_peer) {
    session->stream.set_verify_mode(ssl::verify_none);
    return session;
  }
  session->stream.set_verify_mode(ssl::verify_peer);
  // The chain check is OpenSSL's; the name check is Asio's host_name_verification on
  // the server's own certificate. The first rejection is kept for the error text.
  tls_session* raw = session.get();  // the session owns the stream that owns this callback
  session->stream.set_verify_callback(
      [raw, check = ssl::host_name_verification(host), ip = is_ip_literal(host)](bool preverified,
                                                                                  ssl::verify_context& ctx) {
        X509_STORE_CTX* store = ctx.native_handle();
        bool ok = preverified;
        long error = X509_STORE_CTX_get_error(store);
        if (ok && X509_STORE_CTX_get_error_depth(store) == 0 && !check(true, ctx)) {
          ok = false;
          error = ip ? X509_V_ERR_IP_ADDRESS_MISMATCH : X509_V_ERR_HOSTNAME_MISMATCH;
          X509_STORE_CTX_set_error(store, static_cast<int>(error));
        }
        if (!ok && raw->failure.error == 0) record(raw->failure, store, error);
        return ok;
      });
  return session;
}

std::string describe_certificate_failure(const certificate_failure& f, std::string_view endpoint,
                                         std::string_view host) {
  const std::string whose = f.depth == 0 ? fmt::format("the certificate of {} ({})", endpoint, f.subject)
                                         : fmt::format("a CA certificate in the chain of {} ({})", endpoint, f.subject);
  switch (f.error) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_CERT_UNTRUSTED:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return fmt::format("TLS: certificate not trusted (unknown CA): {} is issued by {}, which is not among the "
                         "trusted CAs (tls.ca / --tls-ca)",
                         whose, f.issuer);
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return fmt::format("TLS: host name mismatch: {} is for {}, not {}", whose,
                         f.names.empty() ? f.subject : f.names, host);
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return fmt::format("TLS: certificate expired: {} expired on {}", whose, f.not_after);
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return fmt::format("TLS: certificate not yet valid: {} is valid from {}", whose, f.not_before);
    case X509_V_ERR_CERT_REVOKED:
      return fmt::format("TLS: certificate revoked: {}", whose);
    default:
      return fmt::format("TLS: {} failed verification: {}", whose,
                         X509_verify_cert_error_string(f.error));
  }
}

std::string describe_tls_error(const boost::system::error_code& ec, std::string_view endpoint,
                               bool has_client_certificate) {
  if (ec == ssl::error::stream_truncated || ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe) {
    return fmt::format("TLS handshake refused: {} closed the connection during the handshake{}", endpoint,
                       has_client_certificate ? " (it may reject the client certificate)"
                                              : " (it may require a client certificate: tls.certificate / --tls-cert)");
  }
  if (ec.category() != asio::error::get_ssl_category()) {
    return fmt::format("TLS handshake with {} failed: {}", endpoint, ec.message());
  }
  const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  switch (reason) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_HTTP_REQUEST:
      return fmt::format("TLS handshake refused: {} does not speak TLS ({}); is it a plain redis:// port?", endpoint,
                         openssl_reason(ec));
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
      return fmt::format("TLS handshake refused: {} offers no TLS version this client accepts (TLS 1.2 or newer)",
                         endpoint);
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return fmt::format("TLS: {} requires a client certificate and none was sent (tls.certificate and "
                         "tls.private_key / --tls-cert and --tls-key)",
                         endpoint);
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      return fmt::format("TLS: {} rejected the client certificate: not issued by a CA it trusts (unknown ca alert)",
                         endpoint);
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return fmt::format("TLS: {} rejected the client certificate ({})", endpoint, openssl_reason(ec));
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_NO_SHARED_CIPHER:
      return fmt::format("TLS handshake refused by {} ({}): no common cipher, or a client certificate {}", endpoint,
                         openssl_reason(ec), has_client_certificate ? "it does not accept" : "is required");
    default:
      return fmt::format("TLS handshake with {} failed: {}", endpoint, openssl_reason(ec));
  }
}

}  // namespace lockscope::lock::detail
