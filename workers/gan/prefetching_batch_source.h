// PrefetchingBatchSource: batches read from an open shower file and preprocessed by background
// loader threads into a bounded queue while the Trainer computes, so memory is bounded by the
// queue (not by the data set) and a slow read is hidden behind the step.
#ifndef GANTRY_WORKERS_GAN_PREFETCHING_BATCH_SOURCE_H_
#define GANTRY_WORKERS_GAN_PREFETCHING_BATCH_SOURCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "showers/shower_file_reader.h"
#include "workers/gan/batch_source.h"
#include "jobspec/model_config.h"

namespace gantry::gan {

struct PrefetchOptions {
  // Batches read ahead (ready or being read); 0 = no prefetch: Next() reads the batch itself.
  int queue_depth = 4;
  // Background threads reading and preprocessing (HDF5 reads are serialised by the library, the
  // preprocessing runs in parallel); at least 1 when queue_depth > 0.
  int loader_threads = 2;
  // Batches in page-locked memory (a CUDA rank): the Trainer's copy to the device is then
  // asynchronous. Needs a CUDA LibTorch.
  bool pin_memory = false;
  // Test and benchmark hook, called before each batch is read (on the thread that reads it):
  // simulates slow storage. Must be thread-safe.
  std::function<void()> before_read;
};

class PrefetchingBatchSource : public BatchSource {
 public:
  // Trains on the file events `candidates` (ascending file indices, e.g. a hold-out split's
  // training events) that pass PassesEventSelection: when the config selects (min_event_sum_gev
  // >= 0) one sequential pass over them (bounded memory) finds those and checks every cell;
  // otherwise cells are checked as batches are read. INVALID_ARGUMENT when the file's layout or
  // grid does not fit `config`, when no candidate passes, for a candidate outside the file or bad
  // options; a read error's status.
  static absl::StatusOr<std::unique_ptr<PrefetchingBatchSource>> Create(
      const ModelConfig& config, std::shared_ptr<const showers::ShowerFileReader> reader,
      std::vector<int64_t> candidates, const PrefetchOptions& options);

  // Stops the loaders (an in-flight read finishes first).
  ~PrefetchingBatchSource() override;

  int64_t events() const override { return static_cast<int64_t>(events_.size()); }
  at::ScalarType dtype() const override { return at::kFloat; }
  absl::Status Plan(std::vector<std::vector<int64_t>> batches) override;
  absl::StatusOr<RealBatch> Next() override;

  // Candidates dropped by the event selection.
  int64_t dropped_events() const { return dropped_events_; }
  // File index of training position i.
  int64_t file_index(int64_t i) const { return events_[i]; }
  const PrefetchOptions& options() const { return options_; }

 private:
  PrefetchingBatchSource(const ModelConfig& config,
                         std::shared_ptr<const showers::ShowerFileReader> reader,
                         const PrefetchOptions& options);

  // Reads and preprocesses the batch of training positions `positions`.
  absl::StatusOr<RealBatch> Load(const std::vector<int64_t>& positions) const;
  void LoaderLoop();
  bool CanLoad() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NextReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ModelConfig config_;
  const std::shared_ptr<const showers::ShowerFileReader> reader_;
  const PrefetchOptions options_;
  std::vector<int64_t> events_;  // training position -> file index (immutable after Create)
  int64_t dropped_events_ = 0;

  absl::Mutex mu_;
  std::vector<std::vector<int64_t>> plan_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by Plan(): stale loads are dropped
  size_t next_to_load_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_to_deliver_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<size_t, absl::StatusOr<RealBatch>> ready_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> loaders_;
};

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_PREFETCHING_BATCH_SOURCE_H_
