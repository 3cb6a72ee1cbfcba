// StreamWatchdog: ends client streams that wait too long for their next message (a header that
// never comes, an upload that stops half-way) with DEADLINE_EXCEEDED, from one thread for all.
#ifndef GANTRY_SERVER_PLATFORM_STREAM_WATCHDOG_H_
#define GANTRY_SERVER_PLATFORM_STREAM_WATCHDOG_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/periodic_task.h"
#include "grpcpp/server_context.h"

namespace gantry::server {

// Why a watchdog: a synchronous handler blocked in ServerReader::Read cannot time out by itself,
// and a thread per stream to time it would double the threads a silent tenant holds. One thread
// checks every armed stream each `tick`; a stream past its deadline is cancelled through the core
// API (grpc_call_cancel_with_status on ServerContext::c_call) with DEADLINE_EXCEEDED and the
// watch's message, which the client receives as the call's status; ServerContext::TryCancel would
// show the client only CANCELLED. The handler's Read then returns false, Watch::status() says
// why, and the handler returns, freeing its thread and its tenant's stream slot.
//
// Thread-safe. Start() once; Stop() (or the destructor) ends the thread. Every Watch must be
// destroyed before the watchdog.
class StreamWatchdog {
 public:
  // A stream ends at most one `tick` after its deadline.
  explicit StreamWatchdog(absl::Duration tick);
  ~StreamWatchdog();  // Stop()
  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  void Start() { task_.Start(); }
  // Ends the thread; watches armed later are no longer enforced. Idempotent.
  void Stop() { task_.Stop(); }

  // One stream under watch, held by its handler for as long as it reads; unregisters itself when
  // destroyed. Used from the handler's thread only; movable.
  class Watch {
   public:
    Watch(Watch&& other) noexcept : owner_(other.owner_), id_(other.id_) { other.owner_ = nullptr; }
    Watch& operator=(Watch&&) = delete;
    ~Watch();

    // From now until Disarm (or the next Arm): if `limit` passes, the call is cancelled with
    // DEADLINE_EXCEEDED and `message`. Call it before each blocking Read.
    void Arm(absl::Duration limit, std::string message);
    void Disarm();
    // DEADLINE_EXCEEDED with the message once the watchdog has cancelled the call; OK before.
    absl::Status status() const;

   private:
    friend class StreamWatchdog;
    Watch(StreamWatchdog* owner, uint64_t id) : owner_(owner), id_(id) {}
    StreamWatchdog* owner_;
    uint64_t id_;
  };

  // Registers the call of `context` (which must outlive the returned Watch), disarmed.
  Watch Begin(grpc::ServerContextBase& context);

  // Streams registered now (for tests and metrics).
  int64_t watched() const;

 private:
  struct Entry {
    grpc::ServerContextBase* context;
    absl::Time deadline = absl::InfiniteFuture();  // disarmed
    std::string message;
    bool fired = false;
  };
  // Cancels the calls past their deadline (under mu_, so no Watch goes away meanwhile).
  void CancelExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  PeriodicTask task_;  // last: its thread stops before the members it reads go
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_STREAM_WATCHDOG_H_
