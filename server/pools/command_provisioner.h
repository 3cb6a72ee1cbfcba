// CommandProvisioner: scales a pool with the operator's scale-up and scale-down commands
// (gantry.v1.CommandProvisioner: argv + <pool> <count> [<worker name>...]).
#ifndef GANTRY_SERVER_POOLS_COMMAND_PROVISIONER_H_
#define GANTRY_SERVER_POOLS_COMMAND_PROVISIONER_H_

#include <atomic>
#include <string>
#include <vector>

#include "gantry/v1/admin.pb.h"
#include "server/pools/provisioner.h"

namespace gantry::server {

// Thread-safe (immutable).
class CommandProvisioner final : public Provisioner {
 public:
  // Runs end early when `*cancelled` turns true (may be null).
  explicit CommandProvisioner(gantry::v1::CommandProvisioner spec,
                              const std::atomic<bool>* cancelled = nullptr)
      : spec_(std::move(spec)), cancelled_(cancelled) {}

  bool Elastic() const override { return true; }
  // Runs scale_up; an exit code other than 0, a timeout or a command that cannot start is
  // UNAVAILABLE with the command's last output line.
  absl::Status ScaleUp(const std::string& pool, int count) override;
  // Runs scale_down (OK without one: the workers stay, idle).
  absl::Status ScaleDown(const std::string& pool,
                         const std::vector<ProvisionedWorker>& workers) override;

 private:
  absl::Status Run(const char* what, const std::vector<std::string>& argv, const std::string& pool,
                   int count, const std::vector<std::string>& names);

  const gantry::v1::CommandProvisioner spec_;
  const std::atomic<bool>* const cancelled_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_POOLS_COMMAND_PROVISIONER_H_
