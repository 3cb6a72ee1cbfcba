// Tests of workers/distributed with real rank processes on loopback (distributed_rank_helper):
// the data-parallel equivalence (2 ranks x batch b == 1 process x batch 2b), the initial
// broadcast, synchronised BatchNorm, collectives, rendezvous failures, and the LR schedule.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "tests/gan/test_data.h"
#include "tests/support/build_paths.h"
#include "workers/distributed/communicator.h"
#include "workers/gan/trainer.h"

extern char** environ;

namespace gantry::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// A port that was free a moment ago (bound to port 0 on loopback, then released).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string TempFile(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("gantry-dist-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  return pid;
}

// Exit code, or -1 after killing a process that ran past the deadline.
int Wait(pid_t pid, Clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A group of helper rank processes: `world` ranks of `mode` with `flags` (plus
// --rank/--world/--port/--out and per_rank[r]). world 1 with distributed = false runs a plain
// trainer without a communicator.
struct RankGroup {
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  std::string mode;
};

RankGroup StartRanks(const std::string& mode, int world, const std::vector<std::string>& flags,
                     bool distributed = true, const std::vector<std::string>& per_rank = {}) {
  static int serial = 0;
  const int port = distributed ? FreePort() : 0;
  RankGroup group;
  group.mode = mode;
  for (int r = 0; r < world; ++r) {
    group.outs.push_back(TempFile(mode + "-" + std::to_string(++serial) + "-" + std::to_string(r)));
    std::vector<std::string> args = {
        DISTRIBUTED_RANK_HELPER,          "--mode=" + mode,
        "--rank=" + std::to_string(r),    "--world=" + std::to_string(world),
        "--port=" + std::to_string(port), "--out=" + group.outs.back()};
    args.insert(args.end(), flags.begin(), flags.end());
    if (r < static_cast<int>(per_rank.size())) args.push_back(per_rank[r]);
    group.pids.push_back(Spawn(args));
  }
  return group;
}

// Waits for every rank (each must exit 0 within `seconds`) and returns each rank's tensors.
std::vector<std::vector<at::Tensor>> Collect(const RankGroup& group, int seconds = 150) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  for (size_t r = 0; r < group.pids.size(); ++r) {
    EXPECT_EQ(Wait(group.pids[r], deadline), 0) << group.mode << " rank " << r << " failed";
  }
  std::vector<std::vector<at::Tensor>> results;
  for (const std::string& out : group.outs) {
    std::vector<at::Tensor> tensors;
    if (std::filesystem::exists(out)) torch::load(tensors, out);
    results.push_back(tensors);
  }
  return results;
}

std::vector<std::vector<at::Tensor>> RunRanks(const std::string& mode, int world,
                                              const std::vector<std::string>& flags,
                                              bool distributed = true,
                                              const std::vector<std::string>& per_rank = {}) {
  return Collect(StartRanks(mode, world, flags, distributed, per_rank));
}

std::map<std::string, double> ReadStats(const std::string& path) {
  std::map<std::string, double> stats;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    double value = 0;
    if (fields >> key >> value) stats[key] = value;
  }
  return stats;
}

double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// ---------------------------------------------------------------------------------------------
// THE equivalence test: 2 ranks x batch 1 against 1 process x batch 2, tiny preset, 4 toy MC
// events (2 steps per epoch), 3 steps (the third starts a new epoch: a new permutation), dropout 0,
// label flip 0, every parameter and buffer (BatchNorm running statistics included) of both
// networks, in float64. Batch 1 per rank keeps the float64 convolutions (no oneDNN) affordable and
// is the hardest case for the synchronised BatchNorm (a rank alone has one sample per channel map).
//
// Why float64, and the tolerance |a - b| <= 1e-9 + 1e-6 |b| per element. The two runs do the same
// arithmetic in a different order (two half-batch gradients summed then halved vs one batch;
// BatchNorm statistics from all-reduced moments vs one kernel). In float32 that is ~1e-7 relative
// per operation, and this model amplifies it into whole updates: the generator's gradients pass
// through BatchNorm, whose backward subtracts the per-channel mean of nearly uniform upstream
// gradients (the ecal-sum loss dominates), so many components are mostly cancellation residue,
// and RMSprop's first steps move every weight by ~lr / sqrt(1 - rho) = 3.2e-3 whatever the
// gradient's size, in the direction of its sign. Two float32 single-process runs that differ only
// in the thread count already disagree by 6e-3 on ~18% of the generator's weights after one step
// (measured), so no float32 weight tolerance can tell a correct data-parallel run from a wrong one.
// In float64 the same residue is ~1e-9 smaller: measured max |diff| ~1e-12 after 3-4 steps, while a
// wrong shard, scale or missing all-reduce changes weights by ~lr = 1e-3 (the weights move by more
// than 1e-3 in these steps, checked below). The float32 runs are checked separately (ranks
// bit-identical to each other; the first losses equal the global-batch losses).
constexpr double kAbsTol = 1e-9;
constexpr double kRelTol = 1e-6;

void ExpectSameWeights(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].sizes(), want[i].sizes()) << what << " tensor " << i;
    const at::Tensor g = got[i].to(at::kDouble), w = want[i].to(at::kDouble);
    const at::Tensor excess = (g - w).abs() - (kAbsTol + kRelTol * w.abs());
    EXPECT_LE(excess.max().item<double>(), 0.0)
        << what << " tensor " << i << " differs: max |diff| " << MaxAbsDiff(g, w);
    worst = std::max(worst, MaxAbsDiff(g, w));
  }
  std::cerr << what << ": max |diff| over all weights and buffers " << worst << "\n";
}

std::vector<std::string> TrainFlags(int64_t batch, int steps, int64_t events = 8) {
  return {"--batch=" + std::to_string(batch), "--steps=" + std::to_string(steps),
          "--events=" + std::to_string(events), "--seed=1"};
}

// The helper saves final weights then initial weights; returns the first half.
std::vector<at::Tensor> Final(const std::vector<at::Tensor>& saved) {
  return std::vector<at::Tensor>(saved.begin(), saved.begin() + saved.size() / 2);
}
std::vector<at::Tensor> Initial(const std::vector<at::Tensor>& saved) {
  return std::vector<at::Tensor>(saved.begin() + saved.size() / 2, saved.end());
}

// One process with batch 2 and two ranks with batch 1 (float64, 3 steps over 4 events: the third
// starts a new epoch), all three processes at once with one thread each, `extra` flags on all.
// Every process saved its weights, and the ranks hold bit-identical ones (same averaged gradients,
// same global BatchNorm statistics).
struct EquivalenceRuns {
  std::vector<at::Tensor> reference;           // the process with the global batch
  std::vector<std::vector<at::Tensor>> ranks;  // the two ranks
};

void RunGlobalAndSharded(const std::vector<std::string>& extra, EquivalenceRuns* out) {
  const int steps = 3;
  std::vector<std::string> global = TrainFlags(2, steps, 4), sharded = TrainFlags(1, steps, 4);
  for (auto* flags : {&global, &sharded}) {
    flags->push_back("--double=1");
    flags->insert(flags->end(), extra.begin(), extra.end());
  }
  const RankGroup reference_group = StartRanks("train", 1, global, /*distributed=*/false);
  const RankGroup ranks_group = StartRanks("train", 2, sharded);
  const auto reference = Collect(reference_group, 400);
  out->ranks = Collect(ranks_group, 400);
  ASSERT_EQ(reference.size(), 1u);
  ASSERT_EQ(out->ranks.size(), 2u);
  out->reference = reference[0];
  ASSERT_FALSE(out->reference.empty());
  ASSERT_EQ(out->ranks[0].size(), out->reference.size());
  ASSERT_EQ(out->ranks[1].size(), out->reference.size());
  EXPECT_EQ(out->reference[0].scalar_type(), at::kDouble);
  for (size_t i = 0; i < out->ranks[0].size(); ++i) {
    EXPECT_TRUE(at::equal(out->ranks[0][i], out->ranks[1][i])) << "ranks diverged at tensor " << i;
  }
}

// Double precision: 2 ranks x batch 1 end with the weights of one process x batch 2, without and
// with the generator's profile loss, whose slice sums are the global batch's (added across ranks,
// its halves split by global row) and whose gradient is scaled for the averaging hook. One test, so
// that the run without the profile loss is also the baseline that shows it changes the training.
TEST(DataParallelTest, TwoRanksEqualOneProcessWithTheGlobalBatchAndTheProfileLoss) {
  EquivalenceRuns without, with;
  ASSERT_NO_FATAL_FAILURE(RunGlobalAndSharded({}, &without));
  ExpectSameWeights(Final(without.ranks[0]), Final(without.reference),
                    "2 ranks x batch 1 vs 1 x batch 2");
  // Not vacuous: training moved the weights by far more than the tolerance.
  double moved = 0;
  const auto before = Initial(without.reference), after = Final(without.reference);
  for (size_t i = 0; i < before.size(); ++i)
    moved = std::max(moved, MaxAbsDiff(before[i], after[i]));
  EXPECT_GT(moved, 1e-3);
  // Both started from rank 0's initial weights, equal to the reference's (same seed).
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(at::equal(Initial(without.ranks[1])[i], before[i])) << "tensor " << i;
  }

  ASSERT_NO_FATAL_FAILURE(RunGlobalAndSharded({"--profile=0.5"}, &with));
  ExpectSameWeights(Final(with.ranks[0]), Final(with.reference), "profile loss, 2 ranks x batch 1");
  // Not vacuous: the profile loss changes the training.
  double differs = 0;
  const auto with_final = Final(with.reference);
  for (size_t i = 0; i < with_final.size(); ++i)
    differs = std::max(differs, MaxAbsDiff(with_final[i], after[i]));
  EXPECT_GT(differs, 1e-6);
}

// Float32 (the production dtype): ranks stay bit-identical to each other; the first step's
// discriminator loss on the real batch (before any update, so free of the amplification above)
// averaged over the ranks equals the global batch's; the statistics count every round.
TEST(DataParallelTest, Float32RanksStayIdenticalAndShardTheGlobalBatch) {
  const int steps = 3;
  const RankGroup reference_group = StartRanks("train", 1, TrainFlags(4, 1), false);
  const RankGroup ranks_group = StartRanks("train", 2, TrainFlags(2, steps));
  const auto reference = Collect(reference_group);
  const auto ranks = Collect(ranks_group);
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_FALSE(ranks[0].empty());
  EXPECT_EQ(ranks[0][0].scalar_type(), at::kFloat);
  for (size_t i = 0; i < ranks[0].size(); ++i) {
    EXPECT_TRUE(at::equal(ranks[0][i], ranks[1][i])) << "ranks diverged at tensor " << i;
  }
  // "step 1 epoch 0 d_real X g Y" lines.
  auto first_d_real = [](const std::string& path) {
    std::ifstream in(path);
    std::string step, one, epoch, zero, key;
    double value = NAN;
    in >> step >> one >> epoch >> zero >> key >> value;
    return key == "d_real" ? value : NAN;
  };
  const double global_loss = first_d_real(reference_group.outs[0] + ".stats");
  const double mean_loss = 0.5 * (first_d_real(ranks_group.outs[0] + ".stats") +
                                  first_d_real(ranks_group.outs[1] + ".stats"));
  ASSERT_TRUE(std::isfinite(global_loss));
  EXPECT_NEAR(mean_loss, global_loss, 1e-5 * std::abs(global_loss));
  EXPECT_NE(first_d_real(ranks_group.outs[0] + ".stats"),
            first_d_real(ranks_group.outs[1] + ".stats"))
      << "both ranks trained on the same samples";

  std::map<std::string, double> stats = ReadStats(ranks_group.outs[0] + ".stats");
  ASSERT_TRUE(stats.count("reductions")) << "no stats from rank 0";
  EXPECT_EQ(stats["step"], steps);
  EXPECT_EQ(stats["epoch"], 1);  // 8 events / global batch 4: 2 steps per epoch
  auto tiny = gan::PresetConfig("tiny");
  ASSERT_TRUE(tiny.ok());
  // Per step: discriminator real + fake, then generator_steps generator updates.
  EXPECT_EQ(stats["reductions"], steps * (2 + tiny->generator_steps));
  const auto state = gan::NewTrainingState(*tiny, 1);
  ASSERT_TRUE(state.ok());
  double g_bytes = 0, d_bytes = 0;
  for (const auto& p : state->generator->parameters()) g_bytes += p.numel() * 4.0;
  for (const auto& p : state->discriminator->parameters()) d_bytes += p.numel() * 4.0;
  EXPECT_EQ(stats["bytes"], steps * (2 * d_bytes + tiny->generator_steps * g_bytes));
  EXPECT_GT(stats["allreduce_seconds"], 0.0);
  EXPECT_GE(stats["exposed_seconds"], 0.0);
}

TEST(DataParallelTest, OverlapOffAndOneBucketGiveTheSameWeights) {
  const int steps = 2;
  std::vector<std::string> flags = TrainFlags(2, steps);
  flags.push_back("--overlap=0");
  flags.push_back("--bucket=100000000");
  const RankGroup overlap_group = StartRanks("train", 2, TrainFlags(2, steps));
  const RankGroup serial_group = StartRanks("train", 2, flags);
  const auto overlap = Collect(overlap_group);
  const auto serial = Collect(serial_group);
  ASSERT_FALSE(overlap[0].empty());
  ASSERT_FALSE(serial[0].empty());
  // Gloo sums element by element in the same order whatever the bucketing, so the bits agree.
  for (size_t i = 0; i < overlap[0].size(); ++i) {
    EXPECT_TRUE(at::equal(overlap[0][i], serial[0][i])) << "tensor " << i;
  }
}

TEST(DataParallelTest, BroadcastMakesDifferentlySeededRanksIdentical) {
  const auto ranks =
      RunRanks("broadcast", 2, {"--events=12", "--batch=2"}, true, {"--seed=1", "--seed=2"});
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_FALSE(ranks[0].empty());
  ASSERT_EQ(ranks[0].size(), ranks[1].size());
  const size_t n = (ranks[0].size() - 1) / 2;  // before..., after..., next draw
  bool differed = false;
  for (size_t i = 0; i < n; ++i) differed |= !at::equal(ranks[0][i], ranks[1][i]);
  EXPECT_TRUE(differed) << "seeds 1 and 2 should initialise differently";
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(at::equal(ranks[1][n + i], ranks[0][i])) << "rank 1 tensor " << i;
    EXPECT_TRUE(at::equal(ranks[0][n + i], ranks[0][i])) << "rank 0 changed tensor " << i;
  }
  EXPECT_TRUE(at::equal(ranks[0].back(), ranks[1].back())) << "random streams not synchronised";
}

TEST(SyncBatchNormTest, MatchesOneBatchNormOverTheConcatenatedBatch) {
  const int64_t local = 3;
  const auto ranks = RunRanks("syncbn", 2, {"--batch=" + std::to_string(local)});
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(ranks[0].size(), 7u);
  ASSERT_EQ(ranks[1].size(), 7u);
  // The reference: the helper's seeded global input through one torch BatchNorm3d.
  at::manual_seed(11);
  const at::Tensor x_all = (at::randn({2 * local, 3, 5, 4, 3}) * 2 + 0.5).set_requires_grad(true);
  const at::Tensor g_all = at::randn_like(x_all);
  torch::nn::BatchNorm3d bn(torch::nn::BatchNorm3dOptions(3).eps(1e-3).momentum(0.1));
  {
    at::NoGradGuard no_grad;
    bn->weight.copy_(at::tensor({1.5f, 0.5f, -1.0f}));
    bn->bias.copy_(at::tensor({0.1f, -0.2f, 0.3f}));
  }
  bn->train();
  const at::Tensor y = bn->forward(x_all);
  (y * g_all).sum().backward();
  const at::Tensor y_sync = at::cat({ranks[0][0], ranks[1][0]});
  const at::Tensor dx_sync = at::cat({ranks[0][1], ranks[1][1]});
  EXPECT_LT(MaxAbsDiff(y_sync, y), 1e-5);
  EXPECT_LT(MaxAbsDiff(dx_sync, x_all.grad()), 1e-5);
  // Each rank holds its share of the affine gradients; their sum is the global gradient.
  EXPECT_LT(MaxAbsDiff(ranks[0][2] + ranks[1][2], bn->weight.grad()), 1e-4);
  EXPECT_LT(MaxAbsDiff(ranks[0][3] + ranks[1][3], bn->bias.grad()), 1e-4);
  EXPECT_FALSE(at::allclose(ranks[0][2], bn->weight.grad()));  // a share, not the total
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(MaxAbsDiff(ranks[r][4], bn->running_mean), 1e-6) << "rank " << r;
    EXPECT_LT(MaxAbsDiff(ranks[r][5], bn->running_var), 1e-5) << "rank " << r;
    EXPECT_EQ(ranks[r][6].item<int64_t>(), bn->num_batches_tracked.item<int64_t>());
  }
  // Local statistics would differ clearly (the halves have different moments).
  torch::nn::BatchNorm3d half(torch::nn::BatchNorm3dOptions(3).eps(1e-3).momentum(0.1));
  {
    at::NoGradGuard no_grad;
    half->weight.copy_(bn->weight);
    half->bias.copy_(bn->bias);
  }
  EXPECT_GT(MaxAbsDiff(half->forward(x_all.detach().slice(0, 0, local)), ranks[0][0]), 1e-3);
}

TEST(CommunicatorTest, CollectivesOverMixedTensorLists) {
  const auto ranks = RunRanks("collectives", 2, {});
  ASSERT_EQ(ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].size(), 6u) << "rank " << r;
    const auto& t = ranks[r];
    EXPECT_TRUE(at::equal(t[0], at::full({3, 2}, 3.0f)));                 // 1 + 2
    EXPECT_TRUE(at::equal(t[1], at::full({5}, int64_t{30}, at::kLong)));  // 10 + 20
    EXPECT_TRUE(at::allclose(t[2], at::full({2}, 0.75, at::kDouble)));    // 1/4 + 2/4
    // The non-contiguous view (first two columns) was summed in place; the rest untouched.
    EXPECT_TRUE(at::equal(t[3].slice(1, 0, 2), at::full({4, 2}, 3.0f)));
    EXPECT_TRUE(at::equal(t[3].slice(1, 2, 4), at::full({4, 2}, float(r + 1))));
    EXPECT_TRUE(at::equal(t[4], at::arange(6, at::kFloat) * 2));  // from rank 1 (world - 1)
    EXPECT_TRUE(at::equal(t[5], at::full({2}, int64_t{2}, at::kLong)));
  }
}

TEST(CommunicatorTest, RendezvousWithNobodyListeningFailsWithinTheTimeout) {
  CommunicatorOptions o;
  o.rendezvous_host = "127.0.0.1";
  o.rendezvous_port = FreePort();  // nothing listens there
  o.rank = 1;
  o.world_size = 2;
  o.timeout = absl::Seconds(2);
  const auto start = Clock::now();
  auto comm = Communicator::Connect(o);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status()) || absl::IsUnavailable(comm.status()))
      << comm.status();
  EXPECT_NE(comm.status().message().find("127.0.0.1:" + std::to_string(o.rendezvous_port)),
            std::string::npos)
      << comm.status();
  EXPECT_LT(seconds, 10.0) << "rendezvous hung past its 2 s timeout";
}

TEST(CommunicatorTest, RankZeroAloneTimesOutWaitingForPeers) {
  CommunicatorOptions o;
  o.rendezvous_host = "127.0.0.1";
  o.rendezvous_port = FreePort();
  o.rank = 0;
  o.world_size = 2;
  o.timeout = absl::Seconds(2);
  const auto start = Clock::now();
  auto comm = Communicator::Connect(o);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  EXPECT_NE(comm.status().message().find(std::to_string(o.rendezvous_port)), std::string::npos);
  EXPECT_GE(seconds, 1.5);
  EXPECT_LT(seconds, 10.0);
}

TEST(CommunicatorTest, RejectsBadOptionsAndGpuWithoutCuda) {
  CommunicatorOptions o;
  o.rendezvous_host = "127.0.0.1";
  o.rendezvous_port = 1234;
  o.rank = 2;
  o.world_size = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(Communicator::Connect(o).status()));
  o.rank = 0;
  o.rendezvous_port = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Communicator::Connect(o).status()));
  o.rendezvous_port = 1234;
  for (const std::string& secret :
       {std::string("short"), std::string(64, 'g'), std::string(200, 'a')}) {
    o.secret = secret;
    const auto bad = Communicator::Connect(o);
    EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
    EXPECT_NE(bad.status().message().find("32 to 128 hex"), std::string::npos) << bad.status();
  }
  o.secret.clear();
  o.gpu = true;
  const auto gpu = Communicator::Connect(o);
  EXPECT_TRUE(absl::IsUnimplemented(gpu.status())) << gpu.status();
}

// Connects ranks 0 and 1 of a two-rank group on `port` from two threads with these secrets; each
// rank's result. A connected pair all-reduces once (1 + 2) and then `while_up` runs while the
// group still exists.
std::vector<absl::Status> ConnectPair(int port, const std::string& secret0,
                                      const std::string& secret1, absl::Duration timeout,
                                      const std::function<void()>& while_up = {}) {
  std::vector<absl::Status> result(2);
  std::vector<std::unique_ptr<Communicator>> comms(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      CommunicatorOptions o;
      o.rendezvous_host = "127.0.0.1";
      o.rendezvous_port = port;
      o.rank = r;
      o.world_size = 2;
      o.timeout = timeout;
      o.secret = r == 0 ? secret0 : secret1;
      auto comm = Communicator::Connect(o);
      result[r] = comm.status();
      if (!comm.ok()) return;
      std::vector<at::Tensor> t{at::full({2}, float(r + 1))};
      result[r] = (*comm)->AllReduceSum(t);
      if (result[r].ok() && !at::equal(t[0], at::full({2}, 3.0f))) {
        result[r] = absl::InternalError("wrong sum");
      }
      comms[r] = *std::move(comm);
    });
  }
  for (auto& t : ranks) t.join();
  if (while_up && comms[0] && comms[1]) while_up();
  return result;
}

// Whether `key` exists in the TCPStore on `port`, asked as an outsider holding no secret.
bool OutsiderSeesKey(int port, const std::string& key) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.isServer = false;
  o.waitWorkers = false;
  o.timeout = std::chrono::seconds(5);
  c10d::TCPStore outsider("127.0.0.1", o);
  return outsider.check({key});
}

TEST(CommunicatorTest, OnlyRanksHoldingTheSameSecretFormAGroup) {
  const std::string a(64, 'a'), b(64, 'b');
  // Different secrets (another attempt's rank, or an impostor): neither finds the other.
  const auto start = Clock::now();
  std::vector<absl::Status> apart = ConnectPair(FreePort(), a, b, absl::Seconds(3));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 20.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(apart[r])) << "rank " << r << ": " << apart[r];
  }
  // The same secret: a group. Its keys (Gloo's "<device>/<rank>" addresses) live under the
  // secret, out of reach of a process that can connect to the store but does not hold it; without
  // a secret they would sit at the top, where anyone connecting finds them.
  bool outsider_sees_plain = true, outsider_sees_prefixed = false;
  const int port = FreePort();
  std::vector<absl::Status> together = ConnectPair(port, a, a, absl::Seconds(30), [&] {
    outsider_sees_plain = OutsiderSeesKey(port, "0/0") || OutsiderSeesKey(port, "0/1");
    outsider_sees_prefixed = OutsiderSeesKey(port, a + "/0/0") && OutsiderSeesKey(port, a + "/0/1");
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(together[r].ok()) << "rank " << r << ": " << together[r];
  EXPECT_FALSE(outsider_sees_plain);
  EXPECT_TRUE(outsider_sees_prefixed) << "the group's keys are under its secret";
  bool control_sees_plain = false;
  const int control = FreePort();
  std::vector<absl::Status> open = ConnectPair(control, "", "", absl::Seconds(30), [&] {
    control_sees_plain = OutsiderSeesKey(control, "0/0") && OutsiderSeesKey(control, "0/1");
  });
  EXPECT_TRUE(open[0].ok() && open[1].ok()) << open[0] << " " << open[1];
  EXPECT_TRUE(control_sees_plain) << "Gloo's key names changed: the assertions above test nothing";
}

TEST(CommunicatorTest, SingleRankGroupWorks) {
  CommunicatorOptions o;
  o.rendezvous_host = "127.0.0.1";
  o.rendezvous_port = FreePort();
  o.timeout = absl::Seconds(10);
  auto comm = Communicator::Connect(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<at::Tensor> t{at::ones({3})};
  ASSERT_TRUE((*comm)->AllReduceSum(t).ok());
  EXPECT_TRUE(at::equal(t[0], at::ones({3})));
  EXPECT_TRUE((*comm)->Barrier().ok());
}

// ---------------------------------------------------------------------------------------------
// Sharding and the learning-rate schedule (pure trainer logic, no communication).

TEST(ShardingTest, StepsPerEpochUseTheGlobalBatch) {
  const showers::ShowerSet showers = gan::testing::FixedAngleShowers(12);
  gan::TrainerOptions o;
  o.batch_size = 2;
  o.world_size = 2;
  o.rank = 1;
  auto trainer = gan::Trainer::Create(*gan::PresetConfig("tiny"), showers, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->batch_size(), 2);
  EXPECT_EQ((*trainer)->global_batch_size(), 4);
  EXPECT_EQ((*trainer)->steps_per_epoch(), 3);  // floor(12 / 4)
  o.world_size = 5;
  o.rank = 5;
  EXPECT_TRUE(absl::IsInvalidArgument(
      gan::Trainer::Create(*gan::PresetConfig("tiny"), showers, o).status()));
}

TEST(LearningRateTest, LinearScalingWithWarmup) {
  gan::TrainerOptions o;
  o.world_size = 4;
  const double base = 1e-3;
  // No scaling: the config rate, warm-up or not.
  o.warmup_epochs = 5;
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 0, 0, 10), base);
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 7, 3, 10), base);
  o.scale_lr_with_world_size = true;
  o.warmup_epochs = 0;
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 0, 0, 10), 4e-3);
  o.warmup_epochs = 2;
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 0, 0, 10), base);
  // Halfway through epoch 0 of 2: a quarter of the way from 1e-3 to 4e-3.
  EXPECT_NEAR(gan::ScheduledLearningRate(base, o, 0, 5, 10), 1.75e-3, 1e-15);
  EXPECT_NEAR(gan::ScheduledLearningRate(base, o, 1, 0, 10), 2.5e-3, 1e-15);
  EXPECT_NEAR(gan::ScheduledLearningRate(base, o, 1, 9, 10), 3.85e-3, 1e-15);
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 2, 0, 10), 4e-3);
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 30, 4, 10), 4e-3);
  o.world_size = 1;
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 0, 0, 10), base);
}

TEST(LearningRateTest, CosineDecayOverTheRun) {
  gan::TrainerOptions o;
  o.epochs = 4;
  const double base = 1e-3;
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 2, 0, 10), base);  // constant by default
  o.lr_decay_to = 0.1;
  EXPECT_DOUBLE_EQ(gan::ScheduledLearningRate(base, o, 0, 0, 10), base);
  // Halfway: (0.1 + 0.9 / 2) x base; at the end: 0.1 x base.
  EXPECT_NEAR(gan::ScheduledLearningRate(base, o, 2, 0, 10), 0.55e-3, 1e-15);
  EXPECT_NEAR(gan::ScheduledLearningRate(base, o, 1, 5, 10),
              (0.1 + 0.45 * (1 + std::cos(M_PI * 0.375))) * base, 1e-15);
  EXPECT_NEAR(gan::ScheduledLearningRate(base, o, 4, 0, 10), 1e-4, 1e-15);
  // Decay multiplies the warmed-up, scaled rate.
  o.world_size = 2;
  o.scale_lr_with_world_size = true;
  o.warmup_epochs = 2;
  EXPECT_NEAR(gan::ScheduledLearningRate(base, o, 2, 0, 10), 2e-3 * 0.55, 1e-15);
  // The Trainer refuses a fraction outside (0, 1].
  o = gan::TrainerOptions();
  o.lr_decay_to = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(
      gan::Trainer::Create(*gan::PresetConfig("tiny"), gan::testing::FixedAngleShowers(4), o)
          .status()));
}

TEST(LearningRateTest, TrainerAppliesTheScheduleEveryStep) {
  const showers::ShowerSet showers = gan::testing::FixedAngleShowers(12);
  gan::TrainerOptions o;
  o.batch_size = 2;
  o.world_size = 2;  // a rank trained alone (no communicator needed for the schedule)
  o.rank = 0;
  o.threads = 1;
  o.scale_lr_with_world_size = true;
  o.warmup_epochs = 1;
  const auto config = *gan::PresetConfig("tiny");
  auto trainer = gan::Trainer::Create(config, showers, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_EQ((*trainer)->steps_per_epoch(), 3);
  const double base = config.learning_rate;
  const std::vector<double> want = {base, base * (1 + 1.0 / 3), base * (1 + 2.0 / 3), 2 * base};
  for (double lr : want) {
    EXPECT_NEAR((*trainer)->learning_rate(), lr, 1e-15);
    auto step = (*trainer)->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_NEAR(step->learning_rate, lr, 1e-15);
    for (auto* opt : {(*trainer)->state().generator_optimizer.get(),
                      (*trainer)->state().discriminator_optimizer.get()}) {
      EXPECT_NEAR(static_cast<torch::optim::RMSpropOptions&>(opt->param_groups()[0].options()).lr(),
                  lr, 1e-15);
    }
  }
}

}  // namespace
}  // namespace gantry::distributed
