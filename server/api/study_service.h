// StudyService: create, list, follow and cancel hyper-parameter studies (gantry.v1.StudyService),
// a thin layer over StudyRepository; the StudyDriver runs them.
#ifndef GANTRY_SERVER_API_STUDY_SERVICE_H_
#define GANTRY_SERVER_API_STUDY_SERVICE_H_

#include "gantry/v1/studies.grpc.pb.h"
#include "server/coordinator/job_submitter.h"
#include "server/platform/backend.h"

namespace gantry::server {

// Thread-safe; `backend` must outlive it.
class StudyService final : public gantry::v1::StudyService::Service {
 public:
  explicit StudyService(Backend& backend) : backend_(backend), submitter_(backend) {}

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
  // Re-reads the study every options.watch_poll_interval and writes an update when it changed.
  grpc::Status WatchStudy(grpc::ServerContext* context,
                          const gantry::v1::WatchStudyRequest* request,
                          grpc::ServerWriter<gantry::v1::StudyUpdate>* writer) override;
  grpc::Status CancelStudy(grpc::ServerContext* context,
                           const gantry::v1::CancelStudyRequest* request,
                           gantry::v1::Study* response) override;

 private:
  // The stored study with its counts filled in from its trials; `trials` receives them.
  absl::StatusOr<gantry::v1::Study> Load(const std::string& scope, const std::string& id,
                                         std::vector<gantry::v1::Trial>* trials);

  Backend& backend_;
  JobSubmitter submitter_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_STUDY_SERVICE_H_
