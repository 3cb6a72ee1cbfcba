#include "server/platform/auth.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"
#include "base/sha256.h"
#include "base/tls_config.h"
#include "google/protobuf/message.h"

namespace gantry::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

bool IsReflection(absl::string_view method) {
  return absl::StartsWith(method, "/grpc.reflection.");
}

// Authenticates on the received initial metadata and forgets the result when the call ends.
// gantry's handlers check the result themselves (PrincipalOf); gRPC's reflection service cannot,
// so for it the interceptor enforces it: an unauthenticated caller's requests are emptied before
// the service reads them (it answers an empty request with an error response only) and the call
// ends with the authentication error.
class AuthInterceptor : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(AuthInterceptorFactory* factory, grpc::experimental::ServerRpcInfo* info,
                  ListenerRole role)
      : factory_(factory), info_(info), role_(role), guarded_(IsReflection(info->method())) {}
  ~AuthInterceptor() override { factory_->Forget(info_->server_context()); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      factory_->Authenticate(info_, methods->GetRecvInitialMetadata(), role_);
    }
    if (guarded_) Guard(methods);
    methods->Proceed();
  }

 private:
  void Guard(grpc::experimental::InterceptorBatchMethods* methods) {
    const bool received =
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE);
    const bool ending =
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS);
    if (!received && !ending) return;
    const absl::StatusOr<Principal> principal = factory_->PrincipalOf(info_->server_context());
    if (principal.ok()) return;
    if (received && methods->GetRecvMessage() != nullptr) {
      // Every generated message derives from google::protobuf::Message alone.
      static_cast<google::protobuf::Message*>(methods->GetRecvMessage())->Clear();
    }
    if (ending) methods->ModifySendStatus(ToGrpcStatus(principal.status()));
  }

  AuthInterceptorFactory* factory_;
  grpc::experimental::ServerRpcInfo* info_;
  const ListenerRole role_;
  const bool guarded_;  // a reflection call: refused here unless authenticated
};

// The interceptor factory of one listener: AuthInterceptors bound to the shared factory and a role.
class ListenerAuthInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  ListenerAuthInterceptorFactory(AuthInterceptorFactory* shared, ListenerRole role)
      : shared_(shared), role_(role) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (AudienceOf(info->method()) == Audience::kNone) return nullptr;
    return new AuthInterceptor(shared_, info, role_);
  }

 private:
  AuthInterceptorFactory* shared_;
  const ListenerRole role_;
};

}  // namespace

Audience AudienceOf(absl::string_view method) {
  if (absl::StartsWith(method, "/gantry.v1.AdminService/")) return Audience::kAdmin;
  if (method == "/gantry.v1.WorkerService/Register") return Audience::kWorkerJoin;
  if (absl::StartsWith(method, "/gantry.v1.WorkerService/")) return Audience::kWorker;
  if (method == "/gantry.v1.DatasetService/ReadDataset") return Audience::kTenantOrWorker;
  if (absl::StartsWith(method, "/gantry.v1.") || IsReflection(method)) return Audience::kTenant;
  return Audience::kNone;
}

AuthInterceptorFactory::AuthInterceptorFactory(TokenVerifier verifier)
    : verifier_(std::move(verifier)) {}

grpc::experimental::Interceptor* AuthInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (AudienceOf(info->method()) == Audience::kNone) return nullptr;
  return new AuthInterceptor(this, info, ListenerRole::kEveryone);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
AuthInterceptorFactory::ForListener(ListenerRole role) {
  return std::make_unique<ListenerAuthInterceptorFactory>(this, role);
}

void AuthInterceptorFactory::Authenticate(
    grpc::experimental::ServerRpcInfo* info,
    std::multimap<grpc::string_ref, grpc::string_ref>* metadata, ListenerRole role) {
  const Audience audience = AudienceOf(info->method());
  const bool certificate_missing =
      require_worker_certificates_ && !PeerPresentedCertificate(*info->server_context());
  absl::StatusOr<Principal> result = absl::UnauthenticatedError(
      "missing authorization metadata; send \"authorization: Bearer "
      "<token>\" (gantry CLI: --token or GANTRY_TOKEN)");
  if (metadata != nullptr) {
    auto it = metadata->find("authorization");
    if (it != metadata->end()) {
      const std::string value(it->second.data(), it->second.size());
      constexpr absl::string_view kBearer = "Bearer ";
      if (!absl::StartsWithIgnoreCase(value, kBearer)) {
        result = absl::UnauthenticatedError("authorization metadata must be \"Bearer <token>\"");
      } else {
        const std::string secret(absl::StripAsciiWhitespace(value.substr(kBearer.size())));
        if (secret.empty() || secret.size() > 512) {
          result = absl::UnauthenticatedError("the bearer token is empty or too long");
        } else if (absl::StartsWith(secret, "gws_") && !FromHttpApi(*metadata)) {
          // Browser sessions live in cookies of the HTTP API, which calls in-process only.
          result = absl::UnauthenticatedError(
              "a browser session is not a bearer token; use an API token over gRPC");
        } else {
          result = verifier_(audience, secret);
        }
      }
    }
  }
  if (certificate_missing && (audience == Audience::kWorker || (result.ok() && result->worker))) {
    result = absl::UnauthenticatedError(
        "worker calls need mutual TLS: connect with a client certificate signed by the worker CA "
        "the server trusts (gantry-worker --tls-cert/--tls-key)");
  }
  // Checked after the token, so a caller at the wrong address learns where to go, not that its
  // valid credential is unknown.
  if (result.ok() && role == ListenerRole::kTenants && result->worker) {
    result = absl::PermissionDeniedError(
        "worker and rank credentials are accepted only on the worker listener: point "
        "gantry-worker --server at the address of gantry-server --worker-listen");
  } else if (result.ok() && role == ListenerRole::kWorkers && !result->worker) {
    result = absl::PermissionDeniedError(
        "tenant tokens are not accepted on the worker listener: call the tenant address "
        "(gantry-server --listen)");
  }
  absl::MutexLock lock(&mu_);
  calls_.insert_or_assign(info->server_context(), std::move(result));
}

bool AuthInterceptorFactory::FromHttpApi(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (http_api_key_.empty()) return false;
  auto it = metadata.find(kHttpApiKeyMetadata);
  return it != metadata.end() &&
         SecretsEqual(absl::string_view(it->second.data(), it->second.size()), http_api_key_);
}

void AuthInterceptorFactory::Forget(const grpc::ServerContextBase* context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(context);
}

absl::StatusOr<Principal> AuthInterceptorFactory::PrincipalOf(
    const grpc::ServerContextBase* context) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(context);
  if (it == calls_.end()) {
    return absl::UnauthenticatedError("the call was not authenticated");
  }
  return it->second;
}

}  // namespace gantry::server
