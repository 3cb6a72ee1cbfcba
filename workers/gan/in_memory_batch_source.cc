#include "workers/gan/in_memory_batch_source.h"

#include <ATen/ATen.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace gantry::gan {

absl::Status InMemoryBatchSource::Plan(std::vector<std::vector<int64_t>> batches) {
  if (absl::Status checked = CheckPlan(batches); !checked.ok()) return checked;
  plan_.assign(std::make_move_iterator(batches.begin()), std::make_move_iterator(batches.end()));
  return absl::OkStatus();
}

absl::StatusOr<RealBatch> InMemoryBatchSource::Next() {
  if (plan_.empty()) return absl::FailedPreconditionError("no batch planned");
  const at::Tensor index = at::tensor(plan_.front(), at::kLong);
  plan_.pop_front();
  RealBatch batch;
  batch.images = data_.images.index_select(0, index);
  batch.energy100 = data_.energy100.index_select(0, index);
  batch.ecal = data_.ecal.index_select(0, index);
  if (data_.theta.defined()) batch.theta = data_.theta.index_select(0, index);
  return batch;
}

}  // namespace gantry::gan
