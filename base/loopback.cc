#include "base/loopback.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gantry {

bool IsLoopbackTarget(absl::string_view target) {
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) return true;
  absl::string_view host = target;
  for (absl::string_view scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&host, scheme)) break;
  }
  if (absl::ConsumePrefix(&host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    host = host.substr(0, close);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));  // host:port
  }
  host = absl::StripSuffix(host, ".");
  if (absl::EqualsIgnoreCase(host, "localhost") || host == "::1" ||
      absl::EqualsIgnoreCase(host, "ip6-localhost")) {
    return true;
  }
  // 127.0.0.0/8: four decimal octets, the first 127.
  std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  if (octets.size() != 4 || octets[0] != "127") return false;
  for (absl::string_view octet : octets) {
    int value = 0;
    if (octet.empty() || octet.size() > 3 || !absl::SimpleAtoi(octet, &value) || value > 255) {
      return false;
    }
  }
  return true;
}

}  // namespace gantry
