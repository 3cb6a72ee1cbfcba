// StudyService: create, list, follow and cancel hyper-parameter studies (gantry.v1.StudyService),
// a thin layer over StudyRepository; the StudyDriver runs them.
#ifndef GANTRY_SERVER_API_STUDY_SERVICE_H_
#define GANTRY_SERVER_API_STUDY_SERVICE_H_

#include "gantry/v1/studies.grpc.pb.h"
#include "server/coordinator/job_submitter.h"
#include "server/platform/call_auth.h"
#include "server/platform/polled_stream.h"
#include "server/platform/stream_pump.h"
#include "server/platform/tenant_quotas.h"
#include "storage/job_repository.h"
#include "storage/study_repository.h"

namespace gantry::server {

// Thread-safe; every reference must outlive it. CreateStudy checks the base job with `submitter`
// (shared with the TrainingService); CancelStudy cancels the trial jobs in `jobs`.
// WatchStudy is served on gRPC's callback API (through `pump`, which must outlive the calls); the
// other methods are synchronous.
class StudyService final : public gantry::v1::StudyService::WithCallbackMethod_WatchStudy<
                               gantry::v1::StudyService::Service> {
 public:
  StudyService(CallAuth& auth, JobSubmitter& submitter, storage::StudyRepository& studies,
               storage::JobRepository& jobs, TenantQuotas& quotas, StreamPump& pump)
      : auth_(auth),
        submitter_(submitter),
        studies_(studies),
        jobs_(jobs),
        quotas_(quotas),
        pump_(pump) {}

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

  CallAuth& auth_;
  JobSubmitter& submitter_;
  storage::StudyRepository& studies_;
  storage::JobRepository& jobs_;
  TenantQuotas& quotas_;
  StreamPump& pump_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_STUDY_SERVICE_H_
