#include "base/tls_config.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/secret_file.h"
#include "base/status_macros.h"

namespace gantry {
namespace {

constexpr std::streamoff kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> ReadPem(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  const std::streamoff size = in.tellg();
  if (size <= 0 || size > kMaxPemBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " is empty or larger than 1 MiB; give a PEM file"));
  }
  in.seekg(0);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;
using Cert = std::unique_ptr<X509, X509Deleter>;
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;

Bio BioOf(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), pem.size())); }

// The first certificate of a PEM text, or null.
Cert FirstCertificate(const std::string& pem) {
  Bio bio = BioOf(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return cert;
}

}  // namespace

absl::StatusOr<TlsConfig> LoadTlsConfig(const TlsFiles& files) {
  TlsConfig tls;
  tls.files = files;
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.cert_flag, " and ", files.key_flag, " must be given together"));
  }
  if (!files.ca_cert.empty()) {
    ASSIGN_OR_RETURN(tls.ca_pem, ReadPem(files.ca_cert, files.ca_cert_flag));
    if (FirstCertificate(tls.ca_pem) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(files.ca_cert_flag, ": ", files.ca_cert, " holds no PEM certificate"));
    }
  }
  if (files.cert.empty()) return tls;
  ASSIGN_OR_RETURN(tls.cert_pem, ReadPem(files.cert, files.cert_flag));
  ASSIGN_OR_RETURN(tls.key_pem, ReadSecretFile(files.key, files.key_flag, "a PEM private key", 1,
                                               static_cast<size_t>(kMaxPemBytes)));
  Cert cert = FirstCertificate(tls.cert_pem);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.cert_flag, ": ", files.cert, " holds no PEM certificate"));
  }
  Bio key_bio = BioOf(tls.key_pem);
  Key key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.key_flag, ": ", files.key, " holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(files.key_flag, ": ", files.key,
                                                   " is not the key of the certificate in ",
                                                   files.cert_flag, " ", files.cert));
  }
  return tls;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsConfig& tls) {
  if (!tls.trusts_ca()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls.ca_pem;
  if (tls.has_identity()) {
    ssl.pem_cert_chain = tls.cert_pem;
    ssl.pem_private_key = tls.key_pem;
  }
  return grpc::SslCredentials(ssl);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsConfig& tls,
                                                              const std::string& client_ca_pem) {
  if (!tls.has_identity()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(client_ca_pem.empty()
                                            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                            : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

bool PeerPresentedCertificate(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return false;
  const std::vector<grpc::string_ref> kind = auth->FindPropertyValues("transport_security_type");
  if (kind.empty() || kind.front() != "ssl") return false;
  return !auth->FindPropertyValues("x509_pem_cert").empty();
}

}  // namespace gantry
