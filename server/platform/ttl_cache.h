// TtlCache: a small thread-safe map whose entries expire a fixed time after they were stored; used
// to spare PostgreSQL a query per Generate call (token checks, model resolution).
#ifndef GANTRY_SERVER_PLATFORM_TTL_CACHE_H_
#define GANTRY_SERVER_PLATFORM_TTL_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gantry::server {

// Thread-safe. A zero `ttl` disables the cache (Get always misses, Put does nothing). When
// `max_entries` is reached the whole cache is dropped (cheap, and enough for a cache of hot keys).
// A caller that looks a value up elsewhere takes Generation() before the lookup and passes it to
// Put: a value read before a Clear() is then not stored after it.
template <typename Value>
class TtlCache {
 public:
  TtlCache(absl::Duration ttl, size_t max_entries) : ttl_(ttl), max_entries_(max_entries) {}

  std::optional<Value> Get(const std::string& key, absl::Time now = absl::Now()) const {
    if (ttl_ <= absl::ZeroDuration()) return std::nullopt;
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end() || now >= it->second.expires) return std::nullopt;
    return it->second.value;
  }

  uint64_t Generation() const {
    absl::MutexLock lock(&mu_);
    return generation_;
  }

  void Put(const std::string& key, Value value, uint64_t generation, absl::Time now = absl::Now()) {
    if (ttl_ <= absl::ZeroDuration()) return;
    absl::MutexLock lock(&mu_);
    if (generation != generation_) return;  // cleared since the value was read
    if (entries_.size() >= max_entries_) entries_.clear();
    entries_[key] = Entry{std::move(value), now + ttl_};
  }

  // Forgets everything (after a change this server made: a revoked token, a moved alias).
  void Clear() {
    absl::MutexLock lock(&mu_);
    entries_.clear();
    ++generation_;
  }

  absl::Duration ttl() const { return ttl_; }

 private:
  struct Entry {
    Value value;
    absl::Time expires;
  };
  const absl::Duration ttl_;
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_TTL_CACHE_H_
