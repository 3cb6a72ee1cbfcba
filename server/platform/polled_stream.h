// PolledStream: a server-streaming call on gRPC's callback API whose messages come from polling
// (the database): WatchJob and WatchStudy. Between polls it holds no thread, only an entry in
// a StreamPump.
#ifndef GANTRY_SERVER_PLATFORM_POLLED_STREAM_H_
#define GANTRY_SERVER_PLATFORM_POLLED_STREAM_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/grpc_status.h"
#include "grpcpp/support/server_callback.h"
#include "server/platform/stream_pump.h"

namespace gantry::server {

// Ends a callback-API stream at once with `status` (a refused call). Deletes itself when done.
template <typename Message>
class RefusedStream final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedStream(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// Wakes a PolledStream for a poll now, from any thread (a JobNotifier callback holds one). It
// outlives its stream, so a late wake-up is harmless.
class StreamWaker {
 public:
  explicit StreamWaker(StreamPump& pump) : pump_(pump) {}
  void Wake() {
    changed_.store(true);
    pump_.Wake(step_.load());
  }

 private:
  template <typename Message>
  friend class PolledStream;
  StreamPump& pump_;
  std::atomic<StreamPump::Id> step_{0};  // the stream's waiting step
  std::atomic<bool> changed_{false};      // a poll is due whatever the interval says
};

// How a PolledStream waits and when it ends.
struct PolledStreamSettings {
  absl::Duration poll_interval;  // the fallback for changes no waker signals
  absl::Duration token_recheck;
  // Checks the call's token again; an error ends the stream with it (UNAUTHENTICATED).
  std::function<absl::Status()> recheck_token;
  const std::atomic<bool>* shutting_down = nullptr;  // the stream ends with UNAVAILABLE once set
};

// The stream is a chain of steps with one owner at a time: a poll on a pump thread, then the
// writes of what it found (each started from the previous one's completion), then a wait in the
// pump until the next poll is due (poll_interval), a token check is due (token_recheck), the
// waker fires, the client cancels or the server shuts down. Only the owner calls Finish, so it
// is called once; OnCancel and the waker only set flags and wake the waiting step. Whoever hands
// the stream on (StartWrite, Finish, Schedule) touches nothing of it afterwards: the next owner
// may already be running, and OnDone deletes the stream.
template <typename Message>
class PolledStream final : public grpc::ServerWriteReactor<Message> {
 public:
  // What one poll found.
  struct Batch {
    std::vector<Message> messages;  // written in order
    bool last = false;              // the stream ends (OK) once they are written
    bool more = false;              // more is ready: poll again once they are written
  };
  using Poll = std::function<absl::StatusOr<Batch>()>;

  PolledStream(StreamPump& pump, PolledStreamSettings settings)
      : pump_(pump),
        settings_(std::move(settings)),
        waker_(std::make_shared<StreamWaker>(pump)),
        next_token_check_(absl::Now() + settings_.token_recheck) {}

  std::shared_ptr<StreamWaker> waker() const { return waker_; }

  // Starts polling with `poll` (which owns what the stream holds: its quota slot, its
  // subscription). Call once, after which the stream belongs to gRPC and the pump.
  void Begin(Poll poll) {
    poll_ = std::move(poll);
    Schedule(absl::Now());
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return End(absl::OkStatus());  // the client went away
    if (++next_ < batch_.messages.size()) {
      this->StartWrite(&batch_.messages[next_]);
      return;
    }
    if (batch_.last) return End(absl::OkStatus());
    Schedule(batch_.more ? absl::Now() : std::min(next_poll_, next_token_check_));
  }

  void OnCancel() override {
    cancelled_.store(true);
    waker_->Wake();
  }

  void OnDone() override { delete this; }

 private:
  // Hands the stream to the pump. Once RunAt returns, the step may already have run and ended
  // the stream (deleting it), so nothing of `this` is touched after it: the waker is held by a
  // copy of its pointer.
  void Schedule(absl::Time when) {
    if (cancelled_.load() || settings_.shutting_down->load()) when = absl::InfinitePast();
    StreamPump& pump = pump_;
    const std::shared_ptr<StreamWaker> waker = waker_;
    const StreamPump::Id id = pump.RunAt(when, [this] { Step(); });
    waker->step_.store(id);
    // A wake-up (a change, a cancellation) that read the previous step's id set `changed_` first,
    // so it is not lost.
    if (waker->changed_.load()) pump.Wake(id);
  }

  void Step() {
    if (cancelled_.load()) return End(absl::CancelledError("the client cancelled the watch"));
    if (settings_.shutting_down->load()) {
      return End(absl::UnavailableError("the server is shutting down"));
    }
    const absl::Time now = absl::Now();
    if (now >= next_token_check_) {
      if (absl::Status s = settings_.recheck_token(); !s.ok()) return End(s);
      next_token_check_ = now + settings_.token_recheck;
    }
    // Cleared before the read: a change committed after it sets the flag again.
    const bool changed = waker_->changed_.exchange(false);
    if (!polled_ || changed || now >= next_poll_) {
      polled_ = true;
      absl::StatusOr<Batch> batch = poll_();
      if (!batch.ok()) return End(batch.status());
      next_poll_ = absl::Now() + settings_.poll_interval;
      batch_ = *std::move(batch);
      next_ = 0;
      if (!batch_.messages.empty()) {
        this->StartWrite(&batch_.messages[0]);
        return;
      }
      if (batch_.last) return End(absl::OkStatus());
      if (batch_.more) return Schedule(absl::Now());
    }
    Schedule(std::min(next_poll_, next_token_check_));
  }

  void End(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }

  StreamPump& pump_;
  const PolledStreamSettings settings_;
  const std::shared_ptr<StreamWaker> waker_;
  std::atomic<bool> cancelled_{false};
  // Used by the step that owns the stream only.
  Poll poll_;
  Batch batch_;
  size_t next_ = 0;  // the message of batch_ being written
  bool polled_ = false;
  absl::Time next_poll_ = absl::InfinitePast();
  absl::Time next_token_check_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_POLLED_STREAM_H_
