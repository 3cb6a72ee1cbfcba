#include "server/pools/pool_provisioners.h"

#include <algorithm>

#include "server/pools/command_provisioner.h"
#include "server/pools/slurm_provisioner.h"

namespace gantry::server {
namespace {

// Nothing to do: operators start the workers.
class StaticProvisioner final : public Provisioner {
 public:
  bool Elastic() const override { return false; }
  absl::Status ScaleUp(const std::string&, int) override {
    return absl::FailedPreconditionError("a static pool is not scaled by gantry");
  }
  absl::Status ScaleDown(const std::string&, const std::vector<ProvisionedWorker>&) override {
    return absl::FailedPreconditionError("a static pool is not scaled by gantry");
  }
};

}  // namespace

std::unique_ptr<Provisioner> MakeProvisioner(const gantry::v1::PoolSpec& spec,
                                             const std::atomic<bool>* cancelled) {
  switch (spec.provisioner().kind_case()) {
    case gantry::v1::ProvisionerSpec::kCommand:
      return std::make_unique<CommandProvisioner>(spec.provisioner().command(), cancelled);
    case gantry::v1::ProvisionerSpec::kSlurm:
      return std::make_unique<SlurmProvisioner>(
          spec.provisioner().slurm(), std::max(1, spec.slots_per_worker()),
          std::map<std::string, std::string>(spec.labels().begin(), spec.labels().end()),
          cancelled);
    default:
      return std::make_unique<StaticProvisioner>();
  }
}

}  // namespace gantry::server
