#include "server/coordinator/worker_registry.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

void WorkerRegistry::Remember(const std::string& worker_id, const v1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  Known& known = by_id_[worker_id];
  known.request = request;
  ++known.version;
  known.stale = false;
  id_by_name_[request.name()] = worker_id;
}

std::optional<std::string> WorkerRegistry::RegisterFromMemory(const v1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  auto name = id_by_name_.find(request.name());
  if (name == id_by_name_.end()) return std::nullopt;
  Known& known = by_id_[name->second];
  known.request = request;
  ++known.version;
  known.stale = true;
  return name->second;
}

std::optional<v1::WorkerInfo> WorkerRegistry::Find(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(worker_id);
  if (it == by_id_.end()) return std::nullopt;
  const v1::RegisterRequest& r = it->second.request;
  v1::WorkerInfo info;
  info.set_id(worker_id);
  info.set_name(r.name());
  info.set_slots(r.slots());
  info.set_device(r.device());
  info.mutable_labels()->insert(r.labels().begin(), r.labels().end());
  info.set_advertise_host(r.advertise_host());
  info.set_version(r.version());
  return info;
}

std::optional<WorkerRegistry::StaleRow> WorkerRegistry::FindStaleRow(
    const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(worker_id);
  if (it == by_id_.end() || !it->second.stale) return std::nullopt;
  return StaleRow{it->second.request, it->second.version};
}

void WorkerRegistry::RowWritten(const std::string& worker_id, int64_t version) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(worker_id);
  if (it != by_id_.end() && it->second.version == version) it->second.stale = false;
}

std::shared_ptr<WorkerRegistry::Delivery> WorkerRegistry::DeliveryOf(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Delivery>& delivery = deliveries_[worker_id];
  if (delivery == nullptr) delivery = std::make_shared<Delivery>();
  return delivery;
}

}  // namespace gantry::server
