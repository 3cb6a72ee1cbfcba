// SlurmProvisioner: a pool's workers are Slurm pilot jobs: scale-up submits a job array with sbatch
// whose tasks each run `gantry-worker daemon` (labelled pool=NAME and slurm-job=<job id>) for their
// wall time and exit after --idle-exit-after without ranks; scale-down scancels idle pilots;
// pending pilots no longer needed are withdrawn with scancel --state=PENDING.
#ifndef GANTRY_SERVER_POOLS_SLURM_PROVISIONER_H_
#define GANTRY_SERVER_POOLS_SLURM_PROVISIONER_H_

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "gantry/v1/admin.pb.h"
#include "server/pools/provisioner.h"

namespace gantry::server {

// Thread-safe (immutable).
class SlurmProvisioner final : public Provisioner {
 public:
  // Runs of sbatch/scancel end early when `*cancelled` turns true (may be null).
  SlurmProvisioner(gantry::v1::SlurmProvisioner spec, int slots_per_worker,
                   std::map<std::string, std::string> labels,
                   const std::atomic<bool>* cancelled = nullptr)
      : spec_(std::move(spec)),
        slots_per_worker_(slots_per_worker),
        labels_(std::move(labels)),
        cancelled_(cancelled) {}

  bool Elastic() const override { return true; }
  // One `sbatch --array=0-(count-1)` of the pilot script (given on stdin). UNAVAILABLE with
  // sbatch's message when Slurm refuses or cannot be reached; DEADLINE_EXCEEDED after the timeout.
  absl::Status ScaleUp(const std::string& pool, int count) override;
  // scancel of the workers' slurm-job labels.
  absl::Status ScaleDown(const std::string& pool,
                         const std::vector<ProvisionedWorker>& workers) override;
  absl::Status CancelPending(const std::string& pool) override;

  // The batch script of one pilot (a POSIX shell script; every configured value single-quoted).
  std::string PilotScript(const std::string& pool) const;
  // The Slurm job name of the pool's pilots: "gantry-pilot-<pool>".
  static std::string JobName(const std::string& pool);

 private:
  absl::Status Run(const std::vector<std::string>& argv, const std::string& stdin_data);

  const gantry::v1::SlurmProvisioner spec_;
  const int slots_per_worker_;
  const std::map<std::string, std::string> labels_;
  const std::atomic<bool>* const cancelled_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_POOLS_SLURM_PROVISIONER_H_
