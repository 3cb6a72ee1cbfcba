#include "base/http/listen_address.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gantry {

absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address, absl::string_view flag) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why, " in \"", address,
                                                   "\"; expected HOST:PORT, e.g. 127.0.0.1:9100 "
                                                   "or [::1]:9100 (port 0 picks a free one)"));
  };
  HostPort result;
  absl::string_view port_text;
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return invalid("an IPv6 host needs [HOST]:PORT");
    }
    result.host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return invalid("no port");
    result.host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
    if (result.host.find(':') != std::string::npos) {
      return invalid("an IPv6 host must be in brackets");
    }
  }
  if (result.host.empty()) return invalid("no host");
  if (!absl::SimpleAtoi(port_text, &result.port) || result.port < 0 || result.port > 65535) {
    return invalid("the port is not a number from 0 to 65535");
  }
  return result;
}

std::string FormatHostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

}  // namespace gantry
