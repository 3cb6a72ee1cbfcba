#include "server/worker_service.h"

#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "server/requests/field_checks.h"
#include "server/requests/worker_requests.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

constexpr size_t kFetchChunkBytes = 1 << 20;

}  // namespace

grpc::Status WorkerService::Register(grpc::ServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) {
  return backend_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateRegister(*request));
    ASSIGN_OR_RETURN(std::string id, backend_.workers->Upsert(*request));
    absl::StatusOr<v1::WorkerInfo> stored = backend_.workers->Get(id);
    sessions_.OnRegister(id, *request, stored.ok() && stored->draining());
    response->set_worker_id(id);
    response->set_heartbeat_interval_ms(backend_.options.heartbeat_interval_ms);
    response->set_lease_timeout_ms(backend_.options.lease_timeout_ms);
    return absl::OkStatus();
  });
}

grpc::Status WorkerService::Connect(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ServerMessage, v1::WorkerMessage>* stream) {
  return backend_.Serve(context, [&](const Principal&) -> absl::Status {
    v1::WorkerMessage message;
    if (!stream->Read(&message)) {
      return absl::InvalidArgumentError("hello: the stream ended before the hello");
    }
    if (!message.has_hello()) {
      return absl::InvalidArgumentError("hello: the first message must be a hello");
    }
    const std::string id = message.hello().worker_id();
    if (id.empty()) {
      return absl::InvalidArgumentError("hello.worker_id: is missing; call Register first");
    }
    absl::StatusOr<v1::WorkerInfo> worker = backend_.workers->Get(id);
    if (!worker.ok()) {
      return absl::Status(
          worker.status().code(),
          absl::StrCat("hello.worker_id: ", worker.status().message(), "; call Register first"));
    }
    std::shared_ptr<WorkerLink> link = sessions_.OnConnect(id, message.hello());
    // Only this thread writes to the stream: acknowledgements, assignments and cancellations all
    // go through the link.
    std::thread writer([&stream, link] {
      while (!link->closed()) {
        std::optional<v1::ServerMessage> out = link->Next(absl::Milliseconds(200));
        if (out.has_value() && !stream->Write(*out)) break;
      }
    });
    absl::Status result = absl::OkStatus();
    while (!backend_.shutting_down && stream->Read(&message)) {
      if (message.has_hello()) {
        result = absl::InvalidArgumentError("hello: only the first message may be a hello");
        break;
      }
      if (!message.has_heartbeat()) {
        // A message about one job never ends the worker's stream: it is logged and dropped.
        if (absl::Status st = sessions_.OnWorkerMessage(id, message); !st.ok()) {
          std::cerr << "gantry-server: dropped a message of worker " << worker->name() << ": " << st
                    << "\n";
        }
        continue;
      }
      const v1::Heartbeat& hb = message.heartbeat();
      if (hb.free_slots() < 0 || hb.free_slots() > worker->slots()) {
        result = absl::InvalidArgumentError(absl::StrCat(
            "heartbeat.free_slots: is ", hb.free_slots(), "; it must be in 0..", worker->slots()));
        break;
      }
      std::vector<std::string> cached(hb.cached_datasets().begin(), hb.cached_datasets().end());
      result = backend_.workers->Heartbeat(id, hb.free_slots(), cached, absl::Now());
      if (result.ok()) result = sessions_.OnHeartbeat(id, hb);
      if (!result.ok()) break;
      v1::ServerMessage ack;
      ack.mutable_ack()->set_server_time_ms(absl::ToUnixMillis(absl::Now()));
      link->Send(std::move(ack));
    }
    sessions_.OnDisconnect(link);
    writer.join();
    backend_.workers->MarkDisconnected(id).IgnoreError();
    return result;
  });
}

grpc::Status WorkerService::UploadCheckpoint(
    grpc::ServerContext* context, grpc::ServerReader<v1::UploadCheckpointRequest>* reader,
    v1::UploadCheckpointResponse* response) {
  return backend_.Serve(context, [&](const Principal&) -> absl::Status {
    v1::UploadCheckpointRequest message;
    if (!reader->Read(&message) || !message.has_header()) {
      return absl::InvalidArgumentError("header: the first message must carry the header");
    }
    const v1::CheckpointHeader header = message.header();
    RETURN_IF_ERROR(ValidateCheckpointHeader(header, backend_.options.max_checkpoint_bytes));
    ASSIGN_OR_RETURN(v1::Job job, backend_.jobs->Get("", header.job_id()));
    if (header.attempt() < job.attempt()) {
      return absl::FailedPreconditionError(
          absl::StrCat("header.attempt: ", header.attempt(), " is an earlier attempt of job ",
                       header.job_id(), " (now ", job.attempt(), "); its checkpoint is not kept"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<storage::BlobWriter> writer, backend_.blobs->NewWriter());
    while (reader->Read(&message)) {
      if (!message.has_chunk()) {
        return absl::InvalidArgumentError("chunk: only the first message may carry a header");
      }
      if (static_cast<int64_t>(message.chunk().size()) > kMaxUploadChunkBytes ||
          writer->bytes_written() + static_cast<int64_t>(message.chunk().size()) >
              header.size_bytes()) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk: chunks must be at most ", kMaxUploadChunkBytes,
                         " bytes and add up to header.size_bytes (", header.size_bytes(), ")"));
      }
      RETURN_IF_ERROR(writer->Append(message.chunk()));
    }
    if (writer->bytes_written() != header.size_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("header.size_bytes: ", header.size_bytes(),
                                                     " but the stream ended after ",
                                                     writer->bytes_written(), " bytes"));
    }
    ASSIGN_OR_RETURN(storage::BlobInfo blob, writer->Commit(header.sha256()));
    v1::JobEvent event;
    v1::CheckpointSaved* saved = event.mutable_checkpoint_saved();
    saved->set_epoch(header.epoch());
    saved->set_step(header.step());
    saved->set_sha256(blob.sha256);
    saved->set_size_bytes(blob.size_bytes);
    RETURN_IF_ERROR(
        backend_.jobs->RecordCheckpoint(header.job_id(), header.attempt(), *saved).status());
    // Retention: the job's older checkpoints beyond keep_last go, unless a model or another job's
    // checkpoint uses the same blob (the job's newest, what a restart resumes from, always stays).
    absl::StatusOr<std::vector<std::string>> expired = backend_.jobs->ExpireCheckpoints(
        header.job_id(), job.spec().checkpoint_policy().keep_last());
    if (expired.ok()) {
      for (const std::string& sha : *expired) {
        if (absl::Status st = backend_.blobs->Remove(sha); !st.ok()) {
          std::cerr << "gantry-server: cannot remove the expired checkpoint " << sha << " of "
                    << header.job_id() << ": " << st << "\n";
        }
      }
    }
    response->set_sha256(blob.sha256);
    response->set_size_bytes(blob.size_bytes);
    return absl::OkStatus();
  });
}

grpc::Status WorkerService::FetchCheckpoint(grpc::ServerContext* context,
                                            const v1::FetchCheckpointRequest* request,
                                            grpc::ServerWriter<v1::CheckpointChunk>* writer) {
  return backend_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateSha256(request->sha256(), "sha256"));
    if (request->offset() < 0) return absl::InvalidArgumentError("offset: must be >= 0");
    ASSIGN_OR_RETURN(int64_t size, backend_.blobs->Size(request->sha256()));
    if (request->offset() > size) {
      return absl::OutOfRangeError(absl::StrCat(
          "offset: ", request->offset(), " is past the end of the checkpoint (", size, " bytes)"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<storage::BlobReader> blob,
                     backend_.blobs->Open(request->sha256(), request->offset()));
    bool first = true;
    while (true) {
      if (context->IsCancelled()) return absl::CancelledError("the client cancelled the fetch");
      v1::CheckpointChunk chunk;
      chunk.set_offset(blob->offset());
      chunk.set_total_bytes(size);
      ASSIGN_OR_RETURN(*chunk.mutable_data(), blob->Read(kFetchChunkBytes));
      const bool end = chunk.data().empty();
      if (end && !first) return absl::OkStatus();
      first = false;
      if (!writer->Write(chunk)) return absl::OkStatus();
      if (end) return absl::OkStatus();
    }
  });
}

}  // namespace gantry::server
