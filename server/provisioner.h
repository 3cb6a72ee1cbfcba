// Provisioner: how an elastic pool gains and loses workers (static, command, slurm); built from the
// pool's gantry.v1.ProvisionerSpec by MakeProvisioner.
#ifndef GANTRY_SERVER_PROVISIONER_H_
#define GANTRY_SERVER_PROVISIONER_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/admin.pb.h"

namespace gantry::server {

// A worker to remove, as registered.
struct ProvisionedWorker {
  std::string id;
  std::string name;
  std::map<std::string, std::string> labels;
};

// Calls block (they run external commands with timeouts) and are made off the scheduling loop,
// at most one at a time per pool. Errors say what failed in words an operator acts on.
class Provisioner {
 public:
  virtual ~Provisioner() = default;
  // Whether the autoscaler may call it (false for static pools).
  virtual bool Elastic() const = 0;
  // Starts `count` workers for `pool` (they join later, labelled pool=NAME).
  virtual absl::Status ScaleUp(const std::string& pool, int count) = 0;
  // Stops these idle workers of `pool`.
  virtual absl::Status ScaleDown(const std::string& pool,
                                 const std::vector<ProvisionedWorker>& workers) = 0;
  // Withdraws requests that have not started a worker yet (Slurm: pending pilots); OK when there
  // is nothing to withdraw or the provisioner cannot.
  virtual absl::Status CancelPending(const std::string& pool) { return absl::OkStatus(); }
};

// The provisioner a (validated) pool spec names; static when none is set. Its commands are killed
// when `*cancelled` turns true (may be null; must outlive the provisioner).
std::unique_ptr<Provisioner> MakeProvisioner(const gantry::v1::PoolSpec& spec,
                                             const std::atomic<bool>* cancelled = nullptr);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PROVISIONER_H_
