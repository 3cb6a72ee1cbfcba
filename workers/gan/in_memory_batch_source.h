// InMemoryBatchSource: batches gathered (index_select) from training tensors held in memory, the
// Trainer's source when it is created from a ShowerSet or from tensors.
#ifndef GANTRY_WORKERS_GAN_IN_MEMORY_BATCH_SOURCE_H_
#define GANTRY_WORKERS_GAN_IN_MEMORY_BATCH_SOURCE_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "workers/gan/batch_source.h"
#include "workers/gan/preprocessing.h"

namespace gantry::gan {

class InMemoryBatchSource : public BatchSource {
 public:
  // `data.images` must be defined (the Trainer checks it).
  explicit InMemoryBatchSource(TrainingTensors data) : data_(std::move(data)) {}

  int64_t events() const override { return data_.images.size(0); }
  at::ScalarType dtype() const override { return data_.images.scalar_type(); }
  absl::Status Plan(std::vector<std::vector<int64_t>> batches) override;
  absl::StatusOr<RealBatch> Next() override;

 private:
  TrainingTensors data_;
  std::deque<std::vector<int64_t>> plan_;
};

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_IN_MEMORY_BATCH_SOURCE_H_
