// TtlCache: a small thread-safe map whose entries expire a fixed time after they were stored; used
// to spare PostgreSQL a query per Generate call (token checks, model resolution).
#ifndef GANTRY_SERVER_TTL_CACHE_H_
#define GANTRY_SERVER_TTL_CACHE_H_

#include <cstddef>
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

  void Put(const std::string& key, Value value, absl::Time now = absl::Now()) {
    if (ttl_ <= absl::ZeroDuration()) return;
    absl::MutexLock lock(&mu_);
    if (entries_.size() >= max_entries_) entries_.clear();
    entries_[key] = Entry{std::move(value), now + ttl_};
  }

  // Forgets everything (after a change this server made: a revoked token, a moved alias).
  void Clear() {
    absl::MutexLock lock(&mu_);
    entries_.clear();
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
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_TTL_CACHE_H_
