// TlsConfig: the PEM material of one process's TLS settings (a CA bundle to trust, and optionally
// its own certificate and key), read and checked once at start, and the gRPC credentials built
// from it for channels and servers.
#ifndef GANTRY_BASE_TLS_CONFIG_H_
#define GANTRY_BASE_TLS_CONFIG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"

namespace gantry {

// The files of a TLS setting as the operator gave them (paths; empty = not given). The flag names
// are used in error messages.
struct TlsFiles {
  std::string ca_cert;  // PEM CA bundle: whom to trust
  std::string cert;     // PEM certificate chain: who this process is
  std::string key;      // PEM private key of `cert`
  std::string ca_cert_flag = "--ca-cert";
  std::string cert_flag = "--tls-cert";
  std::string key_flag = "--tls-key";
};

// Loaded PEM text. A plain value; copy it freely (thread-safe as any const value).
struct TlsConfig {
  TlsFiles files;
  std::string ca_pem;    // empty: plaintext channels
  std::string cert_pem;  // empty: no certificate of our own
  std::string key_pem;

  bool trusts_ca() const { return !ca_pem.empty(); }
  bool has_identity() const { return !cert_pem.empty(); }
};

// Reads and checks the files: each given file must be readable and at most 1 MiB; the CA bundle
// and the certificate must hold at least one PEM certificate, the key a PEM private key matching
// the certificate; cert and key come together. INVALID_ARGUMENT naming the flag otherwise; the key
// is a secret file (base/secret_file.h: NOT_FOUND when unreadable, FAILED_PRECONDITION when group
// or others may read it). No file given: an empty (plaintext) config.
absl::StatusOr<TlsConfig> LoadTlsConfig(const TlsFiles& files);

// Credentials for a client channel: insecure without a CA; otherwise TLS that verifies the peer
// against the CA bundle (and the target host name), presenting our certificate when we have one
// (mutual TLS).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsConfig& tls);

// Credentials for a listening port: insecure without a certificate; otherwise TLS with our
// certificate. `client_ca_pem`, when not empty, asks clients for a certificate and verifies any
// that is presented against it: a certificate that does not verify fails the handshake, clients
// without one still connect (see PeerPresentedCertificate).
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsConfig& tls,
                                                              const std::string& client_ca_pem);

// True when the peer of this call presented a certificate over TLS. On a port made with
// ServerCredentialsFor(tls, client_ca_pem) that certificate has been verified against
// client_ca_pem during the handshake. Thread-safe.
bool PeerPresentedCertificate(const grpc::ServerContextBase& context);

}  // namespace gantry

#endif  // GANTRY_BASE_TLS_CONFIG_H_
