// The rank's checkpoint stage (runner::CheckpointPublisher) in-process: real files in a temporary
// work directory, a scripted transport in place of the server.
#include "workers/runner/checkpoint_publisher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "tests/support/temp_dir.h"

namespace gantry::runner {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::gantry::v1;

struct UploadCall {
  std::string job_id;
  int epoch;
  int64_t step;
  std::string path;
  int attempt;
  int rank;
  std::optional<double> fom;
  bool file_existed;
};

// Answers uploads and reports from scripted statuses (then OK), and records every call.
class ScriptedTransport : public CheckpointTransport {
 public:
  absl::StatusOr<UploadedCheckpoint> Upload(const std::string& job_id, int epoch, int64_t step,
                                            const std::string& path, int attempt, int rank,
                                            std::optional<double> fom) override {
    if (hold_upload != nullptr) hold_upload->WaitForNotification();
    absl::MutexLock lock(&mu);
    uploads.push_back(UploadCall{job_id, epoch, step, path, attempt, rank, fom, fs::exists(path)});
    if (!upload_failures.empty()) {
      absl::Status failure = upload_failures.front();
      upload_failures.erase(upload_failures.begin());
      return failure;
    }
    return UploadedCheckpoint{"sha-" + std::to_string(step), 100 + step};
  }
  absl::Status ReportValidation(const std::string& job_id, int attempt, int rank,
                                const v1::ValidationPoint& point) override {
    absl::MutexLock lock(&mu);
    reported_steps.push_back(point.step());
    reported_after_uploads.push_back(uploads.size());
    if (!report_failures.empty()) {
      absl::Status failure = report_failures.front();
      report_failures.erase(report_failures.begin());
      return failure;
    }
    return absl::OkStatus();
  }

  absl::Mutex mu;
  std::vector<UploadCall> uploads;
  std::vector<absl::Status> upload_failures;
  std::vector<int64_t> reported_steps;
  std::vector<size_t> reported_after_uploads;
  std::vector<absl::Status> report_failures;
  absl::Notification* hold_upload = nullptr;
};

struct Logged {
  absl::Mutex mu;
  std::vector<std::string> lines;
  RankLog fn() {
    return [this](const std::string& level, const std::string& text) {
      absl::MutexLock lock(&mu);
      lines.push_back(level + " " + text);
    };
  }
  bool Has(const std::string& level, const std::string& part) {
    absl::MutexLock lock(&mu);
    for (const std::string& line : lines) {
      if (absl::StartsWith(line, level + " ") && absl::StrContains(line, part)) return true;
    }
    return false;
  }
};

CheckpointPublisherOptions Options(const std::string& work_dir) {
  CheckpointPublisherOptions o;
  o.job_id = "job-7";
  o.attempt = 3;
  o.rank = 1;
  o.work_dir = work_dir;
  o.keep_last = 2;
  return o;
}

// Writes a small file standing for a trainer's checkpoint.
absl::Status WriteFake(const std::string& path) {
  std::ofstream(path) << "checkpoint";
  return absl::OkStatus();
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CheckpointPublisherTest, FinalUploadCarriesTheAttemptAndTheNewestFilesAreKept) {
  testing::TempDir dir;
  ScriptedTransport transport;
  Logged log;
  CheckpointPublisher publisher(Options(dir.path()), &transport, log.fn());
  EXPECT_EQ(publisher.last().step, -1);
  for (int64_t step : {10, 20, 30}) {
    ASSERT_TRUE(publisher.Publish(1, step, WriteFake, /*final_checkpoint=*/false).ok());
  }
  ASSERT_TRUE(publisher.Publish(2, 40, WriteFake, /*final_checkpoint=*/true,
                                absl::ZeroDuration(), 0.25)
                  .ok());
  // keep_last 2: the two newest files stay; each upload found its file.
  EXPECT_EQ(FilesIn(dir.path()), (std::vector<std::string>{"checkpoint-epoch0001-step00000030.ckpt",
                                                           "checkpoint-epoch0002-step00000040.ckpt"}));
  absl::MutexLock lock(&transport.mu);
  ASSERT_EQ(transport.uploads.size(), 4u);
  for (const UploadCall& call : transport.uploads) {
    EXPECT_EQ(call.job_id, "job-7");
    EXPECT_EQ(call.attempt, 3);
    EXPECT_EQ(call.rank, 1);
    EXPECT_TRUE(call.file_existed) << call.path;
  }
  EXPECT_EQ(transport.uploads.back().epoch, 2);
  EXPECT_EQ(transport.uploads.back().fom, 0.25);
  EXPECT_FALSE(transport.uploads.front().fom.has_value());
  EXPECT_EQ(publisher.last().step, 40);
  EXPECT_EQ(publisher.last().upload.sha256, "sha-40");
  EXPECT_TRUE(log.Has("INFO", "fom 0.25"));
}

TEST(CheckpointPublisherTest, UnavailableIsRetriedAndOtherErrorsReturnAtOnce) {
  testing::TempDir dir;
  ScriptedTransport transport;
  Logged log;
  CheckpointPublisher publisher(Options(dir.path()), &transport, log.fn());
  transport.upload_failures = {absl::UnavailableError("restarting"),
                               absl::UnavailableError("restarting")};
  ASSERT_TRUE(publisher.Publish(0, 5, WriteFake, /*final_checkpoint=*/true).ok());
  {
    absl::MutexLock lock(&transport.mu);
    EXPECT_EQ(transport.uploads.size(), 3u);  // two refusals (1 s, 2 s apart), then the upload
  }
  EXPECT_TRUE(log.Has("WARNING", "retrying in 1s"));
  EXPECT_EQ(publisher.last().step, 5);

  transport.upload_failures = {absl::FailedPreconditionError("attempt 3 is not the job's")};
  const absl::Status refused = publisher.Publish(0, 6, WriteFake, /*final_checkpoint=*/true);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(refused.message(), "uploading the final checkpoint: ")) << refused;
  {
    absl::MutexLock lock(&transport.mu);
    EXPECT_EQ(transport.uploads.size(), 4u);  // not retried
  }
  EXPECT_EQ(publisher.last().step, 5);  // the newest successful upload

  // A failed write uploads nothing.
  const absl::Status unwritten = publisher.Publish(
      0, 7, [](const std::string&) { return absl::InternalError("disk full"); }, true);
  EXPECT_EQ(unwritten.code(), absl::StatusCode::kInternal);
  absl::MutexLock lock(&transport.mu);
  EXPECT_EQ(transport.uploads.size(), 4u);
}

TEST(CheckpointPublisherTest, RetriesEndWhenTheRankStopsOrTheBoundPasses) {
  testing::TempDir dir;
  ScriptedTransport transport;
  Logged log;
  std::atomic<bool> stopping{false};
  CheckpointPublisherOptions options = Options(dir.path());
  options.stopping = [&stopping] { return stopping.load(); };
  CheckpointPublisher publisher(options, &transport, log.fn());
  stopping = true;
  transport.upload_failures = {absl::UnavailableError("down"), absl::UnavailableError("down")};
  EXPECT_TRUE(absl::IsUnavailable(publisher.Publish(0, 1, WriteFake, true)));
  {
    absl::MutexLock lock(&transport.mu);
    EXPECT_EQ(transport.uploads.size(), 1u);
  }
  stopping = false;
  // A bound shorter than the first wait: one try.
  transport.upload_failures = {absl::UnavailableError("down")};
  EXPECT_TRUE(absl::IsUnavailable(publisher.Upload(dir.path() + "/checkpoint-epoch0000-step00000001.ckpt",
                                                   0, 1, absl::Milliseconds(500))));
  absl::MutexLock lock(&transport.mu);
  EXPECT_EQ(transport.uploads.size(), 2u);
}

TEST(CheckpointPublisherTest, PeriodicUploadsRunBesideTrainingAndReportTheirPointAfter) {
  testing::TempDir dir;
  ScriptedTransport transport;
  Logged log;
  absl::Notification release;
  transport.hold_upload = &release;
  CheckpointPublisher publisher(Options(dir.path()), &transport, log.fn());
  v1::ValidationPoint point;
  point.set_step(10);
  // Returns while the upload is held: training goes on.
  ASSERT_TRUE(publisher.Publish(1, 10, WriteFake, /*final_checkpoint=*/false,
                                absl::ZeroDuration(), std::nullopt, point)
                  .ok());
  EXPECT_EQ(publisher.last().step, -1);
  release.Notify();
  publisher.Wait();
  EXPECT_EQ(publisher.last().step, 10);
  {
    absl::MutexLock lock(&transport.mu);
    ASSERT_EQ(transport.reported_steps, std::vector<int64_t>{10});
    EXPECT_EQ(transport.reported_after_uploads, std::vector<size_t>{1});
  }

  // A failed periodic upload is a warning; its point is still reported; the file stays.
  transport.hold_upload = nullptr;
  transport.upload_failures = {absl::PermissionDeniedError("not placed here")};
  point.set_step(20);
  ASSERT_TRUE(publisher.Publish(1, 20, WriteFake, false, absl::ZeroDuration(), std::nullopt, point)
                  .ok());
  publisher.Wait();
  EXPECT_TRUE(log.Has("WARNING", "(step 20) kept at"));
  EXPECT_EQ(publisher.last().step, 10);
  EXPECT_TRUE(fs::exists(dir.path() + "/checkpoint-epoch0001-step00000020.ckpt"));
  absl::MutexLock lock(&transport.mu);
  EXPECT_EQ(transport.reported_steps, (std::vector<int64_t>{10, 20}));
}

TEST(CheckpointPublisherTest, AReportThatFailsIsAWarningNotAnError) {
  testing::TempDir dir;
  ScriptedTransport transport;
  Logged log;
  CheckpointPublisherOptions options = Options(dir.path());
  options.report_retry = absl::Seconds(2);
  CheckpointPublisher publisher(options, &transport, log.fn());
  transport.report_failures = {absl::UnavailableError("down"), absl::UnavailableError("down"),
                               absl::UnavailableError("down")};
  v1::ValidationPoint point;
  point.set_step(3);
  publisher.ReportPoint(point);  // tries at 0 and 1 s; the next wait (2 s) passes the bound
  EXPECT_TRUE(log.Has("WARNING", "validation of step 3 could not be reported"));
  absl::MutexLock lock(&transport.mu);
  EXPECT_EQ(transport.reported_steps.size(), 2u);
}

}  // namespace
}  // namespace gantry::runner
