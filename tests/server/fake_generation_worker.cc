#include "tests/server/fake_generation_worker.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "base/sha256.h"

namespace gantry::testing {

namespace v1 = ::gantry::v1;

FakeGenerationWorker::FakeGenerationWorker(std::string secret) : secret_(std::move(secret)) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(this);
  builder.SetMaxSendMessageSize(-1);
  server_ = builder.BuildAndStart();
  endpoint_ = "127.0.0.1:" + std::to_string(port);
}

FakeGenerationWorker::~FakeGenerationWorker() {
  released_ = true;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

std::string FakeGenerationWorker::last_authorization() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_authorization_;
}

v1::WorkerGenerateRequest FakeGenerationWorker::last_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_request_;
}

v1::WorkerExportRequest FakeGenerationWorker::last_export_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_export_request_;
}

std::string FakeGenerationWorker::ExportPayload(int64_t size) {
  std::string bytes(static_cast<size_t>(size), '\0');
  for (int64_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + i / 977) & 0xff);
  return bytes;
}

grpc::Status FakeGenerationWorker::Export(grpc::ServerContext* context,
                                          const v1::WorkerExportRequest* request,
                                          grpc::ServerWriter<v1::ExportModelChunk>* writer) {
  ++export_calls_;
  std::string auth;
  auto it = context->client_metadata().find("authorization");
  if (it != context->client_metadata().end()) auth.assign(it->second.data(), it->second.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_authorization_ = auth;
    last_export_request_ = *request;
  }
  if (auth != "Bearer " + secret_) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong generation secret");
  }
  const ExportMode mode = export_mode_;
  std::string payload = ExportPayload();
  v1::ExportModelChunk chunk;
  v1::ExportMetadata* m = chunk.mutable_metadata();
  m->set_format(request->format());
  m->set_profile(request->profile());
  for (int64_t n : {25, 25, 25}) m->add_grid(n);
  m->set_size_bytes(static_cast<int64_t>(payload.size()));
  m->set_sha256(Sha256Hex(payload));
  m->set_model_ref("not-what-the-server-asked:9");
  v1::ExportTensor* in = m->add_inputs();
  in->set_name("latent");
  in->add_shape(-1);
  in->add_shape(16);
  in->set_element_type("float32");
  v1::ExportTensor* out = m->add_outputs();
  out->set_name("shower");
  for (int64_t d : {-1, 25, 25, 25}) out->add_shape(d);
  out->set_element_type("float32");
  if (mode == ExportMode::kWrongSha256) m->set_sha256(Sha256Hex("other bytes"));
  if (mode == ExportMode::kLessThanDeclared) m->set_size_bytes(m->size_bytes() + 1);
  if (mode == ExportMode::kTooLarge) m->set_size_bytes(int64_t{1} << 30);
  if (mode == ExportMode::kMoreThanDeclared) payload.push_back('x');
  if (mode == ExportMode::kDataFirst) {
    v1::ExportModelChunk data;
    data.set_data(payload.substr(0, 1000));
    writer->Write(data);
  }
  if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
  if (mode == ExportMode::kTooLarge) return grpc::Status::OK;
  const int64_t step = mode == ExportMode::kHugeChunk ? (int64_t{4} << 20) : (int64_t{1} << 20);
  for (int64_t offset = 0; offset < static_cast<int64_t>(payload.size()); offset += step) {
    if (mode == ExportMode::kSlow) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    chunk.Clear();
    chunk.set_offset(offset);
    chunk.set_data(payload.substr(offset, step));
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
  }
  return grpc::Status::OK;
}

std::chrono::system_clock::time_point FakeGenerationWorker::last_deadline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_deadline_;
}

float FakeGenerationWorker::Cell(uint64_t seed, int64_t index, double energy, int cell) {
  return static_cast<float>(seed % 997) + 0.001f * static_cast<float>(index % 1000) +
         static_cast<float>(energy) * 0.01f + 0.1f * static_cast<float>(cell);
}

grpc::Status FakeGenerationWorker::Generate(grpc::ServerContext* context,
                                            const v1::WorkerGenerateRequest* request,
                                            grpc::ServerWriter<v1::GenerateChunk>* writer) {
  ++calls_;
  ++active_;
  struct Done {
    std::atomic<int>& active;
    ~Done() { --active; }
  } done{active_};
  std::string auth;
  auto it = context->client_metadata().find("authorization");
  if (it != context->client_metadata().end()) auth.assign(it->second.data(), it->second.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_authorization_ = auth;
    last_request_ = *request;
    last_deadline_ = context->deadline();
  }
  if (auth != "Bearer " + secret_) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong generation secret");
  }
  if (mode_ == Mode::kQueueFull) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "the generation queue is full (8 showers queued); retry later");
  }
  const v1::GenerateRequest& r = request->request();
  const uint64_t seed = r.seed();
  const int64_t count = r.has_list() ? r.list().items_size() : r.range().count();
  const int chunk = r.chunk_showers() > 0 ? r.chunk_showers() : 64;
  const int cells = cells_;
  const int per_shower = cells * cells * cells;
  std::vector<float> values;
  for (int64_t offset = 0; offset < count; offset += chunk) {
    if (context->IsCancelled()) {
      ++cancelled_;
      return grpc::Status::CANCELLED;
    }
    const int64_t n = std::min<int64_t>(chunk, count - offset);
    v1::GenerateChunk out;
    out.add_shape(n);
    for (int i = 0; i < 3; ++i) out.add_shape(cells);
    out.set_offset(offset);
    out.set_model_ref(request->model().model_ref());
    values.assign(n * per_shower, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index = offset + i;
      v1::Condition* c = out.add_conditions();
      if (r.has_list()) {
        *c = r.list().items(index);
      } else {
        const double u = static_cast<double>((seed * 2654435761u + index * 40503u) % 1000) / 999.0;
        c->set_energy_gev(r.range().energy_gev().min() +
                          u * (r.range().energy_gev().max() - r.range().energy_gev().min()));
      }
      for (int k = 0; k < per_shower; ++k) {
        values[i * per_shower + k] = Cell(seed, index, c->energy_gev(), k);
      }
    }
    out.set_showers(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    if (!writer->Write(out)) {
      ++cancelled_;
      return grpc::Status::CANCELLED;
    }
    ++chunks_written_;
    if (mode_ == Mode::kHold) {
      while (!released_ && !context->IsCancelled()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (context->IsCancelled()) {
        ++cancelled_;
        return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while held");
      }
    }
  }
  return grpc::Status::OK;
}

}  // namespace gantry::testing
