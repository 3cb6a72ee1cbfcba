// CallAuth: who the caller of a gRPC call is and whether its token still holds, for the services'
// handlers (the principal the auth interceptor found, token rechecks, watch settings, the token
// cache) and the one mapping of a handler's status to gRPC (Serve).
#ifndef GANTRY_SERVER_PLATFORM_CALL_AUTH_H_
#define GANTRY_SERVER_PLATFORM_CALL_AUTH_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/grpc_status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "server/platform/auth.h"
#include "server/platform/polled_stream.h"

namespace gantry::server {

// Thread-safe (every implementation must be). Implemented by the Backend.
class CallAuth {
 public:
  virtual ~CallAuth() = default;

  // The principal of a running call, or why it has none (AuthInterceptorFactory::PrincipalOf).
  virtual absl::StatusOr<Principal> PrincipalOf(const grpc::ServerContextBase* context) const = 0;
  // Verifies the call's bearer token again (long-lived streams call it periodically): OK, or
  // UNAUTHENTICATED when it was revoked meanwhile. A database outage is not a revocation (OK).
  virtual absl::Status RecheckToken(const grpc::ServerContextBase& context, Audience audience) = 0;
  // How a tenant's watch (a PolledStream) of this call waits and ends: the stream options'
  // intervals, its token checked again, shutdown. `context` must outlive the stream.
  virtual PolledStreamSettings WatchSettings(const grpc::ServerContextBase* context) = 0;
  // Forget cached tokens (after a revocation).
  virtual void ForgetTokens() = 0;

  // Runs `fn(principal)` for an authenticated call and maps its status to gRPC (the one mapping).
  template <typename Fn>
  grpc::Status Serve(const grpc::ServerContextBase* context, Fn&& fn) {
    absl::StatusOr<Principal> principal = PrincipalOf(context);
    if (!principal.ok()) return ToGrpcStatus(principal.status());
    return ToGrpcStatus(std::forward<Fn>(fn)(*principal));
  }
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_CALL_AUTH_H_
