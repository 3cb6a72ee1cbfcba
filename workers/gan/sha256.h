// Sha256: hex SHA-256 digests (OpenSSL EVP), used to seal checkpoint files. Torch-free.
#ifndef GANTRY_WORKERS_GAN_SHA256_H_
#define GANTRY_WORKERS_GAN_SHA256_H_

#include <string>
#include <string_view>

namespace gantry::gan {

// Lower-case hex SHA-256 of `bytes` (64 characters).
std::string Sha256Hex(std::string_view bytes);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_SHA256_H_
