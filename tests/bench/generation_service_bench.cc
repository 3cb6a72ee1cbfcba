// Generation through the whole service: a gRPC client of a running gantry-server whose
// router sends the work to a gantry-worker daemon. Torch-free: it only drives GenerationService.
// Three measurements:
//   bulk        one request for --count showers (default 10,000): showers/s from the call to the
//               end of the stream, and the time to the first chunk;
//   concurrent  --clients threads (default 64) each asking for 1 shower again and again for
//               --seconds: showers/s and p50/p99 latency per request;
//   single      --single sequential 1-shower requests on an idle service: p50/p99 latency.
// With --baseline-ms=X (in-process ms/shower, e.g. gan_generation_bench's generate-end-to-end at
// batch 128, measured in the same run) the ratios to the in-process throughput are printed.
// run_generation_bench.sh starts the stack, registers a 3dgan-25 model and runs both.
//   generation_service_bench --server=HOST:PORT --token=T --model=NAME:VERSION
//       [--mode=all|bulk|concurrent|single] [--count=10000] [--clients=64] [--seconds=20]
//       [--single=200] [--chunk=0] [--emin=10] [--emax=200] [--baseline-ms=X]
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/generation.grpc.pb.h"
#include "tests/bench/bench_flags.h"

namespace {

using gantry::bench::BenchFlag;
using gantry::v1::GenerateChunk;
using gantry::v1::GenerateRequest;
using gantry::v1::GenerationService;
using Clock = std::chrono::steady_clock;

struct Settings {
  std::string token, model;
  double emin = 10, emax = 200;
  int chunk = 0;
  gantry::v1::Precision precision = gantry::v1::PRECISION_FP32;
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds (user + system) this process has used so far.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

// Runs one Generate call to the end. Returns the number of showers received (-1 on an error, which
// is printed) and the time to the first chunk.
int64_t Generate(GenerationService::Stub& stub, const Settings& s, const GenerateRequest& request,
                 double* first_chunk_s = nullptr) {
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + s.token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(30));
  const auto start = Clock::now();
  auto reader = stub.Generate(&context, request);
  GenerateChunk chunk;
  int64_t showers = 0;
  while (reader->Read(&chunk)) {
    if (showers == 0 && first_chunk_s != nullptr) *first_chunk_s = Seconds(start, Clock::now());
    if (chunk.shape_size() > 0) showers += chunk.shape(0);
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "Generate failed: %d %s\n", static_cast<int>(status.error_code()),
                 status.error_message().c_str());
    return -1;
  }
  return showers;
}

GenerateRequest RangeRequest(const Settings& s, int64_t count, uint64_t seed) {
  GenerateRequest request;
  request.set_model(s.model);
  request.mutable_range()->mutable_energy_gev()->set_min(s.emin);
  request.mutable_range()->mutable_energy_gev()->set_max(s.emax);
  request.mutable_range()->set_count(count);
  request.set_seed(seed);
  request.set_chunk_showers(s.chunk);
  request.set_precision(s.precision);
  return request;
}

GenerateRequest OneShower(const Settings& s, double energy, uint64_t seed) {
  GenerateRequest request;
  request.set_model(s.model);
  request.mutable_list()->add_items()->set_energy_gev(energy);
  request.set_seed(seed);
  request.set_precision(s.precision);
  return request;
}

void PrintRatio(const char* what, double showers_per_s, double baseline_ms) {
  if (baseline_ms <= 0) return;
  const double in_process = 1000.0 / baseline_ms;
  std::printf("RESULT %s-ratio %.3f x in-process (%.1f vs %.1f showers/s)\n", what,
              showers_per_s / in_process, showers_per_s, in_process);
}

bool Bulk(GenerationService::Stub& stub, const Settings& s, int64_t count, double baseline_ms) {
  Generate(stub, s, RangeRequest(s, 256, 99));  // warm-up: the worker loads the model
  double first = 0;
  const auto start = Clock::now();
  const double cpu0 = CpuSeconds();
  const int64_t got = Generate(stub, s, RangeRequest(s, count, 1), &first);
  const double seconds = Seconds(start, Clock::now());
  const double client_cpu = CpuSeconds() - cpu0;
  if (got != count) {
    std::fprintf(stderr, "bulk: got %lld of %lld showers\n", static_cast<long long>(got),
                 static_cast<long long>(count));
    return false;
  }
  std::printf(
      "RESULT bulk %lld showers in %.2f s: %.1f showers/s (%.3f ms/shower), first chunk "
      "after %.1f ms, client CPU %.2f s\n",
      static_cast<long long>(count), seconds, count / seconds, 1000.0 * seconds / count,
      1000.0 * first, client_cpu);
  PrintRatio("bulk", count / seconds, baseline_ms);
  return true;
}

bool Concurrent(GenerationService::Stub& stub, const Settings& s, int clients, double seconds,
                double baseline_ms) {
  std::mutex mu;
  std::vector<double> latencies;  // guarded by mu
  std::atomic<int64_t> showers{0}, errors{0};
  std::atomic<bool> measuring{false}, stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::vector<double> mine;
      uint64_t seed = 1000000 * (c + 1);
      while (!stop.load()) {
        const double energy = s.emin + (s.emax - s.emin) * ((seed % 97) / 96.0);
        const auto t0 = Clock::now();
        const int64_t got = Generate(stub, s, OneShower(s, energy, ++seed));
        const double latency = Seconds(t0, Clock::now());
        if (!measuring.load() || stop.load()) continue;
        if (got != 1) {
          ++errors;
          continue;
        }
        ++showers;
        mine.push_back(latency);
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // warm-up: every client has a stream
  measuring = true;
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const int64_t done = showers.load();
  const double elapsed = Seconds(start, Clock::now());
  stop = true;
  for (auto& t : threads) t.join();
  const double rate = done / elapsed;
  std::printf(
      "RESULT concurrent %d clients x 1 shower: %lld requests in %.1f s: %.1f showers/s, "
      "latency p50 %.1f ms p99 %.1f ms, %lld errors\n",
      clients, static_cast<long long>(done), elapsed, rate, 1000 * Percentile(latencies, 0.5),
      1000 * Percentile(latencies, 0.99), static_cast<long long>(errors.load()));
  PrintRatio("concurrent", rate, baseline_ms);
  return errors.load() == 0;
}

bool Single(GenerationService::Stub& stub, const Settings& s, int requests) {
  for (int i = 0; i < 5; ++i) Generate(stub, s, OneShower(s, 100, 7 + i));  // warm-up
  std::vector<double> latencies;
  for (int i = 0; i < requests; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // idle between requests
    const auto t0 = Clock::now();
    if (Generate(stub, s, OneShower(s, 100, 100 + i)) != 1) return false;
    latencies.push_back(Seconds(t0, Clock::now()));
  }
  std::printf("RESULT single idle 1 shower x %d: latency p50 %.1f ms p99 %.1f ms min %.1f ms\n",
              requests, 1000 * Percentile(latencies, 0.5), 1000 * Percentile(latencies, 0.99),
              1000 * *std::min_element(latencies.begin(), latencies.end()));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string server = BenchFlag(argc, argv, "server", "");
  Settings s;
  s.token = BenchFlag(argc, argv, "token", "");
  s.model = BenchFlag(argc, argv, "model", "");
  if (server.empty() || s.model.empty()) {
    std::fprintf(stderr,
                 "usage: %s --server=HOST:PORT --token=T --model=NAME:VERSION [--mode=all|bulk|"
                 "concurrent|single] [--count=10000] [--clients=64] [--seconds=20] [--single=200] "
                 "[--chunk=0] [--emin=10] [--emax=200] [--baseline-ms=X] [--precision=fp32|bf16]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = BenchFlag(argc, argv, "mode", "all");
  s.emin = std::atof(BenchFlag(argc, argv, "emin", "10").c_str());
  s.emax = std::atof(BenchFlag(argc, argv, "emax", "200").c_str());
  s.chunk = std::atoi(BenchFlag(argc, argv, "chunk", "0").c_str());
  const double baseline_ms = std::atof(BenchFlag(argc, argv, "baseline-ms", "0").c_str());
  if (BenchFlag(argc, argv, "precision", "fp32") == "bf16") s.precision = gantry::v1::PRECISION_BF16;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
  auto stub = GenerationService::NewStub(channel);
  bool ok = true;
  if (mode == "all" || mode == "single") {
    ok &= Single(*stub, s, std::atoi(BenchFlag(argc, argv, "single", "200").c_str()));
  }
  if (mode == "all" || mode == "bulk") {
    ok &= Bulk(*stub, s, std::atoll(BenchFlag(argc, argv, "count", "10000").c_str()), baseline_ms);
  }
  if (mode == "all" || mode == "concurrent") {
    ok &= Concurrent(*stub, s, std::atoi(BenchFlag(argc, argv, "clients", "64").c_str()),
                     std::atof(BenchFlag(argc, argv, "seconds", "20").c_str()), baseline_ms);
  }
  return ok ? 0 : 1;
}
