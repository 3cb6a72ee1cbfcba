// ControlPipe: the framing between a rank process and its worker daemon. The rank writes
// WorkerMessage frames (progress, logs, rank status, the job result) to an inherited pipe fd; the
// daemon reads them, stamps the job id and forwards them on its Connect stream. A frame is a 4-byte
// little-endian length followed by that many bytes of a serialized gantry.v1.WorkerMessage.
#ifndef GANTRY_WORKERS_AGENT_CONTROL_PIPE_H_
#define GANTRY_WORKERS_AGENT_CONTROL_PIPE_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/worker.pb.h"

namespace gantry::agent {

// Largest frame accepted (a JobResult with histograms stays far below it).
inline constexpr uint32_t kMaxControlFrameBytes = 8u << 20;

// Writes one frame; retries on EINTR and short writes. Safe to call from several threads of one
// process only with external locking. UNAVAILABLE when the reader has gone (EPIPE).
absl::Status WriteControlMessage(int fd, const gantry::v1::WorkerMessage& message);

// Reads frames from a pipe fd it does not own.
class ControlPipeReader {
 public:
  explicit ControlPipeReader(int fd) : fd_(fd) {}

  // The next message; std::nullopt at a clean end of stream (writer closed between frames).
  // DATA_LOSS for a truncated or undecodable frame or one larger than kMaxControlFrameBytes.
  absl::StatusOr<std::optional<gantry::v1::WorkerMessage>> Next();

 private:
  // Reads exactly n bytes; returns the count read before EOF (< n only at end of stream).
  absl::StatusOr<size_t> ReadFully(char* buffer, size_t n);

  int fd_;
};

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_CONTROL_PIPE_H_
