// StudyService: create, list, follow and cancel hyper-parameter studies (gantry.v1.StudyService),
// a thin layer over StudyRepository; the StudyDriver runs them.
#ifndef GANTRY_SERVER_API_STUDY_SERVICE_H_
#define GANTRY_SERVER_API_STUDY_SERVICE_H_

#include "gantry/v1/studies.grpc.pb.h"
#include "server/coordinator/job_submitter.h"
#include "server/platform/backend.h"
#include "server/platform/polled_stream.h"
#include "server/platform/stream_pump.h"

namespace gantry::server {

// Thread-safe; `backend` must outlive it.
// WatchStudy is served on gRPC's callback API (through `pump`, which must outlive the calls); the
// other methods are synchronous.
class StudyService final : public gantry::v1::StudyService::WithCallbackMethod_WatchStudy<
                               gantry::v1::StudyService::Service> {
 public:
  StudyService(Backend& backend, StreamPump& pump)
      : backend_(backend), pump_(pump), submitter_(backend) {}

  grpc::Status CreateStudy(grpc::ServerContext* context,
                           const gantry::v1::CreateStudyRequest* request,
                           gantry::v1::Study* response) override;
  grpc::Status GetStudy(grpc::ServerContext* context, const gantry::v1::GetStudyRequest* request,
                        gantry::v1::Study* response) override;
  grpc::Status ListStudies(grpc::ServerContext* context,
                           const gantry::v1::ListStudiesRequest* request,
                           gantry::v1::ListStudiesResponse* response) override;
  grpc::Status ListTrials(grpc::ServerContext* context,
                          const gantry::v1::ListTrialsRequest* request,
                          gantry::v1::ListTrialsResponse* response) override;
  // Re-reads the study every options.watch_poll_interval and writes an update when it changed,
  // until the study ends. Between reads the call holds no thread (a PolledStream on the pump).
  grpc::ServerWriteReactor<gantry::v1::StudyUpdate>* WatchStudy(
      grpc::CallbackServerContext* context,
      const gantry::v1::WatchStudyRequest* request) override;
  grpc::Status CancelStudy(grpc::ServerContext* context,
                           const gantry::v1::CancelStudyRequest* request,
                           gantry::v1::Study* response) override;

 private:
  // The stored study with its counts filled in from its trials; `trials` receives them.
  absl::StatusOr<gantry::v1::Study> Load(const std::string& scope, const std::string& id,
                                         std::vector<gantry::v1::Trial>* trials);

  // One poll of a WatchStudy stream: the study and its trials, as an update when they changed
  // since `*last` (the serialized update without its running device-hours).
  absl::StatusOr<PolledStream<gantry::v1::StudyUpdate>::Batch> PollStudy(const std::string& scope,
                                                                         const std::string& id,
                                                                         std::string* last);

  Backend& backend_;
  StreamPump& pump_;
  JobSubmitter submitter_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_STUDY_SERVICE_H_
