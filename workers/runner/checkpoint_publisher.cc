#include "workers/runner/checkpoint_publisher.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace gantry::runner {

namespace fs = std::filesystem;
namespace v1 = ::gantry::v1;

CheckpointPublisher::CheckpointPublisher(CheckpointPublisherOptions options,
                                         CheckpointTransport* transport, RankLog log)
    : options_(std::move(options)),
      transport_(transport),
      log_(std::move(log)),
      last_save_(std::chrono::steady_clock::now()) {}

CheckpointPublisher::~CheckpointPublisher() { Wait(); }

void CheckpointPublisher::Wait() {
  if (upload_thread_.joinable()) upload_thread_.join();
}

PublishedCheckpoint CheckpointPublisher::last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

absl::Duration CheckpointPublisher::SinceLastSave() const {
  return absl::FromChrono(std::chrono::steady_clock::now() - last_save_);
}

absl::Status CheckpointPublisher::Upload(const std::string& path, int epoch, int64_t step,
                                         absl::Duration retry_for, std::optional<double> fom) {
  // The server may be restarting: retry UNAVAILABLE with backoff (1, 2, 4, 8, 15, 15, ... s).
  const absl::Time start = absl::Now();
  const absl::Time give_up = start + retry_for;
  absl::StatusOr<UploadedCheckpoint> uploaded;
  for (int attempt = 0;; ++attempt) {
    uploaded = transport_->Upload(options_.job_id, epoch, step, path, options_.attempt,
                                  options_.rank, fom);
    const absl::Duration wait =
        std::min(absl::Seconds(1 << std::min(attempt, 4)), absl::Seconds(15));
    if (uploaded.ok() || !absl::IsUnavailable(uploaded.status()) || Stopping() ||
        absl::Now() + wait > give_up) {
      break;
    }
    log_("WARNING", absl::StrCat("checkpoint upload failed (", uploaded.status().ToString(),
                                 "); retrying in ", absl::FormatDuration(wait)));
    absl::SleepFor(wait);
  }
  if (!uploaded.ok()) return uploaded.status();
  {
    absl::MutexLock lock(&mu_);
    last_ = PublishedCheckpoint{*uploaded, step};
  }
  log_("INFO", absl::StrFormat("checkpoint of epoch %d (step %d) uploaded: sha256 %s, %d bytes, "
                               "upload %.3f s%s",
                               epoch, step, uploaded->sha256, uploaded->size_bytes,
                               absl::ToDoubleSeconds(absl::Now() - start),
                               fom.has_value() ? absl::StrFormat(", fom %.9g", *fom) : ""));
  return absl::OkStatus();
}

absl::Status CheckpointPublisher::Publish(int epoch, int64_t step, const WriteFn& write,
                                          bool final_checkpoint, absl::Duration retry_for,
                                          std::optional<double> fom,
                                          std::optional<v1::ValidationPoint> point) {
  Wait();  // at most one upload in flight; its file is never pruned while it runs
  std::error_code ec;
  fs::create_directories(options_.work_dir, ec);
  const std::string path = (fs::path(options_.work_dir) /
                            absl::StrFormat("checkpoint-epoch%04d-step%08d.ckpt", epoch, step))
                               .string();
  const auto snapshot_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(write(path));
  log_("INFO", absl::StrFormat(
                   "checkpoint of epoch %d (step %d) written: snapshot %.3f s", epoch, step,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - snapshot_start)
                       .count()));
  last_save_ = std::chrono::steady_clock::now();
  if (local_files_.empty() || local_files_.back() != path) local_files_.push_back(path);
  while (static_cast<int>(local_files_.size()) > std::max(1, options_.keep_last)) {
    fs::remove(local_files_.front(), ec);
    local_files_.pop_front();
  }
  if (retry_for == absl::ZeroDuration()) {
    retry_for = final_checkpoint ? options_.final_upload_retry : options_.periodic_upload_retry;
  }
  if (final_checkpoint) {
    const absl::Status uploaded = Upload(path, epoch, step, retry_for, fom);
    if (!uploaded.ok()) {
      return absl::Status(uploaded.code(),
                          absl::StrCat("uploading the final checkpoint: ", uploaded.message()));
    }
    return absl::OkStatus();
  }
  // Training goes on while the snapshot uploads; a failure only costs this restart point.
  upload_thread_ = std::thread([this, path, epoch, step, retry_for, fom, point = std::move(point)] {
    const absl::Status uploaded = Upload(path, epoch, step, retry_for, fom);
    if (!uploaded.ok()) {
      log_("WARNING", absl::StrCat("checkpoint of epoch ", epoch, " (step ", step, ") kept at ",
                                   path, " but not uploaded: ", uploaded.ToString()));
    }
    if (point.has_value()) ReportPoint(*point);
  });
  return absl::OkStatus();
}

void CheckpointPublisher::ReportPoint(const v1::ValidationPoint& point) {
  const absl::Time give_up = absl::Now() + options_.report_retry;
  absl::Status reported;
  for (int attempt = 0;; ++attempt) {
    reported = transport_->ReportValidation(options_.job_id, options_.attempt, options_.rank, point);
    const absl::Duration wait = absl::Seconds(1 << std::min(attempt, 3));
    if (reported.ok() || !absl::IsUnavailable(reported) || Stopping() ||
        absl::Now() + wait > give_up) {
      break;
    }
    absl::SleepFor(wait);
  }
  if (!reported.ok()) {
    log_("WARNING", absl::StrCat("the validation of step ", point.step(),
                                 " could not be reported; the validation curve misses it: ",
                                 reported.ToString()));
  }
}

}  // namespace gantry::runner
