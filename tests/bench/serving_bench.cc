// Generation serving on the worker, in-process (no gRPC), 3dgan-25: the batcher against
// the bare generator in the same run.
//   1. baseline: the backend (ShowerGenerator from per-shower counter noise) at batch 128;
//   2. bulk: one request of --bulk showers through the DynamicBatcher (max batch 128);
//   3. concurrency: --clients callers each asking for 1 shower again and again for --seconds,
//      for each --delays value (max_queue_delay, ms): throughput, p50/p99 latency, mean batch;
//   4. idle: single 1-shower requests one after another: p50/p99 latency per delay.
//   serving_bench [--threads=2] [--bulk=1280] [--clients=64] [--seconds=6] [--delays=0,1,2,5,10]
//                 [--idle=40] [--sweep=1,8,16,32,64] [--max-batch=128]
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/bench/bench_flags.h"
#include "workers/gan/checkpoint.h"
#include "workers/serving/dynamic_batcher.h"
#include "workers/serving/torch_backend.h"

namespace {

namespace v1 = ::gantry::v1;
using gantry::bench::BenchFlag;
using gantry::serving::BatcherOptions;
using gantry::serving::DynamicBatcher;
using gantry::serving::GenerationPlan;
using gantry::serving::ModelTraits;
using gantry::serving::ShowerSpec;
using gantry::serving::TorchBackend;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

GenerationPlan Plan(uint64_t seed, int64_t count) {
  v1::WorkerGenerateRequest r;
  r.mutable_model()->set_model_ref("bench:1");
  auto* range = r.mutable_request()->mutable_range();
  range->mutable_energy_gev()->set_min(10);
  range->mutable_energy_gev()->set_max(500);
  range->set_count(count);
  r.mutable_request()->set_seed(seed);
  return *GenerationPlan::Create(r, ModelTraits{});
}

// Reads a request to its end; false on error.
bool Drain(DynamicBatcher::Stream& s) {
  DynamicBatcher::Chunk c;
  while (true) {
    auto p = s.Next(absl::Seconds(60), &c);
    if (!p.ok()) {
      std::cerr << p.status() << "\n";
      return false;
    }
    if (*p == DynamicBatcher::Stream::Poll::kDone) return true;
  }
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = std::atoi(BenchFlag(argc, argv, "threads", "2").c_str());
  const int64_t bulk = std::atoll(BenchFlag(argc, argv, "bulk", "1280").c_str());
  const int clients = std::atoi(BenchFlag(argc, argv, "clients", "64").c_str());
  const double seconds = std::atof(BenchFlag(argc, argv, "seconds", "6").c_str());
  const int idle = std::atoi(BenchFlag(argc, argv, "idle", "40").c_str());
  const int max_batch = std::atoi(BenchFlag(argc, argv, "max-batch", "128").c_str());
  std::vector<double> delays;
  for (absl::string_view d : absl::StrSplit(BenchFlag(argc, argv, "delays", "0,1,2,5,10"), ',')) {
    double ms = 0;
    if (absl::SimpleAtod(d, &ms)) delays.push_back(ms);
  }
  at::set_num_threads(threads);
  auto config = gantry::gan::PresetConfig("3dgan-25");
  auto state = gantry::gan::NewTrainingState(*config, 1);
  if (!state.ok()) {
    std::cerr << state.status() << "\n";
    return 1;
  }
  TorchBackend backend(std::make_unique<gantry::gan::ShowerGenerator>(*config, state->generator));
  const int64_t cells = backend.traits().cells_per_shower();

  // 1. Baseline: batch 128 straight on the backend.
  std::vector<float> out(128 * cells);
  auto baseline = [&] {
    const GenerationPlan plan = Plan(9, 128);
    std::vector<ShowerSpec> specs;
    for (int i = 0; i < 128; ++i) specs.push_back(plan.Shower(i));
    (void)backend.RunBatch(specs, out.data());  // warm-up
    const int rounds = std::max<int64_t>(1, bulk / 128);
    const auto t0 = Clock::now();
    for (int r = 0; r < rounds; ++r) (void)backend.RunBatch(specs, out.data());
    return rounds * 128 / Seconds(t0, Clock::now());
  };
  std::cout << std::fixed;
  const double in_process = baseline();
  // The generator alone at other batch sizes (what --max-batch-size trades).
  for (absl::string_view b :
       absl::StrSplit(BenchFlag(argc, argv, "sweep", "1,8,16,32,64"), ',', absl::SkipEmpty())) {
    int64_t batch = 0;
    if (!absl::SimpleAtoi(b, &batch) || batch < 1 || batch > 128) continue;
    const GenerationPlan plan = Plan(9, batch);
    std::vector<ShowerSpec> specs;
    for (int i = 0; i < batch; ++i) specs.push_back(plan.Shower(i));
    (void)backend.RunBatch(specs, out.data());
    const int rounds = std::max<int64_t>(2, bulk / batch / 2);
    const auto t0 = Clock::now();
    for (int r = 0; r < rounds; ++r) (void)backend.RunBatch(specs, out.data());
    const double rate = rounds * batch / Seconds(t0, Clock::now());
    std::cout << std::setprecision(1) << "RESULT in-process batch " << batch << ": " << rate
              << " showers/s = " << std::setprecision(2) << rate / in_process << "x batch 128\n";
  }
  std::cout << std::fixed << std::setprecision(1) << "RESULT in-process batch 128: " << in_process
            << " showers/s (" << 1000.0 / in_process << " ms/shower, " << threads << " threads)\n";

  // 2. Bulk through the batcher.
  {
    BatcherOptions o;
    o.max_batch_size = max_batch;
    o.max_queue_delay = absl::Milliseconds(2);
    DynamicBatcher batcher(o, &backend, nullptr);
    const auto t0 = Clock::now();
    auto s = batcher.Submit(Plan(1, bulk), absl::InfiniteFuture());
    if (!s.ok() || !Drain(**s)) return 1;
    const double rate = bulk / Seconds(t0, Clock::now());
    const auto st = batcher.stats();
    std::cout << "RESULT bulk " << bulk << " showers through the batcher (max batch " << max_batch
              << "): " << rate << " showers/s = " << std::setprecision(2) << rate / in_process
              << "x in-process (mean batch " << std::setprecision(1)
              << double(st.batched_showers) / st.batches << ")\n";
  }

  // 3. Concurrent 1-shower callers; 4. single shower at idle.
  for (double delay_ms : delays) {
    BatcherOptions o;
    o.max_batch_size = max_batch;
    o.max_queue_delay = absl::Microseconds(delay_ms * 1000);
    DynamicBatcher batcher(o, &backend, nullptr);
    std::atomic<bool> stop{false};
    std::vector<std::vector<double>> latency(clients);
    std::vector<std::thread> callers;
    const auto t0 = Clock::now();
    for (int c = 0; c < clients; ++c) {
      callers.emplace_back([&, c] {
        for (uint64_t k = 1; !stop.load(); ++k) {
          const auto a = Clock::now();
          auto s = batcher.Submit(Plan(c * 1000000 + k, 1), absl::InfiniteFuture());
          if (!s.ok() || !Drain(**s)) return;
          latency[c].push_back(1000.0 * Seconds(a, Clock::now()));
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    for (auto& t : callers) t.join();
    const double elapsed = Seconds(t0, Clock::now());
    std::vector<double> all;
    for (auto& l : latency) all.insert(all.end(), l.begin(), l.end());
    const auto st = batcher.stats();
    const double rate = all.size() / elapsed;
    std::cout << std::setprecision(1) << "RESULT " << clients
              << " concurrent 1-shower callers, delay " << delay_ms << " ms: " << rate
              << " showers/s = " << std::setprecision(2) << rate / in_process
              << "x in-process; latency p50 " << std::setprecision(1) << Percentile(all, 0.5)
              << " ms, p99 " << Percentile(all, 0.99) << " ms; mean batch "
              << double(st.batched_showers) / st.batches << "\n";

    std::vector<double> single;
    for (int i = 0; i < idle; ++i) {
      const auto a = Clock::now();
      auto s = batcher.Submit(Plan(77 + i, 1), absl::InfiniteFuture());
      if (!s.ok() || !Drain(**s)) return 1;
      single.push_back(1000.0 * Seconds(a, Clock::now()));
    }
    std::cout << "RESULT idle single shower, delay " << delay_ms << " ms: p50 "
              << Percentile(single, 0.5) << " ms, p99 " << Percentile(single, 0.99) << " ms\n";
  }
  // The baseline again: a drifting (shared) machine shows up as a different figure.
  const double in_process_end = baseline();
  std::cout << std::setprecision(1) << "RESULT in-process batch 128 at the end: " << in_process_end
            << " showers/s (" << std::setprecision(2) << in_process_end / in_process
            << "x the first)\n";
  return 0;
}
