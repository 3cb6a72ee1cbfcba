// ListenAddress: a HOST:PORT listen flag split into host and port ("[::1]:9100" -> "::1", 9100).
#ifndef GANTRY_BASE_HTTP_LISTEN_ADDRESS_H_
#define GANTRY_BASE_HTTP_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry {

struct HostPort {
  std::string host;
  int port = 0;
};

// INVALID_ARGUMENT naming `flag` and the expected HOST:PORT form (port 0..65535; 0 picks one).
absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address, absl::string_view flag);

// "host:port", or "[host]:port" for an IPv6 host.
std::string FormatHostPort(const std::string& host, int port);

}  // namespace gantry

#endif  // GANTRY_BASE_HTTP_LISTEN_ADDRESS_H_
