// Auth: a server interceptor that authenticates every gantry.v1 call from its `authorization:
// Bearer <token>` metadata and hands the result (a Principal or the error) to the handlers through
// the call's ServerContext. Reflection (when the server serves it) needs a tenant or admin token,
// enforced by the interceptor itself; health checking needs no token.
#ifndef GANTRY_SERVER_PLATFORM_AUTH_H_
#define GANTRY_SERVER_PLATFORM_AUTH_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_interceptor.h"

namespace gantry::server {

// Who is calling, as the handlers see it: a tenant (possibly an admin), a new worker holding a join
// token (Register only), a registered worker holding its worker credential, or one rank process
// holding its rank credential (storage::TokenTenant is only what an API token resolves to).
struct Principal {
  std::string tenant;  // empty for workers
  bool admin = false;
  bool worker = false;        // any of the three worker kinds below
  std::string join_token_id;  // a join token ("jtk-..."): may only Register
  std::string worker_id;      // a worker credential, or the worker a rank credential was issued to
  std::string rank_job;       // a rank credential: the job it may act for ...
  int rank_attempt = -1;      // ... and the attempt

  bool is_worker_credential() const { return worker && !worker_id.empty() && rank_job.empty(); }
  bool is_rank_credential() const { return worker && !rank_job.empty(); }
};

// The metadata key of the HTTP API's in-process calls (AuthInterceptorFactory::set_http_api_key).
inline constexpr char kHttpApiKeyMetadata[] = "gantry-http-api-key";

// What a method needs: nothing (health), a tenant token (also reflection), an admin tenant's token,
// a worker join token (WorkerService.Register), a worker or rank credential (the rest of
// WorkerService), or either a tenant token or a worker or rank credential (ReadDataset, which
// workers use to fill caches).
enum class Audience { kNone, kTenant, kAdmin, kWorkerJoin, kWorker, kTenantOrWorker };

// The audience of a full method name such as "/gantry.v1.AdminService/CreateTenant".
Audience AudienceOf(absl::string_view method);

// Whose credentials a listener accepts: everyone's (one listener serves all), tenants' only (the
// main listener beside a worker listener), or workers' only (the worker listener). A call with a
// valid credential of the other kind is PERMISSION_DENIED with the address it should use.
enum class ListenerRole { kEveryone, kTenants, kWorkers };

// Checks a bearer secret for an audience: UNAUTHENTICATED for an unknown, revoked or wrong-kind
// token, PERMISSION_DENIED for a non-admin on kAdmin. Called on the RPC's thread; must be
// thread-safe.
using TokenVerifier =
    std::function<absl::StatusOr<Principal>(Audience audience, const std::string& secret)>;

// The per-call results, keyed by the call's ServerContext. Thread-safe. Owned by the server;
// outlives it.
class AuthInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit AuthInterceptorFactory(TokenVerifier verifier);

  // Mutual TLS for workers: from now on a call for the worker audience, or one authenticated as a
  // worker, is UNAUTHENTICATED unless its peer presented a TLS client certificate (which the
  // listener verified against the worker CA). Call before the server accepts calls.
  void RequireWorkerCertificates() { require_worker_certificates_ = true; }

  // Browser sessions ("gws_..." secrets) are accepted only from calls that carry this key in
  // kHttpApiKeyMetadata: the HTTP API's in-process calls. Call before the server accepts calls.
  void set_http_api_key(std::string key) { http_api_key_ = std::move(key); }

  // Authenticates with ListenerRole::kEveryone.
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
  // An interceptor factory for one listener of a server with several: it authenticates into this
  // factory (PrincipalOf sees its calls) and refuses credentials `role` does not accept. This
  // factory must outlive it.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ForListener(
      ListenerRole role);

  // The principal of a running call, or why it has none. Handlers of authenticated services call
  // this first and return its error unchanged.
  absl::StatusOr<Principal> PrincipalOf(const grpc::ServerContextBase* context) const;

  // Used by the interceptor.
  void Authenticate(grpc::experimental::ServerRpcInfo* info,
                    std::multimap<grpc::string_ref, grpc::string_ref>* metadata, ListenerRole role);
  void Forget(const grpc::ServerContextBase* context);

 private:
  bool FromHttpApi(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;

  TokenVerifier verifier_;
  std::string http_api_key_;                  // set before serving, then read-only
  bool require_worker_certificates_ = false;  // set before serving, then read-only
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const grpc::ServerContextBase*, absl::StatusOr<Principal>> calls_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_AUTH_H_
