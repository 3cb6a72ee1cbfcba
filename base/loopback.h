// Whether an address stays on this host, for the rules that let a secret travel in clear only there
// (the CLI's token, a worker's generation endpoint).
#ifndef GANTRY_BASE_LOOPBACK_H_
#define GANTRY_BASE_LOOPBACK_H_

#include "absl/strings/string_view.h"

namespace gantry {

// True for a unix socket (unix:, unix-abstract:), localhost, 127.0.0.0/8 and ::1: a host or a gRPC
// target, bare or in [brackets], with or without a port and a dns:/// ipv4: ipv6: scheme. Anything
// else (other names, 0.0.0.0, malformed addresses) is false.
bool IsLoopbackTarget(absl::string_view target);

}  // namespace gantry

#endif  // GANTRY_BASE_LOOPBACK_H_
