// Sha256 is an incremental SHA-256 over OpenSSL's EVP interface; Sha256Hex hashes one buffer,
// Sha256OfFile one file, HmacSha256Hex authenticates a message under a key.
// The one implementation of content hashes in gantry (blobs, checkpoints, tokens, uploads).
// Not thread-safe: one hasher per stream.
#ifndef GANTRY_BASE_SHA256_H_
#define GANTRY_BASE_SHA256_H_

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gantry {

class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(context_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(context_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view data) { EVP_DigestUpdate(context_, data.data(), data.size()); }

  // Lowercase hex of the digest of everything passed to Update. Call once.
  std::string HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(context_, digest, &length);
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(2 * length);
    for (unsigned int i = 0; i < length; ++i) {
      hex += kDigits[digest[i] >> 4];
      hex += kDigits[digest[i] & 0xf];
    }
    return hex;
  }

 private:
  EVP_MD_CTX* context_;
};

inline std::string Sha256Hex(absl::string_view data) {
  Sha256 hasher;
  hasher.Update(data);
  return hasher.HexDigest();
}

// Lowercase hex HMAC-SHA-256 of `message` under `key` (credentials the server derives and checks).
inline std::string HmacSha256Hex(absl::string_view key, absl::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kDigits[mac[i] >> 4];
    hex += kDigits[mac[i] & 0xf];
  }
  return hex;
}

// Lowercase hex of `bytes` random bytes from OpenSSL's CSPRNG (secrets, keys).
inline std::string RandomSecretHex(int bytes) {
  std::string raw(static_cast<size_t>(bytes), '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes) != 1) std::abort();
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * raw.size());
  for (unsigned char c : raw) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 0xf];
  }
  return hex;
}

// Equality of two secrets in time that depends only on their lengths.
inline bool SecretsEqual(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// Lowercase hex SHA-256 of a file's bytes, read in 1 MiB pieces. NOT_FOUND when it cannot be
// opened, DATA_LOSS on a read error.
inline absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " cannot be opened"));
  Sha256 hasher;
  std::string buffer(1 << 20, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hasher.Update(absl::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return hasher.HexDigest();
}

}  // namespace gantry

#endif  // GANTRY_BASE_SHA256_H_
