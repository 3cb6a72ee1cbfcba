#include "workers/agent/daemon_main.h"

#include <signal.h>

#include <atomic>
#include <ctime>
#include <iostream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/log.h"
#include "base/metrics/metrics_registry.h"
#include "base/signals.h"
#include "workers/agent/daemon_metrics.h"
#include "workers/agent/worker_agent.h"
#include "workers/runner/dataset_cache.h"

namespace gantry::agent {
namespace {

// Threads that libraries start before main (OpenBLAS's pool in gantry-worker) do not block
// SIGTERM/SIGINT; a signal the kernel delivers to one of them runs this handler instead of
// killing the process, and the signal thread picks it up.
volatile sig_atomic_t g_stop_signal = 0;
void RecordStopSignal(int sig) { g_stop_signal = sig; }

// What the daemon reports of its dataset cache (RegisterRequest.cached_datasets, Heartbeat
// cached_datasets and cache_bytes): a DatasetCache summary re-read at most every `interval`, since
// every read opens each entry's metadata file. Thread-safe.
class CacheReport {
 public:
  CacheReport(std::unique_ptr<runner::DatasetCache> cache, absl::Duration interval)
      : cache_(std::move(cache)), interval_(interval) {}

  runner::DatasetCacheSummary Get() {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (now - read_at_ >= interval_) {
      summary_ = cache_->Summary();
      read_at_ = now;
    }
    return summary_;
  }

 private:
  const std::unique_ptr<runner::DatasetCache> cache_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  runner::DatasetCacheSummary summary_ ABSL_GUARDED_BY(mu_);
  absl::Time read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The dataset cache of <cache-dir> as a part of every daemon: at start it is evicted down to
// --cache-max-bytes (entries pinned by ranks that survived a daemon restart stay), then reported
// through the agent's register and heartbeat sources.
class DatasetCacheExtension final : public DaemonExtension {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonExtension>> Create(const AgentOptions& options) {
    runner::DatasetCacheOptions cache_options;
    cache_options.cache_dir = options.cache_dir;
    cache_options.max_bytes = options.cache_max_bytes;
    absl::StatusOr<std::unique_ptr<runner::DatasetCache>> cache =
        runner::DatasetCache::Create(cache_options);
    if (!cache.ok()) {
      return absl::Status(cache.status().code(),
                          absl::StrCat("dataset cache: ", cache.status().message()));
    }
    return std::unique_ptr<DaemonExtension>(
        new DatasetCacheExtension(*std::move(cache), options.cache_max_bytes));
  }

  absl::Status Start(WorkerAgent& agent) override {
    cache_->EvictToLimit();
    const runner::DatasetCacheSummary at_start = cache_->Summary();
    GANTRY_LOG(INFO) << "dataset cache " << cache_->dir() << ": " << at_start.keys.size()
                     << " datasets, " << at_start.bytes << " bytes (limit " << max_bytes_ << ")";
    auto report = std::make_shared<CacheReport>(std::move(cache_), absl::Seconds(5));
    agent.AddRegisterSource([report](gantry::v1::RegisterRequest& request) {
      for (const std::string& key : report->Get().keys) request.add_cached_datasets(key);
    });
    agent.AddHeartbeatSource([report](gantry::v1::Heartbeat& heartbeat) {
      const runner::DatasetCacheSummary summary = report->Get();
      for (const std::string& key : summary.keys) heartbeat.add_cached_datasets(key);
      heartbeat.set_cache_bytes(summary.bytes);
    });
    const int64_t max_bytes = max_bytes_;
    metrics_collector_ = metrics::ProcessMetrics().AddCollector(
        [report, max_bytes] { RecordDaemonCache(report->Get(), max_bytes); });
    return absl::OkStatus();
  }

  void Stop() override {
    if (metrics_collector_ != 0) metrics::ProcessMetrics().RemoveCollector(metrics_collector_);
    metrics_collector_ = 0;
  }

 private:
  DatasetCacheExtension(std::unique_ptr<runner::DatasetCache> cache, int64_t max_bytes)
      : cache_(std::move(cache)), max_bytes_(max_bytes) {}

  std::unique_ptr<runner::DatasetCache> cache_;
  const int64_t max_bytes_;
  int64_t metrics_collector_ = 0;  // in metrics::ProcessMetrics()
};

}  // namespace

int DaemonMain(AgentOptions options, const std::vector<DaemonExtensionFactory>& extensions) {
  // Signals are taken synchronously by one thread; every other thread (gRPC's, the supervisors')
  // inherits the blocked mask. Rank processes unblock them before exec.
  const sigset_t signals = BlockTerminationSignals();
  struct sigaction record {};
  record.sa_handler = RecordStopSignal;
  sigaction(SIGTERM, &record, nullptr);
  sigaction(SIGINT, &record, nullptr);

  // The dataset cache is part of every daemon; the executable adds the rest (serving).
  std::vector<DaemonExtensionFactory> factories = {DatasetCacheExtension::Create};
  factories.insert(factories.end(), extensions.begin(), extensions.end());
  std::vector<std::unique_ptr<DaemonExtension>> parts;
  for (const DaemonExtensionFactory& make : factories) {
    absl::StatusOr<std::unique_ptr<DaemonExtension>> part = make(options);
    if (!part.ok()) {
      GANTRY_LOG(ERROR) << part.status().message();
      return 1;
    }
    if (*part != nullptr) parts.push_back(*std::move(part));
  }
  const absl::Duration idle_exit_after = options.idle_exit_after;
  WorkerAgent agent(std::move(options));
  for (auto& part : parts) {
    if (absl::Status st = part->Start(agent); !st.ok()) {
      GANTRY_LOG(ERROR) << st.message();
      for (auto& started : parts) {
        if (started.get() == part.get()) break;
        started->Stop();
      }
      return 1;
    }
  }
  std::atomic<bool> done{false};
  // SIGTERM is a preemption notice (spot reclaim, node drain): ranks get the preemption grace to
  // checkpoint. SIGINT, or a second SIGTERM, stops them at once.
  std::thread signal_thread([&] {
    bool preempting = false;
    absl::Time busy_at = absl::Now();  // the idle exit counts from the start or the last rank
    while (!done.load()) {
      if (idle_exit_after > absl::ZeroDuration() && !preempting) {
        if (agent.RunningRanks() > 0) {
          busy_at = absl::Now();
        } else if (absl::Now() - busy_at >= idle_exit_after) {
          GANTRY_LOG(INFO) << "no rank for " << absl::FormatDuration(idle_exit_after)
                           << " (--idle-exit-after): exiting";
          agent.Stop();
          return;
        }
      }
      timespec timeout{0, 200 * 1000 * 1000};
      int sig = sigtimedwait(&signals, nullptr, &timeout);
      if (sig <= 0 && g_stop_signal != 0) {
        sig = g_stop_signal;
        g_stop_signal = 0;
      }
      if (sig == SIGTERM && !preempting) {
        GANTRY_LOG(WARNING) << "SIGTERM (preemption notice): ranks checkpoint and stop";
        preempting = true;
        agent.Preempt("SIGTERM");
      } else if (sig == SIGINT || sig == SIGTERM) {
        GANTRY_LOG(INFO) << "signal " << sig << ", stopping ranks and exiting";
        agent.Stop();
        return;
      }
    }
  });
  const absl::Status status = agent.Run();
  done.store(true);
  signal_thread.join();
  for (auto& part : parts) part->Stop();
  if (!status.ok()) {
    GANTRY_LOG(ERROR) << "the server refused this worker: " << status.ToString();
    return 1;
  }
  return 0;
}

}  // namespace gantry::agent
