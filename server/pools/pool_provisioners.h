// MakeProvisioner: the Provisioner a pool's gantry.v1.ProvisionerSpec names (static, command,
// slurm). Apart from provisioner.h so that the interface does not include its implementations.
#ifndef GANTRY_SERVER_POOLS_POOL_PROVISIONERS_H_
#define GANTRY_SERVER_POOLS_POOL_PROVISIONERS_H_

#include <atomic>
#include <memory>

#include "gantry/v1/admin.pb.h"
#include "server/pools/provisioner.h"

namespace gantry::server {

// The provisioner a (validated) pool spec names; static when none is set. Its commands are killed
// when `*cancelled` turns true (may be null; must outlive the provisioner).
std::unique_ptr<Provisioner> MakeProvisioner(const gantry::v1::PoolSpec& spec,
                                             const std::atomic<bool>* cancelled = nullptr);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_POOLS_POOL_PROVISIONERS_H_
