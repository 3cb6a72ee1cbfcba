// Data-parallel scaling: 3dgan-25 training throughput of 2 ranks x T threads against
// 1 rank x T threads on the same per-rank batch, and how much of the gradient all-reduce hides
// behind backward (overlap on vs off). One invocation runs the configurations alternately (A B C A
// B C ...) as real rank processes on loopback, so all see the same machine load.
//   dp_scaling_bench [--preset=3dgan-25] [--batch=32] [--threads=1] [--iters=3] [--warmup=1]
//                    [--rounds=2] [--bucket_bytes=1048576]
// Internally re-executes itself with --role=rank for each rank.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/bench/bench_flags.h"
#include "workers/distributed/communicator.h"
#include "workers/distributed/data_parallel.h"
#include "workers/gan/heap_retention.h"
#include "workers/gan/openmp_wait_policy.h"
#include "workers/gan/trainer.h"

extern char** environ;

namespace gantry::bench {
namespace {

// CPU seconds of this process (all threads, user + system).
double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// One rank: random preprocessed 3dgan-25 data (the same on every rank: shards differ by index),
// warm-up steps, then timed steps. Rank 0 prints "RESULT <samples/s global> <s/step>
// <allreduce s/step> <exposed s/step>".
int Rank(int argc, char** argv) {
  const std::string preset = BenchFlag(argc, argv, "preset", "3dgan-25");
  const int64_t batch = std::atoll(BenchFlag(argc, argv, "batch", "32").c_str());
  const int threads = std::atoi(BenchFlag(argc, argv, "threads", "1").c_str());
  const int iters = std::atoi(BenchFlag(argc, argv, "iters", "3").c_str());
  const int warmup = std::atoi(BenchFlag(argc, argv, "warmup", "1").c_str());
  const int world = std::atoi(BenchFlag(argc, argv, "world", "1").c_str());
  const int rank = std::atoi(BenchFlag(argc, argv, "rank", "0").c_str());
  const int port = std::atoi(BenchFlag(argc, argv, "port", "0").c_str());
  auto config = gan::PresetConfig(preset);
  if (!config.ok()) {
    std::cerr << config.status() << "\n";
    return 1;
  }
  auto state = gan::NewTrainingState(*config, 1);
  if (!state.ok()) {
    std::cerr << state.status() << "\n";
    return 1;
  }
  at::manual_seed(1);
  const int64_t events = batch * world * 4;
  const auto& g = config->grid;
  gan::TrainingTensors data;
  data.images = at::rand({events, 1, g[0], g[1], g[2]}) * 0.01;
  data.energy100 = at::rand({events, 1}) * 4.9 + 0.1;
  data.ecal = data.images.sum({1, 2, 3, 4}).unsqueeze(1);
  gan::TrainerOptions options;
  options.batch_size = batch;
  options.threads = threads;
  options.world_size = world;
  options.rank = rank;
  options.epochs = 1000;
  auto trainer = gan::Trainer::CreateFromTensors(*std::move(state), std::move(data), options);
  if (!trainer.ok()) {
    std::cerr << trainer.status() << "\n";
    return 1;
  }
  std::unique_ptr<distributed::Communicator> comm;
  std::unique_ptr<distributed::DataParallel> dp;
  if (port != 0) {
    distributed::CommunicatorOptions co;
    co.rendezvous_host = "127.0.0.1";
    co.rendezvous_port = port;
    co.rank = rank;
    co.world_size = world;
    auto c = distributed::Communicator::Connect(co);
    if (!c.ok()) {
      std::cerr << c.status() << "\n";
      return 1;
    }
    comm = *std::move(c);
    distributed::DataParallelOptions dpo;
    dpo.overlap = BenchFlag(argc, argv, "overlap", "1") == "1";
    dpo.bucket_bytes = std::atoll(BenchFlag(argc, argv, "bucket_bytes", "1048576").c_str());
    auto attached = distributed::DataParallel::Attach(**trainer, *comm, dpo);
    if (!attached.ok()) {
      std::cerr << attached.status() << "\n";
      return 1;
    }
    dp = *std::move(attached);
  }
  double seconds = 0, cpu_start = 0;
  distributed::DataParallelStats before;
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) cpu_start = CpuSeconds();
    if (i == warmup && dp) before = dp->stats();
    auto step = (*trainer)->Step();
    if (!step.ok()) {
      std::cerr << step.status() << "\n";
      return 1;
    }
    if (i >= warmup) seconds += step->seconds;
  }
  const double cpu = (CpuSeconds() - cpu_start) / iters;
  double allreduce = 0, exposed = 0;
  if (dp) {
    const auto after = dp->stats();
    allreduce = (after.allreduce_seconds - before.allreduce_seconds) / iters;
    exposed = (after.exposed_seconds - before.exposed_seconds) / iters;
  }
  // The same gradient traffic alone, all ranks in step (after a barrier): 2 discriminator rounds
  // and generator_steps generator rounds of 1 MiB buckets. Best of 3.
  double isolated = 0;
  if (comm) {
    int64_t g = 0, d = 0;
    for (const auto& p : (*trainer)->state().generator->parameters()) g += p.numel();
    for (const auto& p : (*trainer)->state().discriminator->parameters()) d += p.numel();
    const int64_t total = 2 * d + config->generator_steps * g;
    const int64_t chunk = (1 << 20) / 4;
    at::Tensor buffer = at::ones({total});
    isolated = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      if (!comm->Barrier().ok()) return 1;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (int64_t off = 0; off < total; off += chunk) {
        std::vector<at::Tensor> one{buffer.slice(0, off, std::min(total, off + chunk))};
        works.push_back(comm->group().allreduce(one));
      }
      for (auto& w : works) w->wait();
      isolated = std::min(
          isolated, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  if (rank == 0) {
    std::printf("RESULT %.4f %.4f %.5f %.5f %.4f %.5f\n", iters * batch * world / seconds,
                seconds / iters, allreduce, exposed, cpu, isolated);
  }
  return 0;
}

struct Result {
  double samples_per_second = 0, step_seconds = 0, allreduce = 0, exposed = 0;
  double cpu_seconds = 0;  // rank 0's CPU time per step (all its threads)
  double isolated = 0;     // one step's gradient all-reduces alone, ranks in step
};

// Spawns the ranks of one configuration and returns rank 0's RESULT.
Result RunConfig(const std::string& self, int world, bool overlap,
                 const std::vector<std::string>& common) {
  const int port = world > 1 ? FreePort() : 0;
  const std::string out = "/tmp/dp_scaling_bench." + std::to_string(::getpid()) + ".out";
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = {self,
                                     "--role=rank",
                                     "--world=" + std::to_string(world),
                                     "--rank=" + std::to_string(r),
                                     "--port=" + std::to_string(port),
                                     std::string("--overlap=") + (overlap ? "1" : "0")};
    args.insert(args.end(), common.begin(), common.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (r == 0) {
      posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    }
    pid_t pid = -1;
    if (posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
      std::cerr << "cannot spawn " << self << "\n";
      std::exit(1);
    }
    posix_spawn_file_actions_destroy(&actions);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "a rank failed\n";
      std::exit(1);
    }
  }
  std::ifstream in(out);
  std::string word;
  Result r;
  while (in >> word) {
    if (word == "RESULT") {
      in >> r.samples_per_second >> r.step_seconds >> r.allreduce >> r.exposed >> r.cpu_seconds >>
          r.isolated;
    }
  }
  std::remove(out.c_str());
  return r;
}

int Drive(int argc, char** argv) {
  const int rounds = std::atoi(BenchFlag(argc, argv, "rounds", "2").c_str());
  std::vector<std::string> common;
  for (const char* f : {"preset", "batch", "threads", "iters", "warmup", "bucket_bytes"}) {
    const std::string v = BenchFlag(argc, argv, f, "");
    if (!v.empty()) common.push_back(std::string("--") + f + "=" + v);
  }
  const std::string self = "/proc/self/exe";
  char path[4096];
  const ssize_t n = ::readlink(self.c_str(), path, sizeof(path) - 1);
  if (n <= 0) return 1;
  path[n] = '\0';
  std::vector<Result> one, two, two_serial;
  for (int r = 1; r <= rounds; ++r) {
    one.push_back(RunConfig(path, 1, true, common));
    two.push_back(RunConfig(path, 2, true, common));
    two_serial.push_back(RunConfig(path, 2, false, common));
    std::printf(
        "round %d: 1 rank %.3f samples/s (%.2f s/step); 2 ranks overlap %.3f samples/s (%.2f "
        "s/step, all-reduce span %.1f ms/step, exposed %.1f ms/step); 2 ranks no overlap %.3f "
        "samples/s (%.2f s/step, all-reduce %.1f ms/step, exposed %.1f ms/step); ratio %.3f "
        "(no overlap %.3f); CPU s/step per rank: 1 rank %.2f, 2 ranks %.2f / %.2f (no "
        "overlap)\n",
        r, one.back().samples_per_second, one.back().step_seconds, two.back().samples_per_second,
        two.back().step_seconds, 1e3 * two.back().allreduce, 1e3 * two.back().exposed,
        two_serial.back().samples_per_second, two_serial.back().step_seconds,
        1e3 * two_serial.back().allreduce, 1e3 * two_serial.back().exposed,
        two.back().samples_per_second / one.back().samples_per_second,
        two_serial.back().samples_per_second / one.back().samples_per_second,
        one.back().cpu_seconds, two.back().cpu_seconds, two_serial.back().cpu_seconds);
    std::fflush(stdout);
  }
  auto mean = [](const std::vector<Result>& v, double Result::*f) {
    double s = 0;
    for (const auto& r : v) s += r.*f;
    return s / static_cast<double>(v.size());
  };
  const double ratio =
      mean(two, &Result::samples_per_second) / mean(one, &Result::samples_per_second);
  const double serial_comm = mean(two_serial, &Result::exposed);
  const double exposed = mean(two, &Result::exposed);
  std::printf(
      "SUMMARY mean of %d rounds: 1 rank %.3f samples/s, 2 ranks %.3f samples/s, ratio %.3f "
      "(target 1.85); no overlap %.3f samples/s (ratio %.3f); all-reduce %.1f ms/step without "
      "overlap, exposed %.1f ms/step with overlap: %.0f%% hidden behind backward\n",
      rounds, mean(one, &Result::samples_per_second), mean(two, &Result::samples_per_second), ratio,
      mean(two_serial, &Result::samples_per_second),
      mean(two_serial, &Result::samples_per_second) / mean(one, &Result::samples_per_second),
      1e3 * serial_comm, 1e3 * exposed,
      serial_comm > 0 ? 100.0 * (1.0 - exposed / serial_comm) : 0.0);
  // On a machine without spare cores the wall-clock ratio measures the contention; the CPU ratio
  // is the throughput ratio if every rank had a core of its own and never waited.
  std::printf(
      "SUMMARY CPU per step and rank: 1 rank %.2f s, 2 ranks %.2f s (overlap), %.2f s (no "
      "overlap): CPU-normalised ratio %.3f (overlap), %.3f (no overlap)\n",
      mean(one, &Result::cpu_seconds), mean(two, &Result::cpu_seconds),
      mean(two_serial, &Result::cpu_seconds),
      2 * mean(one, &Result::cpu_seconds) / mean(two, &Result::cpu_seconds),
      2 * mean(one, &Result::cpu_seconds) / mean(two_serial, &Result::cpu_seconds));
  std::printf("SUMMARY one step's gradient all-reduces alone (ranks in step): %.1f ms\n",
              1e3 * mean(two_serial, &Result::isolated));
  return 0;
}

}  // namespace
}  // namespace gantry::bench

int main(int argc, char** argv) {
  gantry::gan::PreferPassiveOpenMpWait(argv);  // as gantry-worker does
  gantry::gan::RetainFreedHeapMemory();        // large tensors reuse faulted-in pages
  if (gantry::bench::BenchFlag(argc, argv, "role", "") == "rank") {
    return gantry::bench::Rank(argc, argv);
  }
  return gantry::bench::Drive(argc, argv);
}
