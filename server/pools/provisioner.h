// Provisioner: how an elastic pool gains and loses workers; the interface its kinds implement
// (static, command, slurm: MakeProvisioner in pool_provisioners.h builds one from a pool's spec).
#ifndef GANTRY_SERVER_POOLS_PROVISIONER_H_
#define GANTRY_SERVER_POOLS_PROVISIONER_H_

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

}  // namespace gantry::server

#endif  // GANTRY_SERVER_POOLS_PROVISIONER_H_
