// CheckpointPublisher: the checkpoint stage of a rank. It writes a checkpoint into the rank's work
// directory, keeps the newest `keep_last` files there, uploads each to the server, and reports
// the validation points of the job's curve.
// - Periodic checkpoints upload in the background while training goes on; at most one upload is
//   in flight, and its file is never pruned while it runs. A failure costs only that restart
//   point (a warning).
// - The final checkpoint, a preemption's and a baseline's upload synchronously; the error is
//   returned.
// - Uploads retry UNAVAILABLE (a restarting server) with backoff, up to a bound per call.
// Torch-free: the file is written by a callback and the server is reached through a
// CheckpointTransport, so tests drive it without a trainer, a server or a process.
#ifndef GANTRY_WORKERS_RUNNER_CHECKPOINT_PUBLISHER_H_
#define GANTRY_WORKERS_RUNNER_CHECKPOINT_PUBLISHER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"
#include "workers/runner/checkpoint_client.h"
#include "workers/runner/rank_log.h"

namespace gantry::runner {

struct CheckpointPublisherOptions {
  // Who uploads: the job attempt and rank the server checks every upload and report against.
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  std::string work_dir;  // where checkpoint files are written
  int keep_last = 1;     // checkpoint files kept in work_dir (the newest)
  // How long UNAVAILABLE is retried: final uploads, periodic ones, validation reports.
  absl::Duration final_upload_retry = absl::Seconds(60);
  absl::Duration periodic_upload_retry = absl::Seconds(15);
  absl::Duration report_retry = absl::Seconds(15);
  // Retries end early once this returns true (the rank is stopping). May be empty.
  std::function<bool()> stopping;
};

// The newest successful upload; step -1 before any.
struct PublishedCheckpoint {
  UploadedCheckpoint upload;
  int64_t step = -1;
};

class CheckpointPublisher {
 public:
  // Writes the checkpoint file at `path`.
  using WriteFn = std::function<absl::Status(const std::string& path)>;

  // `transport` must outlive the publisher.
  CheckpointPublisher(CheckpointPublisherOptions options, CheckpointTransport* transport,
                      RankLog log);
  ~CheckpointPublisher();  // waits for the upload in flight
  CheckpointPublisher(const CheckpointPublisher&) = delete;
  CheckpointPublisher& operator=(const CheckpointPublisher&) = delete;

  // Waits for the upload in flight, writes the checkpoint of (epoch, step) with `write` as
  // work_dir/checkpoint-epochEEEE-stepSSSSSSSS.ckpt, prunes older files past keep_last, and uploads
  // it: synchronously when `final_checkpoint` (the error is returned, prefixed "uploading the
  // final checkpoint"), else in the background. `retry_for` bounds the retries (zero: the
  // options' bound for that kind). `fom` goes with the upload (keep_best); `point`, when set, is
  // reported after a background upload, whatever its outcome.
  absl::Status Publish(int epoch, int64_t step, const WriteFn& write, bool final_checkpoint,
                       absl::Duration retry_for = absl::ZeroDuration(),
                       std::optional<double> fom = std::nullopt,
                       std::optional<gantry::v1::ValidationPoint> point = std::nullopt);

  // Uploads the file at `path` now, retrying UNAVAILABLE for up to `retry_for`; records it as the
  // newest upload on success.
  absl::Status Upload(const std::string& path, int epoch, int64_t step, absl::Duration retry_for,
                      std::optional<double> fom = std::nullopt);

  // Sends `point` to the server, retrying UNAVAILABLE for up to report_retry; a failure is logged
  // as a warning (the curve misses the point, the job goes on).
  void ReportPoint(const gantry::v1::ValidationPoint& point);

  // Waits for the upload in flight, if any.
  void Wait();

  PublishedCheckpoint last() const;
  // Time since the newest checkpoint was written (since construction before the first).
  absl::Duration SinceLastSave() const;

 private:
  bool Stopping() const { return options_.stopping && options_.stopping(); }

  const CheckpointPublisherOptions options_;
  CheckpointTransport* const transport_;
  const RankLog log_;
  // Publishing thread only.
  std::deque<std::string> local_files_;
  std::chrono::steady_clock::time_point last_save_;
  std::thread upload_thread_;

  mutable absl::Mutex mu_;
  PublishedCheckpoint last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_CHECKPOINT_PUBLISHER_H_
