// CredentialSlot: the worker credential the daemon got from its latest Register, shared by the
// parts of the daemon that call the server with it (the control stream, the serving model loader).
#ifndef GANTRY_WORKERS_AGENT_CREDENTIAL_SLOT_H_
#define GANTRY_WORKERS_AGENT_CREDENTIAL_SLOT_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gantry::agent {

// Thread-safe. Empty until the first successful Register.
class CredentialSlot {
 public:
  std::string Get() const {
    absl::MutexLock lock(&mu_);
    return secret_;
  }
  void Set(std::string secret) {
    absl::MutexLock lock(&mu_);
    secret_ = std::move(secret);
  }

 private:
  mutable absl::Mutex mu_;
  std::string secret_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_CREDENTIAL_SLOT_H_
