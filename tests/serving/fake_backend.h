// FakeBackend: a BatchBackend for pure-logic tests of the batcher and the model cache: shower
// cells are a formula of (seed, index, energy); it records every batch, can be held at a gate,
// made slow or made to fail, and says when it is destroyed.
#ifndef GANTRY_TESTS_SERVING_FAKE_BACKEND_H_
#define GANTRY_TESTS_SERVING_FAKE_BACKEND_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "workers/serving/batch_backend.h"

namespace gantry::serving::testing {

class FakeBackend : public BatchBackend {
 public:
  static constexpr int64_t kCells = 8;  // 2x2x2 showers

  explicit FakeBackend(int64_t memory_bytes = 1000, std::atomic<int>* destroyed = nullptr)
      : memory_bytes_(memory_bytes), destroyed_(destroyed) {
    traits_.grid = {2, 2, 2};
  }
  ~FakeBackend() override {
    if (destroyed_ != nullptr) ++*destroyed_;
  }

  // The value of cell `cell` of a shower.
  static float Cell(const ShowerSpec& s, int64_t cell) {
    return static_cast<float>(s.seed % 1000) * 1000.0f + static_cast<float>(s.index) +
           s.energy_gev * 1e-3f + static_cast<float>(cell) * 0.25f;
  }

  absl::Status RunBatch(const std::vector<ShowerSpec>& showers, float* out) override {
    {
      absl::MutexLock lock(&mu_);
      batches_.push_back(showers);
      ++started_;
      mu_.Await(absl::Condition(
          +[](FakeBackend* b) ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->open_; }, this));
    }
    if (delay_ > absl::ZeroDuration()) absl::SleepFor(delay_);
    if (fail_) return absl::InternalError("fake backend failure");
    for (size_t i = 0; i < showers.size(); ++i) {
      for (int64_t c = 0; c < kCells; ++c) out[i * kCells + c] = Cell(showers[i], c);
    }
    return absl::OkStatus();
  }
  const ModelTraits& traits() const override { return traits_; }
  int64_t memory_bytes() const override { return memory_bytes_; }

  // Batches block at their start while the gate is closed.
  void CloseGate() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void OpenGate() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits until `n` batches have started.
  bool WaitStarted(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto cond = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }
  std::vector<std::vector<ShowerSpec>> batches() const {
    absl::MutexLock lock(&mu_);
    return batches_;
  }
  int64_t showers_run() const {
    absl::MutexLock lock(&mu_);
    int64_t n = 0;
    for (const auto& b : batches_) n += static_cast<int64_t>(b.size());
    return n;
  }
  void set_delay(absl::Duration d) { delay_ = d; }
  void set_fail(bool f) { fail_ = f; }

 private:
  ModelTraits traits_;
  int64_t memory_bytes_;
  std::atomic<int>* destroyed_;
  absl::Duration delay_ = absl::ZeroDuration();
  std::atomic<bool> fail_{false};
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<ShowerSpec>> batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::serving::testing

#endif  // GANTRY_TESTS_SERVING_FAKE_BACKEND_H_
