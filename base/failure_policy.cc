#include "base/failure_policy.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"

namespace gantry {
namespace {

const char* NameOf(int code) {
  switch (code) {
    case kExitOk: return "Succeeded";
    case kExitInternal: return "InternalError";
    case kExitInvalidSpec: return "InvalidSpec";
    case kExitDataError: return "DatasetError";
    case kExitOutOfMemory: return "OutOfMemory";
    case kExitDiverged: return "Diverged";
    case kExitCancelled: return "RankStopped";
    case kExitPreempted: return "Preempted";
    case kExitPeerLost: return "PeerLost";
    case kExitCollectiveTimeout: return "CollectiveTimeout";
    case kExitRendezvousFailed: return "RendezvousFailed";
    case kExitServerUnreachable: return "ServerUnreachable";
    default: return "RankFailed";
  }
}

}  // namespace

absl::Status WithExitCode(absl::Status status, RankExitCode code) {
  if (!status.ok()) status.SetPayload(kFailureKindPayload, absl::Cord(absl::StrCat(code)));
  return status;
}

int RankExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (absl::optional<absl::Cord> kind = status.GetPayload(kFailureKindPayload); kind.has_value()) {
    int code = 0;
    if (absl::SimpleAtoi(std::string(*kind), &code) && code > 0 && code < 256) return code;
  }
  switch (status.code()) {
    case absl::StatusCode::kCancelled: return kExitCancelled;
    case absl::StatusCode::kInvalidArgument: return kExitInvalidSpec;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kOutOfRange: return kExitDataError;
    case absl::StatusCode::kResourceExhausted: return kExitOutOfMemory;
    case absl::StatusCode::kAborted: return kExitDiverged;
    case absl::StatusCode::kUnavailable: return kExitServerUnreachable;
    case absl::StatusCode::kDeadlineExceeded: return kExitCollectiveTimeout;
    default: return kExitInternal;
  }
}

FailureClass ClassifyRankExit(int exit_code) {
  if (exit_code < 0) return {"RankFailed", true, true};  // killed by a signal
  if (exit_code == kExitPreempted) return {"Preempted", true, false};
  if (exit_code >= 128 && exit_code <= 255) return {NameOf(exit_code), true, true};
  return {NameOf(exit_code), false, true};
}

FailureClass WorkerLost() { return {"WorkerLost", true, true}; }
FailureClass NoProgress() { return {"NoProgress", true, true}; }
FailureClass PlacementTimeout() { return {"PlacementTimeout", true, true}; }
FailureClass Preempted() { return {"Preempted", true, false}; }
FailureClass Drained() { return {"Drained", true, false}; }

std::string DescribeExitCode(int exit_code) {
  if (exit_code < 0) return absl::StrCat("signal ", -exit_code, " (retryable)");
  const FailureClass c = ClassifyRankExit(exit_code);
  if (exit_code == 0) return "0";
  return absl::StrCat(exit_code, " (", c.reason, c.retryable ? ", retryable)" : ", permanent)");
}

}  // namespace gantry
