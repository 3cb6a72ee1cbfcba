#include "server/api/worker_service.h"

#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "server/coordinator/worker_inbox.h"
#include "server/requests/field_checks.h"
#include "server/requests/worker_requests.h"
#include "storage/job_repository.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

constexpr size_t kFetchChunkBytes = 1 << 20;
constexpr int kMaxHelloJobs = 1000;

}  // namespace

absl::Status WorkerService::MayTakeName(const v1::RegisterRequest& request,
                                        const std::string& previous_id) {
  ASSIGN_OR_RETURN(std::optional<storage::WorkerIdentity> stored,
                   identities_.FindByName(request.name()));
  if (!stored.has_value()) return absl::OkStatus();
  const storage::WorkerIdentity& w = *stored;
  if (!previous_id.empty() && previous_id == w.worker_id) return absl::OkStatus();  // itself
  const absl::Duration lease = absl::Milliseconds(coordinator_.lease_timeout_ms);
  if (sessions_.Connected(w.worker_id) || (w.connected && absl::Now() - w.last_heartbeat < lease)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "name: worker \"", request.name(),
        "\" is in use by a connected worker; give this worker another --name, or wait until the "
        "other one has been silent for the lease (",
        coordinator_.lease_timeout_ms, " ms)"));
  }
  // A name belongs to its worker while the worker's credential is valid, connected or not: the
  // join token alone must not let anyone step into its identity (and the jobs placed on it).
  if (!w.credential_sha256.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "name: worker \"", request.name(),
        "\" is registered and its credential is valid: only that worker registers under this "
        "name again, showing its credential (gantry-worker keeps it in --credential-file, by "
        "default in --cache-dir). Give this worker another --name, restore that worker's "
        "credential file, or have an admin revoke the old identity first (gantry admin "
        "join-tokens revoke, for the join token that registered it)"));
  }
  return absl::OkStatus();
}

grpc::Status WorkerService::Register(grpc::ServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) {
  return auth_.Serve(context, [&](const Principal& principal) -> absl::Status {
    RETURN_IF_ERROR(ValidateRegister(*request));
    if (request->previous_credential().size() > 512) {
      return checks::Invalid("previous_credential", "is longer than 512 characters");
    }
    // A worker re-registering (a reconnect, a restarted server or daemon) shows the credential it
    // was given and keeps it; anyone else needs a name that is new or whose identity was revoked.
    std::string previous_id;
    if (!request->previous_credential().empty()) {
      absl::StatusOr<Principal> previous =
          credentials_.VerifyWorkerSecret(request->previous_credential());
      if (previous.ok() && previous->is_worker_credential()) previous_id = previous->worker_id;
    }
    const absl::Status name_free = MayTakeName(*request, previous_id);
    if (!name_free.ok() && !absl::IsUnavailable(name_free)) return name_free;
    absl::StatusOr<std::string> stored = name_free.ok() ? workers_.Upsert(*request) : name_free;
    std::string id;
    bool drained = false;
    std::string credential;
    if (stored.ok()) {
      id = *stored;
      if (!previous_id.empty() && previous_id == id) {
        credential = request->previous_credential();
      } else {
        credential = WorkerCredentials::NewWorkerSecret();
        RETURN_IF_ERROR(credentials_.Store(id, credential, principal.join_token_id));
      }
      registry_.Remember(id, *request);
      absl::StatusOr<v1::WorkerInfo> info = workers_.Get(id);
      drained = info.ok() ? info->draining() : sessions_.Drained(id);
    } else {
      // Known to this process and showing its credential: it keeps its id and credential; the
      // row is written with its next heartbeat that reaches the database.
      std::optional<std::string> known;
      if (absl::IsUnavailable(stored.status())) known = registry_.RegisterFromMemory(*request);
      if (!known.has_value() || previous_id != *known) return stored.status();
      id = *known;
      credential = request->previous_credential();
      drained = sessions_.Drained(id);
      GANTRY_LOG(WARNING) << absl::StrCat(
          "registered worker ", BoundedField(request->name()), " (", id,
          ") from memory; the database is unavailable: ", stored.status().message());
    }
    sessions_.OnRegister(id, *request, drained);
    response->set_worker_id(id);
    response->set_worker_credential(credential);
    response->set_heartbeat_interval_ms(coordinator_.heartbeat_interval_ms);
    response->set_lease_timeout_ms(coordinator_.lease_timeout_ms);
    return absl::OkStatus();
  });
}

grpc::Status WorkerService::Connect(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ServerMessage, v1::WorkerMessage>* stream) {
  return auth_.Serve(context, [&](const Principal& principal) -> absl::Status {
    if (!principal.is_worker_credential()) {
      return absl::PermissionDeniedError(
          "Connect needs the worker credential Register returned; a rank credential cannot open a "
          "worker's stream");
    }
    v1::WorkerMessage message;
    if (!stream->Read(&message)) {
      return checks::Invalid("hello", "the stream ended before the hello");
    }
    if (!message.has_hello()) {
      return checks::Invalid("hello", "the first message must be a hello");
    }
    const std::string id = message.hello().worker_id();
    if (id.empty()) {
      return checks::Invalid("hello.worker_id", "is missing; call Register first");
    }
    if (id != principal.worker_id) {
      return absl::PermissionDeniedError(
          "hello.worker_id: is not the worker this credential was issued to; send the worker_id "
          "Register returned with it");
    }
    if (message.hello().running_jobs_size() > kMaxHelloJobs) {
      return absl::InvalidArgumentError(
          absl::StrCat("hello.running_jobs: more than ", kMaxHelloJobs, " jobs"));
    }
    absl::StatusOr<v1::WorkerInfo> worker = workers_.Get(id);
    if (absl::IsUnavailable(worker.status())) {
      if (std::optional<v1::WorkerInfo> known = registry_.Find(id); known.has_value()) {
        worker = *std::move(known);
      }
    }
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
    const std::string name = worker->name();
    // Job messages are stored in order and acknowledged once stored; one that fails for good is
    // logged and dropped (it never ends the stream), one the database cannot take yet waits.
    WorkerInbox inbox(
        registry_.DeliveryOf(id), message.hello().incarnation(),
        [&](const v1::WorkerMessage& m) { return sessions_.OnWorkerMessage(id, m); },
        [&](const std::string& line) {
          GANTRY_LOG(INFO) << absl::StrCat("worker ", name, ": ", line);
        });
    auto acknowledge = [&] {
      v1::ServerMessage ack;
      ack.mutable_ack()->set_server_time_ms(absl::ToUnixMillis(absl::Now()));
      ack.mutable_ack()->set_acked_seq(inbox.acked_seq());
      link->Send(std::move(ack));
    };
    bool heartbeats_unstored = false;  // the last heartbeat could not be written
    absl::Status result = absl::OkStatus();
    while (!shutting_down_ && stream->Read(&message)) {
      if (credentials_.IsRevoked(id)) {
        result = absl::UnauthenticatedError(
            "the worker credential was revoked (its join token was revoked); register again with "
            "a valid join token");
        break;
      }
      if (message.has_hello()) {
        result = checks::Invalid("hello", "only the first message may be a hello");
        break;
      }
      if (!message.has_heartbeat()) {
        result = inbox.Receive(std::move(message));
        if (!result.ok()) break;
        if (inbox.TakeAckDue()) acknowledge();
        continue;
      }
      const v1::Heartbeat& hb = message.heartbeat();
      if (hb.free_slots() < 0 || hb.free_slots() > worker->slots()) {
        result = absl::InvalidArgumentError(absl::StrCat(
            "heartbeat.free_slots: is ", hb.free_slots(), "; it must be in 0..", worker->slots()));
        break;
      }
      inbox.Retry();
      // The lease lives in memory: a heartbeat the database cannot take still keeps the worker.
      const absl::Status stored = StoreHeartbeat(id, hb);
      if (!stored.ok() && !heartbeats_unstored) {
        GANTRY_LOG(WARNING) << absl::StrCat("cannot store heartbeats of worker ", name, " (",
                                            stored.ToString(), "); keeping its lease in memory");
      } else if (stored.ok() && heartbeats_unstored) {
        GANTRY_LOG(INFO) << absl::StrCat("heartbeats of worker ", name, " are stored again");
      }
      heartbeats_unstored = !stored.ok();
      result = sessions_.OnHeartbeat(id, hb);
      if (!result.ok()) break;
      inbox.TakeAckDue();
      acknowledge();
    }
    if (inbox.pending() > 0) {
      GANTRY_LOG(WARNING) << absl::StrCat(
          "worker ", name, ": the stream ended with ", inbox.pending(),
          " job message(s) not stored; the worker sends them again");
    }
    sessions_.OnDisconnect(link);
    writer.join();
    workers_.MarkDisconnected(id).IgnoreError();
    return result;
  });
}

absl::Status WorkerService::MayUpload(const Principal& principal,
                                      const v1::CheckpointHeader& header) {
  return MayReport(principal, header.job_id(), header.attempt(), "header.job_id", "checkpoints");
}

absl::Status WorkerService::MayReport(const Principal& principal, const std::string& job_id,
                                      int attempt, const std::string& field,
                                      const std::string& what) {
  if (principal.is_rank_credential()) {
    if (job_id != principal.rank_job || attempt != principal.rank_attempt) {
      return absl::PermissionDeniedError(absl::StrCat(
          field, ": this rank credential is for job ", principal.rank_job, " attempt ",
          principal.rank_attempt, " only; a rank reports ", what, " of its own job attempt"));
    }
  } else if (!principal.is_worker_credential()) {
    return absl::PermissionDeniedError(
        absl::StrCat("reporting ", what, " needs a worker or rank credential"));
  }
  // Only the current attempt of a job that is placed on this worker now: not an attempt that
  // ended, moved elsewhere or has not started, not a job that finished (a rank credential lives
  // as long as its attempt).
  ASSIGN_OR_RETURN(bool live, identities_.HoldsLiveAttempt(job_id, attempt, principal.worker_id));
  if (!live) {
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": job ", job_id, " attempt ", attempt,
                     " has no ranks on this worker now (a worker reports ", what,
                     " only for the current attempt of a job running on it)"));
  }
  return absl::OkStatus();
}

absl::Status WorkerService::MayFetch(const Principal& principal, const std::string& sha256) {
  ASSIGN_OR_RETURN(bool allowed,
                   identities_.MayFetchCheckpoint(sha256, principal.worker_id, principal.rank_job));
  if (allowed) return absl::OkStatus();
  if (!principal.is_rank_credential()) {
    return absl::PermissionDeniedError(
        "sha256: is neither a checkpoint of a job placed on this worker nor a registered model's");
  }
  // A fine-tuning job's ranks start from the model version its spec names, resolved for its owner
  // as the placement resolved it.
  ASSIGN_OR_RETURN(v1::Job job, jobs_.Get("", principal.rank_job));
  if (!job.spec().initial_model().empty()) {
    absl::StatusOr<v1::ModelVersion> initial =
        models_.Resolve(job.owner(), job.spec().initial_model());
    if (initial.ok() && initial->checkpoint_sha256() == sha256) return absl::OkStatus();
    if (absl::IsUnavailable(initial.status())) return initial.status();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "sha256: is neither a checkpoint of job ", principal.rank_job,
      " nor the model it starts from; a rank credential reads only its own job's checkpoints"));
}

absl::Status WorkerService::StoreHeartbeat(const std::string& worker_id, const v1::Heartbeat& hb) {
  if (std::optional<WorkerRegistry::StaleRow> row = registry_.FindStaleRow(worker_id);
      row.has_value()) {
    absl::StatusOr<std::string> stored = workers_.Upsert(row->request);
    if (!stored.ok()) return stored.status();
    registry_.RowWritten(worker_id, row->version);
  }
  std::vector<std::string> cached(hb.cached_datasets().begin(), hb.cached_datasets().end());
  return workers_.Heartbeat(worker_id, hb.free_slots(), cached, absl::Now());
}

grpc::Status WorkerService::UploadCheckpoint(
    grpc::ServerContext* context, grpc::ServerReader<v1::UploadCheckpointRequest>* reader,
    v1::UploadCheckpointResponse* response) {
  return auth_.Serve(context, [&](const Principal& principal) -> absl::Status {
    v1::UploadCheckpointRequest message;
    if (!reader->Read(&message) || !message.has_header()) {
      return checks::Invalid("header", "the first message must carry the header");
    }
    const v1::CheckpointHeader header = message.header();
    RETURN_IF_ERROR(ValidateCheckpointHeader(header, max_checkpoint_bytes_));
    // Only for the current attempt of a job placed on this worker now (the database decides:
    // while it is unavailable the upload is UNAVAILABLE and the rank sends it again).
    RETURN_IF_ERROR(MayUpload(principal, header));
    const absl::StatusOr<v1::Job> job = jobs_.Get("", header.job_id());
    if (!job.ok()) return job.status();
    ASSIGN_OR_RETURN(std::unique_ptr<storage::BlobWriter> writer, blobs_.NewWriter());
    while (reader->Read(&message)) {
      if (!message.has_chunk()) {
        return checks::Invalid("chunk", "only the first message may carry a header");
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
      return checks::Invalid("header.size_bytes",
                             absl::StrCat(header.size_bytes(), " but the stream ended after ",
                                          writer->bytes_written(), " bytes"));
    }
    // Pinned against collection before it is published; while the database is down the pin is
    // skipped (the collector adopts the file later with a full grace period).
    ASSIGN_OR_RETURN(storage::BlobInfo blob,
                     writer->Commit(header.sha256(), [this](const std::string& sha256) {
                       absl::Status pinned = blob_refs_.Pin(sha256);
                       return absl::IsUnavailable(pinned) ? absl::OkStatus() : pinned;
                     }));
    v1::JobEvent event;
    v1::CheckpointSaved* saved = event.mutable_checkpoint_saved();
    saved->set_epoch(header.epoch());
    saved->set_step(header.step());
    saved->set_sha256(blob.sha256);
    saved->set_size_bytes(blob.size_bytes);
    if (header.has_fom()) saved->set_fom(header.fom());
    // A checkpoint counts (a restart point, registrable as the job's model) once it is recorded
    // as the job's; stored but unrecorded, the rank's next try records it (the blob is kept).
    RETURN_IF_ERROR(jobs_.RecordCheckpoint(header.job_id(), header.attempt(), *saved).status());
    // Retention: the job's older checkpoints beyond keep_last expire (the newest, what a restart
    // resumes from, stays, and with keep_best the one with the lowest validation fom). Expiring
    // drops their blob references in the same transaction; the collector deletes a blob once
    // nothing (a model, another job's checkpoint, a dataset) has used it for the grace period.
    const v1::CheckpointPolicy& policy = job->spec().checkpoint_policy();
    if (absl::Status expired =
            jobs_.ExpireCheckpoints(header.job_id(), policy.keep_last(), policy.keep_best())
                .status();
        !expired.ok()) {
      GANTRY_LOG(WARNING) << absl::StrCat("cannot expire old checkpoints of ", header.job_id(),
                                          ": ", expired.ToString());
    }
    response->set_sha256(blob.sha256);
    response->set_size_bytes(blob.size_bytes);
    return absl::OkStatus();
  });
}

grpc::Status WorkerService::FetchCheckpoint(grpc::ServerContext* context,
                                            const v1::FetchCheckpointRequest* request,
                                            grpc::ServerWriter<v1::CheckpointChunk>* writer) {
  return auth_.Serve(context, [&](const Principal& principal) -> absl::Status {
    RETURN_IF_ERROR(ValidateSha256(request->sha256(), "sha256"));
    if (request->offset() < 0) return checks::Invalid("offset", "must be >= 0");
    ASSIGN_OR_RETURN(int64_t size, blobs_.Size(request->sha256()));
    RETURN_IF_ERROR(MayFetch(principal, request->sha256()));
    if (request->offset() > size) {
      return absl::OutOfRangeError(absl::StrCat(
          "offset: ", request->offset(), " is past the end of the checkpoint (", size, " bytes)"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<storage::BlobReader> blob,
                     blobs_.Open(request->sha256(), request->offset()));
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

grpc::Status WorkerService::ReportValidation(grpc::ServerContext* context,
                                             const v1::ReportValidationRequest* request,
                                             v1::ReportValidationResponse* /*response*/) {
  return auth_.Serve(context, [&](const Principal& principal) -> absl::Status {
    RETURN_IF_ERROR(ValidateReportValidation(*request, storage::kMaxValidationHistogramBytes));
    RETURN_IF_ERROR(
        MayReport(principal, request->job_id(), request->attempt(), "job_id", "validation points"));
    return jobs_.RecordValidationPoint(request->job_id(), request->attempt(), request->point());
  });
}

}  // namespace gantry::server
