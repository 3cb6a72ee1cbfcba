#include "workers/distributed/data_parallel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gantry::distributed {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::vector<int64_t> Values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

DataParallel::DataParallel(gan::Trainer& trainer, Communicator& comm,
                           const DataParallelOptions& options)
    : trainer_(trainer), comm_(comm), options_(options) {}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Attach(
    gan::Trainer& trainer, Communicator& comm, const DataParallelOptions& options) {
  if (trainer.options().world_size != comm.world_size() || trainer.options().rank != comm.rank()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the trainer was created for rank ", trainer.options().rank, " of ",
                     trainer.options().world_size, " but the communicator is rank ", comm.rank(),
                     " of ", comm.world_size()));
  }
  if (options.bucket_bytes <= 0) {
    return absl::InvalidArgumentError("bucket_bytes must be positive");
  }
  std::unique_ptr<DataParallel> dp(new DataParallel(trainer, comm, options));
  try {
    if (absl::Status s = dp->BroadcastInitialState(); !s.ok()) return s;
    gan::TrainingState& state = trainer.mutable_state();
    dp->BuildBuckets(dp->generator_, *state.generator);
    dp->BuildBuckets(dp->discriminator_, *state.discriminator);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("attaching data parallelism: ", e.what_without_backtrace()));
  }
  DataParallel* self = dp.get();
  trainer.set_gradient_hook(
      [self](gan::TrainPhase, torch::nn::Module& model) { return self->FinishRound(model); });
  if (options.sync_batch_norm) {
    trainer.set_cross_rank_sum([self](at::Tensor& t) {
      std::vector<at::Tensor> one{t};
      const absl::Status s = self->comm_.AllReduceSum(one);
      TORCH_CHECK(s.ok(), "synchronised BatchNorm: ", s.ToString());
    });
  }
  return dp;
}

DataParallel::~DataParallel() {
  trainer_.set_gradient_hook(nullptr);
  if (options_.sync_batch_norm) trainer_.set_cross_rank_sum(nullptr);
  for (ParamSet* set : {&generator_, &discriminator_}) {
    for (size_t i = 0; i < set->hook_handles.size(); ++i) {
      set->params[i].remove_hook(set->hook_handles[i]);
    }
    // Do not leave an all-reduce writing into a buffer that is about to be freed.
    for (Bucket& b : set->buckets) {
      if (!b.work) continue;
      try {
        b.work->wait();
      } catch (const std::exception&) {
      }
    }
  }
}

absl::Status DataParallel::BroadcastInitialState() {
  gan::TrainingState& s = trainer_.mutable_state();
  const int64_t events = trainer_.events();
  // Every rank must shard the same data the same way.
  const at::Tensor mine =
      at::tensor(std::vector<int64_t>{events, trainer_.batch_size(), trainer_.options().world_size,
                                      trainer_.steps_per_epoch()},
                 at::kLong);
  at::Tensor root = mine.clone();
  std::vector<at::Tensor> meta{root};
  if (absl::Status st = comm_.Broadcast(meta, 0); !st.ok()) return st;
  at::Tensor mismatch = at::full({1}, at::equal(mine, root) ? 0 : 1, at::kLong);
  std::vector<at::Tensor> flags{mismatch};
  if (absl::Status st = comm_.AllReduceSum(flags); !st.ok()) return st;
  if (mismatch.item<int64_t>() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data-parallel ranks disagree on [events, batch per rank, world size, steps per epoch]: "
        "rank 0 has [",
        absl::StrJoin(Values(root), ", "), "], rank ", comm_.rank(), " has [",
        absl::StrJoin(Values(mine), ", "), "] (", mismatch.item<int64_t>(),
        " rank(s) differ from rank 0)"));
  }

  std::vector<at::Tensor> tensors;
  for (torch::nn::Module* m : {static_cast<torch::nn::Module*>(s.generator.get()),
                               static_cast<torch::nn::Module*>(s.discriminator.get())}) {
    for (const at::Tensor& p : m->parameters()) tensors.push_back(p);
    for (const at::Tensor& b : m->buffers()) tensors.push_back(b);
  }
  if (absl::Status st = comm_.Broadcast(tensors, 0); !st.ok()) return st;

  // The shared random stream and the position in the epoch.
  std::vector<at::Tensor> rng{s.rng.get_state()};
  at::Tensor counters = at::tensor(
      std::vector<int64_t>{s.epoch, s.step, s.epoch_cursor, s.permutation.defined() ? 1 : 0},
      at::kLong);
  rng.push_back(counters);
  if (absl::Status st = comm_.Broadcast(rng, 0); !st.ok()) return st;
  s.rng.set_state(rng[0]);
  const std::vector<int64_t> c = Values(rng[1]);
  s.epoch = c[0];
  s.step = c[1];
  s.epoch_cursor = c[2];
  if (c[3] != 0) {
    std::vector<at::Tensor> permutation{s.permutation.defined() && s.permutation.numel() == events
                                            ? s.permutation.contiguous()
                                            : at::empty({events}, at::kLong)};
    if (absl::Status st = comm_.Broadcast(permutation, 0); !st.ok()) return st;
    s.permutation = permutation[0];
  } else {
    s.permutation = at::Tensor();
  }
  return absl::OkStatus();
}

void DataParallel::BuildBuckets(ParamSet& set, torch::nn::Module& module) {
  set.module = &module;
  set.params = module.parameters();
  const size_t n = set.params.size();
  set.bucket_of.assign(n, 0);
  set.offset.assign(n, 0);
  set.filled.assign(n, false);
  // Reverse registration order approximates the order backward produces gradients in.
  Bucket current;
  int64_t elements = 0;
  auto close = [&]() {
    if (current.params.empty()) return;
    current.buffer = at::zeros({elements}, set.params.front().options().requires_grad(false));
    current.pending = static_cast<int64_t>(current.params.size());
    set.buckets.push_back(std::move(current));
    current = Bucket();
    elements = 0;
  };
  for (size_t k = n; k-- > 0;) {
    const at::Tensor& p = set.params[k];
    TORCH_CHECK(p.scalar_type() == set.params.front().scalar_type(),
                "data parallelism expects one dtype for all parameters of a network");
    set.bucket_of[k] = set.buckets.size();
    set.offset[k] = elements;
    current.params.push_back(k);
    elements += p.numel();
    if (elements * static_cast<int64_t>(p.element_size()) >= options_.bucket_bytes) close();
  }
  close();
  for (size_t k = 0; k < n; ++k) {
    set.hook_handles.push_back(set.params[k].register_hook(
        [this, &set, k](const at::Tensor& grad) { OnGradient(set, k, grad); }));
  }
}

void DataParallel::OnGradient(ParamSet& set, size_t index, const at::Tensor& grad) {
  if (!grad.defined()) return;
  Bucket& bucket = set.buckets[set.bucket_of[index]];
  if (bucket.launched) {
    launch_error_ = absl::InternalError(
        "a gradient arrived after its bucket's all-reduce was launched (the parameter is used "
        "after the bucket was considered complete)");
    return;
  }
  at::NoGradGuard no_grad;
  const int64_t numel = set.params[index].numel();
  at::Tensor slice = bucket.buffer.slice(0, set.offset[index], set.offset[index] + numel);
  if (set.filled[index]) {
    slice.add_(grad.reshape({-1}));
  } else {
    slice.copy_(grad.reshape({-1}));
    set.filled[index] = true;
    --bucket.pending;
  }
  if (options_.overlap && bucket.pending == 0) LaunchReady(set, /*force=*/false);
}

void DataParallel::LaunchReady(ParamSet& set, bool force) {
  // Buckets launch strictly in order, so every rank issues the same sequence of collectives.
  while (set.next_launch < set.buckets.size()) {
    Bucket& bucket = set.buckets[set.next_launch];
    if (!force && bucket.pending > 0) break;
    Launch(set, bucket);
    ++set.next_launch;
  }
}

void DataParallel::Launch(ParamSet& set, Bucket& bucket) {
  at::NoGradGuard no_grad;
  for (size_t k : bucket.params) {
    // A parameter without a gradient this round contributes zeros.
    if (!set.filled[k]) {
      bucket.buffer.slice(0, set.offset[k], set.offset[k] + set.params[k].numel()).zero_();
    }
  }
  if (!set.first_launch_recorded) {
    set.first_launch = Clock::now();
    set.first_launch_recorded = true;
  }
  bucket.launched = true;
  try {
    std::vector<at::Tensor> one{bucket.buffer};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    bucket.work = comm_.group().allreduce(one, opts);
    bucket.work->getFuture()->addCallback([this](c10::ivalue::Future&) {
      absl::MutexLock lock(&done_mu_);
      last_done_ = std::max(last_done_, Clock::now());
    });
  } catch (const std::exception& e) {
    if (launch_error_.ok()) {
      launch_error_ =
          CollectiveError(e, "gradient all-reduce", absl::StrCat("rank ", comm_.rank()));
    }
  }
}

absl::Status DataParallel::FinishRound(torch::nn::Module& model) {
  ParamSet* set = &model == generator_.module       ? &generator_
                  : &model == discriminator_.module ? &discriminator_
                                                    : nullptr;
  if (set == nullptr) {
    return absl::InternalError("gradient hook called for a module DataParallel does not manage");
  }
  const Clock::time_point entry = Clock::now();
  LaunchReady(*set, /*force=*/true);
  absl::Status status = launch_error_;
  for (Bucket& bucket : set->buckets) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait();
    } catch (const std::exception& e) {
      if (status.ok()) {
        status = CollectiveError(e, "gradient all-reduce", absl::StrCat("rank ", comm_.rank()));
      }
    }
  }
  const Clock::time_point done = Clock::now();
  if (!status.ok()) {
    ResetRound(*set);
    launch_error_ = absl::OkStatus();
    return status;
  }
  Clock::time_point last;
  {
    absl::MutexLock lock(&done_mu_);
    last = last_done_ == Clock::time_point::min() ? done : last_done_;
  }
  double bytes = 0;
  for (const Bucket& bucket : set->buckets) {
    bytes += static_cast<double>(bucket.buffer.numel() * bucket.buffer.element_size());
  }
  {
    absl::MutexLock lock(&stats_mu_);
    stats_.reductions += 1;
    stats_.exposed_seconds += Seconds(done - entry);
    if (set->first_launch_recorded) stats_.allreduce_seconds += Seconds(last - set->first_launch);
    stats_.bytes += bytes;
  }
  try {
    at::NoGradGuard no_grad;
    const double scale = 1.0 / static_cast<double>(comm_.world_size());
    for (Bucket& bucket : set->buckets) {
      if (comm_.world_size() > 1) bucket.buffer.mul_(scale);
    }
    for (size_t k = 0; k < set->params.size(); ++k) {
      at::Tensor& p = set->params[k];
      const Bucket& bucket = set->buckets[set->bucket_of[k]];
      const at::Tensor avg =
          bucket.buffer.slice(0, set->offset[k], set->offset[k] + p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(avg);
      } else {
        p.mutable_grad() = avg.clone();
      }
    }
  } catch (const c10::Error& e) {
    ResetRound(*set);
    return absl::InternalError(
        absl::StrCat("writing averaged gradients: ", e.what_without_backtrace()));
  }
  ResetRound(*set);
  return absl::OkStatus();
}

void DataParallel::ResetRound(ParamSet& set) {
  for (Bucket& bucket : set.buckets) {
    bucket.pending = static_cast<int64_t>(bucket.params.size());
    bucket.launched = false;
    bucket.work.reset();
  }
  std::fill(set.filled.begin(), set.filled.end(), false);
  set.next_launch = 0;
  set.first_launch_recorded = false;
  absl::MutexLock lock(&done_mu_);
  last_done_ = Clock::time_point::min();
}

DataParallelStats DataParallel::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

}  // namespace gantry::distributed
