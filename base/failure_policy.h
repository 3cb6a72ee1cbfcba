// The failure policy: what a rank's exit code means and which failures a job restarts from its
// latest checkpoint. The one place both sides read it: ranks choose their exit code with
// RankExitCodeFor, the server classifies exits and other failures with Classify*. Documented as a
// table in docs/ARCHITECTURE.md "Fault tolerance".
//
// Exit codes follow Kubeflow's ExitCode restart policy: 1..127 are permanent (running again gives
// the same failure), 128..255 are retryable (the machine or a peer went away). A rank killed by a
// signal (RankStatus.exit_code < 0) is retryable.
#ifndef GANTRY_BASE_FAILURE_POLICY_H_
#define GANTRY_BASE_FAILURE_POLICY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gantry {

// Exit codes of `gantry-worker rank`.
enum RankExitCode : int {
  kExitOk = 0,
  // Permanent (1..127).
  kExitInternal = 1,      // an unexpected error (a bug): retrying gives the same
  kExitInvalidSpec = 2,   // the worker refuses the spec (INVALID_ARGUMENT)
  kExitDataError = 3,     // the dataset is missing, unreadable or does not fit the model
  kExitOutOfMemory = 4,   // out of memory for this spec: it will recur
  kExitDiverged = 5,      // the generator collapsed (deterministic for the seed)
  // Retryable (128..255).
  kExitCancelled = 143,          // 128 + SIGTERM: stopped on request (cancellation or restart)
  kExitPreempted = 200,          // checkpointed on a preemption or drain notice, then exited
  kExitPeerLost = 201,           // a collective failed because a peer went away
  kExitCollectiveTimeout = 202,  // a collective waited longer than the collective timeout
  kExitRendezvousFailed = 203,   // the process group could not be formed
  kExitServerUnreachable = 204,  // the server stayed unreachable past the retries
};

// Attach to an absl::Status to name the failure kind (the payload's value is the exit code as
// text); RankExitCodeFor prefers it over the status code.
inline constexpr absl::string_view kFailureKindPayload = "type.gantry.dev/failure-kind";

// Marks `status` with the exit code its rank should end with.
absl::Status WithExitCode(absl::Status status, RankExitCode code);

// The exit code for a rank that ends with `status`: the attached failure kind if any, else by code
// (OK 0, CANCELLED 143, INVALID_ARGUMENT 2, NOT_FOUND / FAILED_PRECONDITION / DATA_LOSS /
// PERMISSION_DENIED / OUT_OF_RANGE 3, RESOURCE_EXHAUSTED 4, ABORTED 5, UNAVAILABLE 204,
// DEADLINE_EXCEEDED 202, anything else 1).
int RankExitCodeFor(const absl::Status& status);

// What the server does about one failure.
struct FailureClass {
  std::string reason;  // the job's reason: RankFailed, PeerLost, CollectiveTimeout, Preempted, ...
  bool retryable = false;  // restart from the latest checkpoint (when max_restarts allows)
  bool counted = true;     // counts against max_restarts (false for Preempted and Drained)
};

// A rank exit as RankStatus reports it (negative = killed by that signal).
FailureClass ClassifyRankExit(int exit_code);
// Failures the server sees itself.
FailureClass WorkerLost();         // no heartbeat within the lease
FailureClass NoProgress();         // the progress watchdog fired
FailureClass PlacementTimeout();   // ranks never all started
FailureClass Preempted();          // the worker announced a preemption
FailureClass Drained();            // an operator drained the worker

// An exit code for messages: "201 (PeerLost, retryable)", "3 (DatasetError, permanent)",
// "signal 9 (retryable)" for -9, "0".
std::string DescribeExitCode(int exit_code);

}  // namespace gantry

#endif  // GANTRY_BASE_FAILURE_POLICY_H_
