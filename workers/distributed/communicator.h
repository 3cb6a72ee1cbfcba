// Communicator: one rank's membership of a c10d process group (a TCPStore hosted by rank 0 for the
// rendezvous, then ProcessGroupGloo over TCP), with status-returning collectives.
#ifndef GANTRY_WORKERS_DISTRIBUTED_COMMUNICATOR_H_
#define GANTRY_WORKERS_DISTRIBUTED_COMMUNICATOR_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gantry::distributed {

struct CommunicatorOptions {
  std::string rendezvous_host;  // where rank 0 hosts the c10d TCPStore
  int rendezvous_port = 0;
  int rank = 0;
  int world_size = 1;
  // This rank's interface for Gloo pairs ("" = rendezvous_host for rank 0 / 127.0.0.1); ranks on
  // other machines must set the address their peers reach them at.
  std::string bind_host;
  absl::Duration timeout = absl::Minutes(2);  // rendezvous and collectives
  bool gpu = false;  // NCCL; UNIMPLEMENTED unless built with GANTRY_WITH_CUDA
  // The attempt's rendezvous secret (Assignment.rendezvous_secret, 32 to 128 hex characters):
  // every key the group writes to the TCPStore lives under it, so only ranks that hold it find
  // each other. Empty: keys at the store's top level (tests, one-process runs).
  std::string secret;
};

// Thread safety: collectives must be issued in the same order on every rank; a Communicator may be
// used from several threads only if they agree on that order (DataParallel issues from the training
// thread, including from inside autograd's backward on that thread).
class Communicator {
 public:
  // Rank 0 starts the TCPStore on rendezvous_host:rendezvous_port and waits for the others; every
  // rank then builds the Gloo group under the secret's keys (ranks with different secrets never
  // see each other's and time out). INVALID_ARGUMENT for bad options; UNAVAILABLE (rank 0 cannot
  // listen, or a connection failed) or DEADLINE_EXCEEDED (nobody answered within the timeout), each
  // message naming host:port; UNIMPLEMENTED for gpu without GANTRY_WITH_CUDA.
  static absl::StatusOr<std::unique_ptr<Communicator>> Connect(const CommunicatorOptions& options);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  const CommunicatorOptions& options() const { return options_; }

  // Sums the tensors element-wise over all ranks, in place; returns when done. Errors (a peer
  // vanished, timeout) become UNAVAILABLE / DEADLINE_EXCEEDED.
  absl::Status AllReduceSum(std::vector<at::Tensor>& tensors);
  // Overwrites the tensors with root's, in place.
  absl::Status Broadcast(std::vector<at::Tensor>& tensors, int root);
  absl::Status Barrier();

  // The underlying process group, for asynchronous work (DataParallel's gradient buckets).
  c10d::ProcessGroup& group() { return *group_; }

 private:
  Communicator(CommunicatorOptions options, c10::intrusive_ptr<c10d::Store> store,
               c10::intrusive_ptr<c10d::ProcessGroup> group);

  CommunicatorOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

// Maps an exception thrown by c10d / Gloo while doing `what` to a status naming `where`.
absl::Status CollectiveError(const std::exception& e, const std::string& what,
                             const std::string& where);

}  // namespace gantry::distributed

#endif  // GANTRY_WORKERS_DISTRIBUTED_COMMUNICATOR_H_
