// One rank process for tests/distributed (spawned by distributed_test, real processes on loopback).
//   distributed_rank_helper --mode=train|broadcast|syncbn|collectives --rank=R --world=W --port=P
//                           --out=FILE [mode flags]
// Writes its results as a torch tensor archive (torch::save of a tensor list) to FILE and, for
// train, statistics to FILE.stats. train saves the final weights and buffers of both networks
// followed by the initial ones. Exit code 0 on success; errors go to stderr.
#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "tests/bench/bench_flags.h"
#include "tests/gan/test_data.h"
#include "workers/distributed/communicator.h"
#include "workers/distributed/data_parallel.h"
#include "workers/gan/condition_fit.h"
#include "workers/gan/heap_retention.h"
#include "workers/gan/openmp_wait_policy.h"
#include "workers/gan/preprocessing.h"
#include "workers/gan/sync_batch_norm.h"
#include "workers/gan/trainer.h"

namespace gantry::distributed {
namespace {

using bench::BenchFlag;

int Fail(const absl::Status& s) {
  std::cerr << "rank helper: " << s << "\n";
  return 2;
}

std::vector<at::Tensor> Weights(const gan::TrainingState& s) {
  std::vector<at::Tensor> out;
  for (const auto& p : s.generator->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : s.generator->buffers()) out.push_back(b.detach().clone());
  for (const auto& p : s.discriminator->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : s.discriminator->buffers()) out.push_back(b.detach().clone());
  return out;
}

absl::StatusOr<std::unique_ptr<Communicator>> Connect(int argc, char** argv) {
  CommunicatorOptions o;
  o.rendezvous_host = "127.0.0.1";
  o.rendezvous_port = std::atoi(BenchFlag(argc, argv, "port", "0").c_str());
  o.rank = std::atoi(BenchFlag(argc, argv, "rank", "0").c_str());
  o.world_size = std::atoi(BenchFlag(argc, argv, "world", "1").c_str());
  o.timeout = absl::Seconds(60);
  return Communicator::Connect(o);
}

int Train(int argc, char** argv, bool broadcast_only) {
  const int rank = std::atoi(BenchFlag(argc, argv, "rank", "0").c_str());
  const int world = std::atoi(BenchFlag(argc, argv, "world", "1").c_str());
  const bool distributed = BenchFlag(argc, argv, "port", "0") != "0";
  const std::string out = BenchFlag(argc, argv, "out", "");
  gan::ModelConfig config = *gan::PresetConfig("tiny");
  config.dropout = std::atof(BenchFlag(argc, argv, "dropout", "0").c_str());
  config.label_flip = std::atof(BenchFlag(argc, argv, "flip", "0").c_str());
  const showers::ShowerSet showers =
      gan::testing::FixedAngleShowers(std::atoll(BenchFlag(argc, argv, "events", "12").c_str()));
  // --profile=W: the generator's profile loss with weight W, its profile fitted to the showers.
  config.profile_loss_weight = std::atof(BenchFlag(argc, argv, "profile", "0").c_str());
  if (config.profile_loss_weight > 0) {
    std::vector<int64_t> rows(static_cast<size_t>(showers.events()));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
    gan::ModelConfig fitted = config;
    auto sample = gan::SampleConditions(fitted, showers, rows);
    if (!sample.ok()) return Fail(sample.status());
    if (auto fit = gan::FitConditionsToData(*sample, &fitted); !fit.ok()) return Fail(fit.status());
    config.profile_fit = fitted.profile_fit;
  }
  gan::TrainerOptions options;
  options.batch_size = std::atoll(BenchFlag(argc, argv, "batch", "2").c_str());
  options.seed = std::strtoull(BenchFlag(argc, argv, "seed", "1").c_str(), nullptr, 10);
  options.threads = std::atoi(BenchFlag(argc, argv, "threads", "1").c_str());
  options.world_size = world;
  options.rank = rank;
  options.epochs = 1000;
  if (BenchFlag(argc, argv, "identity_sum", "0") == "1") {
    options.cross_rank_sum = [](at::Tensor&) {};  // SyncBatchNorm code path on one process
  }
  // --double=1 runs both networks and the data in float64 (the precise equivalence test).
  const bool float64 = BenchFlag(argc, argv, "double", "0") == "1";
  auto tensors = gan::PreprocessShowers(config, showers);
  if (!tensors.ok()) return Fail(tensors.status());
  auto state = gan::NewTrainingState(config, options.seed);
  if (!state.ok()) return Fail(state.status());
  if (float64) {
    state->generator->to(at::kDouble);
    state->discriminator->to(at::kDouble);
    tensors->images = tensors->images.to(at::kDouble);
    tensors->energy100 = tensors->energy100.to(at::kDouble);
    tensors->ecal = tensors->ecal.to(at::kDouble);
  }
  auto trainer = gan::Trainer::CreateFromTensors(*std::move(state), *std::move(tensors), options);
  if (!trainer.ok()) return Fail(trainer.status());
  std::vector<at::Tensor> before = Weights((*trainer)->state());

  std::unique_ptr<Communicator> comm;
  std::unique_ptr<DataParallel> dp;
  if (distributed) {
    auto c = Connect(argc, argv);
    if (!c.ok()) return Fail(c.status());
    comm = *std::move(c);
    DataParallelOptions dp_options;
    dp_options.bucket_bytes = std::atoll(BenchFlag(argc, argv, "bucket", "4096").c_str());
    dp_options.overlap = BenchFlag(argc, argv, "overlap", "1") == "1";
    dp_options.sync_batch_norm = BenchFlag(argc, argv, "sync_bn", "1") == "1";
    auto attached = DataParallel::Attach(**trainer, *comm, dp_options);
    if (!attached.ok()) return Fail(attached.status());
    dp = *std::move(attached);
  }
  std::vector<at::Tensor> result;
  if (broadcast_only) {
    result = before;
    for (const at::Tensor& t : Weights((*trainer)->state())) result.push_back(t);
    // The shared stream must be synchronised too: the next draw is the same on every rank.
    result.push_back(at::randn({4}, (*trainer)->mutable_state().rng));
  } else {
    const int steps = std::atoi(BenchFlag(argc, argv, "steps", "4").c_str());
    std::ofstream stats(out + ".stats");
    for (int i = 0; i < steps; ++i) {
      auto step = (*trainer)->Step();
      if (!step.ok()) return Fail(step.status());
      stats << "step " << step->step << " epoch " << step->epoch << " d_real "
            << step->discriminator_real_loss[0] << " g " << step->generator_loss[0] << "\n";
    }
    if (dp) {
      const DataParallelStats s = dp->stats();
      stats << "reductions " << s.reductions << "\nbytes " << static_cast<int64_t>(s.bytes)
            << "\nallreduce_seconds " << s.allreduce_seconds << "\nexposed_seconds "
            << s.exposed_seconds << "\n";
    }
    stats << "epoch " << (*trainer)->state().epoch << "\nstep " << (*trainer)->state().step << "\n";
    result = Weights((*trainer)->state());
    result.insert(result.end(), before.begin(), before.end());  // then the initial weights
  }
  torch::save(result, out);
  return 0;
}

// Global input (seeded, identical on every rank) of shape (world * local, C, 5, 4, 3), this rank's
// slice normalised by SyncBatchNorm, loss = sum(y * g) with a seeded g: writes y, x.grad,
// weight.grad, bias.grad, running_mean, running_var.
int SyncBn(int argc, char** argv) {
  auto c = Connect(argc, argv);
  if (!c.ok()) return Fail(c.status());
  Communicator& comm = **c;
  const int64_t local = std::atoll(BenchFlag(argc, argv, "batch", "3").c_str());
  at::manual_seed(11);
  const at::Tensor x_all = at::randn({local * comm.world_size(), 3, 5, 4, 3}) * 2 + 0.5;
  const at::Tensor g_all = at::randn_like(x_all);
  torch::nn::BatchNorm3d bn(torch::nn::BatchNorm3dOptions(3).eps(1e-3).momentum(0.1));
  {
    at::NoGradGuard no_grad;
    bn->weight.copy_(at::tensor({1.5f, 0.5f, -1.0f}));
    bn->bias.copy_(at::tensor({0.1f, -0.2f, 0.3f}));
  }
  const int64_t begin = comm.rank() * local;
  at::Tensor x = x_all.slice(0, begin, begin + local).clone().set_requires_grad(true);
  auto sum = std::make_shared<const gan::CrossRankSum>([&comm](at::Tensor& t) {
    std::vector<at::Tensor> one{t};
    const absl::Status s = comm.AllReduceSum(one);
    TORCH_CHECK(s.ok(), s.ToString());
  });
  at::Tensor y = gan::SyncBatchNorm(x, *bn, sum);
  (y * g_all.slice(0, begin, begin + local)).sum().backward();
  torch::save(std::vector<at::Tensor>{y.detach(), x.grad(), bn->weight.grad(), bn->bias.grad(),
                                      bn->running_mean, bn->running_var, bn->num_batches_tracked},
              BenchFlag(argc, argv, "out", ""));
  return 0;
}

// AllReduceSum of a mixed list (float, int64, float64, a non-contiguous view) and a Broadcast
// from the last rank.
int Collectives(int argc, char** argv) {
  auto c = Connect(argc, argv);
  if (!c.ok()) return Fail(c.status());
  Communicator& comm = **c;
  const double r = comm.rank() + 1;
  at::Tensor f = at::full({3, 2}, r, at::kFloat);
  at::Tensor l = at::full({5}, static_cast<int64_t>(r * 10), at::kLong);
  at::Tensor d = at::full({2}, r / 4, at::kDouble);
  at::Tensor base = at::full({4, 4}, r, at::kFloat);
  at::Tensor view = base.t().slice(0, 0, 2);  // non-contiguous
  std::vector<at::Tensor> all{f, l, d, view};
  if (absl::Status s = comm.AllReduceSum(all); !s.ok()) return Fail(s);
  at::Tensor b = at::arange(6, at::kFloat) * r;
  at::Tensor bl = at::full({2}, static_cast<int64_t>(r), at::kLong);
  std::vector<at::Tensor> cast{b, bl};
  if (absl::Status s = comm.Broadcast(cast, comm.world_size() - 1); !s.ok()) return Fail(s);
  if (absl::Status s = comm.Barrier(); !s.ok()) return Fail(s);
  torch::save(std::vector<at::Tensor>{f, l, d, base, b, bl}, BenchFlag(argc, argv, "out", ""));
  return 0;
}

}  // namespace
}  // namespace gantry::distributed

int main(int argc, char** argv) {
  // The process settings of a gantry-worker rank. The float64 convolutions (no oneDNN) allocate and
  // free im2col buffers of hundreds of MB per call; served by mmap, every call page-faulted them
  // afresh (most of the run time as system time).
  gantry::gan::PreferPassiveOpenMpWait(argv);  // may re-execute this program
  gantry::gan::RetainFreedHeapMemory();
  const std::string mode = gantry::bench::BenchFlag(argc, argv, "mode", "");
  try {
    if (mode == "train") return gantry::distributed::Train(argc, argv, false);
    if (mode == "broadcast") return gantry::distributed::Train(argc, argv, true);
    if (mode == "syncbn") return gantry::distributed::SyncBn(argc, argv);
    if (mode == "collectives") return gantry::distributed::Collectives(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "rank helper: " << e.what() << "\n";
    return 3;
  }
  std::cerr << "unknown --mode=" << mode << "\n";
  return 1;
}
