// Unit tests of the pure request checks (server/requests/), the status mapping and the audience
// of each method, without a server.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "base/grpc_status.h"
#include "base/status_details.h"
#include "server/platform/auth.h"
#include "server/requests/catalog_requests.h"
#include "server/requests/dataset_requests.h"
#include "server/requests/field_checks.h"
#include "server/requests/generation_requests.h"
#include "server/requests/training_requests.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

v1::JobSpec Good() {
  v1::JobSpec spec;
  spec.set_model_preset("3dgan-25");
  spec.set_dataset("toymc:layout=25,events=100");
  spec.mutable_hyper_parameters()->set_epochs(3);
  spec.mutable_hyper_parameters()->set_batch_per_rank(16);
  spec.set_world_size(4);
  return spec;
}

// Expects INVALID_ARGUMENT whose message starts with `field`, carrying a google.rpc.BadRequest
// violation of that field (or one below it) and the reason INVALID_FIELD.
void ExpectInvalid(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(std::string(status.message()).rfind(field, 0), 0u)
      << "message does not start with " << field << ": " << status.message();
  const StatusDetails details = GetStatusDetails(status);
  ASSERT_EQ(details.field_violations.size(), 1u) << status;
  EXPECT_EQ(details.field_violations[0].field.rfind(field, 0), 0u)
      << details.field_violations[0].field << " is not " << field;
  EXPECT_FALSE(details.field_violations[0].description.empty());
  EXPECT_EQ(details.reason, "INVALID_FIELD");
}

TEST(ValidationTest, AGoodSpecPasses) {
  EXPECT_TRUE(ValidateJobSpec(Good()).ok()) << ValidateJobSpec(Good());
  v1::JobSpec spec = Good();
  spec.set_dataset("file:///data/Ele_1.h5");
  spec.set_initial_model("alice/calo@champion");
  spec.set_model_name("calo-v2");
  spec.mutable_checkpoint_policy()->set_keep_best(true);  // validation is on by default
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  for (const char* baseline : {"baseline-template", "baseline-spots"}) {
    spec = Good();
    spec.set_model_preset(baseline);
    spec.set_world_size(1);
    spec.mutable_hyper_parameters()->clear_epochs();  // no optimiser steps: not needed
    spec.mutable_hyper_parameters()->clear_batch_per_rank();
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  }
}

TEST(ValidationTest, JobSpecFieldsAreChecked) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    void (*edit)(v1::JobSpec&, double);
    const char* field;
  };
  const Case cases[] = {
      {[](v1::JobSpec& s, double) { s.set_model_preset("gan"); }, "spec.model_preset"},
      {[](v1::JobSpec& s, double) { s.set_world_size(257); }, "spec.world_size"},
      // A baseline (no network) is fitted by one rank and not fine-tuned.
      {[](v1::JobSpec& s, double) { s.set_model_preset("baseline-spots"); }, "spec.world_size"},
      {[](v1::JobSpec& s, double) {
         s.set_model_preset("baseline-template");
         s.set_world_size(1);
         s.set_initial_model("calo:1");
       },
       "spec.initial_model"},
      {[](v1::JobSpec& s, double) { s.set_world_size(-1); }, "spec.world_size"},
      {[](v1::JobSpec& s, double) { s.mutable_hyper_parameters()->set_epochs(10001); },
       "spec.hyper_parameters.epochs"},
      {[](v1::JobSpec& s, double n) { s.mutable_hyper_parameters()->set_learning_rate(n); },
       "spec.hyper_parameters.learning_rate"},
      {[](v1::JobSpec& s, double) {
         s.mutable_hyper_parameters()->mutable_loss_weights()->set_energy(-0.1);
       },
       "spec.hyper_parameters.loss_weights.energy"},
      {[](v1::JobSpec& s, double) { s.mutable_hyper_parameters()->set_warmup_epochs(4); },
       "spec.hyper_parameters.warmup_epochs"},
      {[](v1::JobSpec& s, double) { s.mutable_hyper_parameters()->set_lr_decay_to(1.5); },
       "spec.hyper_parameters.lr_decay_to"},
      {[](v1::JobSpec& s, double n) { s.mutable_hyper_parameters()->set_lr_decay_to(n); },
       "spec.hyper_parameters.lr_decay_to"},
      {[](v1::JobSpec& s, double) { s.set_priority(-101); }, "spec.priority"},
      {[](v1::JobSpec& s, double) { s.set_dataset("ds-"); }, "spec.dataset"},
      {[](v1::JobSpec& s, double) { s.set_dataset("file:///data/../etc/passwd"); }, "spec.dataset"},
      {[](v1::JobSpec& s, double) { s.set_initial_model("calo:0"); }, "spec.initial_model"},
      {[](v1::JobSpec& s, double) { s.set_initial_model("calo:x1"); }, "spec.initial_model"},
      {[](v1::JobSpec& s, double) { s.set_model_name("-bad"); }, "spec.model_name"},
      {[](v1::JobSpec& s, double) { s.mutable_validation()->set_holdout_fraction(0.95); },
       "spec.validation.holdout_fraction"},
      {[](v1::JobSpec& s, double) { s.mutable_resources_per_rank()->set_count(17); },
       "spec.resources_per_rank.count"},
      {[](v1::JobSpec& s, double) { (*s.mutable_worker_selector())[""] = "x"; },
       "spec.worker_selector"},
      {[](v1::JobSpec& s, double) { s.set_model_visibility(static_cast<v1::Visibility>(7)); },
       "spec.model_visibility"},
      {[](v1::JobSpec& s, double) { s.mutable_checkpoint_policy()->set_keep_last(-2); },
       "spec.checkpoint_policy.keep_last"},
      {[](v1::JobSpec& s, double) {
         s.mutable_checkpoint_policy()->set_keep_best(true);
         s.mutable_validation()->set_disabled(true);
       },
       "spec.checkpoint_policy.keep_best"},
      {[](v1::JobSpec& s, double) { s.mutable_data_pipeline()->set_prefetch_batches(-1); },
       "spec.data_pipeline.prefetch_batches"},
      {[](v1::JobSpec& s, double) { s.mutable_data_pipeline()->set_loader_threads(257); },
       "spec.data_pipeline.loader_threads"},
  };
  for (const Case& c : cases) {
    v1::JobSpec spec = Good();
    c.edit(spec, nan);
    SCOPED_TRACE(c.field);
    ExpectInvalid(ValidateJobSpec(spec), c.field);
  }
}

TEST(ValidationTest, ModelReferences) {
  auto ref = ParseModelRef("calo:12", "model");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->name, "calo");
  EXPECT_EQ(ref->version, 12);
  ref = ParseModelRef("alice/calo@champion", "model");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->owner, "alice");
  EXPECT_EQ(ref->alias, "champion");
  for (const char* bad : {"", "calo", "calo:", "calo:-1", ":3", "calo@", "calo@Champion",
                          "Bad Owner/calo:1", "calo:1.5"}) {
    SCOPED_TRACE(bad);
    ExpectInvalid(ParseModelRef(bad, "model").status(), "model");
  }
}

TEST(ValidationTest, GenerateAgainstTheModelsTrainingRange) {
  v1::ModelVersion model;
  model.set_name("calo");
  model.set_version(1);
  model.set_status(v1::MODEL_STATUS_READY);
  model.mutable_energy_range_gev()->set_min(10);
  model.mutable_energy_range_gev()->set_max(500);
  model.mutable_theta_range_rad()->set_min(1.0);
  model.mutable_theta_range_rad()->set_max(2.0);
  v1::GenerateRequest request;
  request.set_model("calo:1");
  v1::Condition* c = request.mutable_list()->add_items();
  c->set_energy_gev(100);
  ASSERT_TRUE(ValidateGenerateRequest(request, 100000).ok());
  EXPECT_TRUE(ValidateGenerateForModel(request, model).ok());
  c->set_theta_rad(2.5);
  ExpectInvalid(ValidateGenerateForModel(request, model), "list.items[0].theta_rad");
  c->set_theta_rad(0);
  c->set_energy_gev(9);
  ExpectInvalid(ValidateGenerateForModel(request, model), "list.items[0].energy_gev");
  c->set_energy_gev(std::numeric_limits<double>::infinity());
  ExpectInvalid(ValidateGenerateRequest(request, 100000), "list.items[0].energy_gev");
  request.set_chunk_showers(5000);
  c->set_energy_gev(50);
  ExpectInvalid(ValidateGenerateRequest(request, 100000), "chunk_showers");
}

TEST(ValidationTest, ThePerRequestShowerLimitIsTheTenantsAndNamed) {
  v1::GenerateRequest request;
  request.set_model("calo:1");
  request.mutable_range()->mutable_energy_gev()->set_min(10);
  request.mutable_range()->mutable_energy_gev()->set_max(100);
  request.mutable_range()->set_count(100000);
  EXPECT_TRUE(ValidateGenerateRequest(request, 100000).ok()) << "the limit itself is allowed";
  EXPECT_TRUE(ValidateGenerateRequest(request, 0).ok()) << "0 = unlimited";
  request.mutable_range()->set_count(501);
  absl::Status over = ValidateGenerateRequest(request, 500);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_NE(over.message().find("the maximum is 500"), absl::string_view::npos) << over;
  EXPECT_NE(over.message().find("max_showers_per_request"), absl::string_view::npos) << over;
  EXPECT_NE(over.message().find("--max-showers-per-request"), absl::string_view::npos) << over;
  EXPECT_NE(over.message().find("Split it"), absl::string_view::npos) << over;
  const StatusDetails details = GetStatusDetails(over);
  EXPECT_EQ(details.reason, "QUOTA_EXCEEDED");
  EXPECT_EQ(details.metadata.at("limit"), "max_showers_per_request");
  EXPECT_EQ(details.metadata.at("value"), "500");
  EXPECT_FALSE(details.retry_delay.has_value()) << "waiting does not help";
  request.mutable_range()->set_count(500);
  EXPECT_TRUE(ValidateGenerateRequest(request, 500).ok());
  request.clear_range();
  for (int i = 0; i < 3; ++i) request.mutable_list()->add_items()->set_energy_gev(50);
  over = ValidateGenerateRequest(request, 2);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_EQ(over.message().rfind("list.items", 0), 0u) << over;
  // The cap comes before the conditions are checked one by one.
  request.mutable_list()->mutable_items(2)->set_energy_gev(-1);
  EXPECT_EQ(ValidateGenerateRequest(request, 2).code(), absl::StatusCode::kResourceExhausted);
}

TEST(ValidationTest, UploadHeaderAndPages) {
  v1::UploadDatasetHeader header;
  header.set_name("electrons-1");
  header.set_size_bytes(1000);
  EXPECT_TRUE(ValidateUploadHeader(header, 1 << 20).ok());
  header.set_sha256("ABC");
  ExpectInvalid(ValidateUploadHeader(header, 1 << 20), "header.sha256");
  header.clear_sha256();
  header.set_file_name("../x.h5");
  ExpectInvalid(ValidateUploadHeader(header, 1 << 20), "header.file_name");
  header.clear_file_name();
  EXPECT_EQ(ValidateUploadHeader(header, 999).code(), absl::StatusCode::kResourceExhausted);

  v1::PageRequest page;
  EXPECT_EQ(*ValidatePage(page, "page"), kDefaultPageSize);
  page.set_page_size(1000);
  EXPECT_EQ(*ValidatePage(page, "page"), 1000);
  page.set_page_size(1001);
  ExpectInvalid(ValidatePage(page, "page").status(), "page.page_size");
}

TEST(ValidationTest, NamesAliasesAndIds) {
  EXPECT_TRUE(ValidateTenantName("physics-2", "name").ok());
  ExpectInvalid(ValidateTenantName("2physics", "name"), "name");
  ExpectInvalid(ValidateTenantName(std::string(64, 'a'), "name"), "name");
  EXPECT_TRUE(ValidateDatasetName("Ele_1-10GeV.h5", "name").ok());
  ExpectInvalid(ValidateDatasetName("ds-lookalike", "name"), "name");
  ExpectInvalid(ValidateDatasetName("a b", "name"), "name");
  EXPECT_TRUE(ValidateAlias("champion_2", "alias").ok());
  ExpectInvalid(ValidateAlias("7", "alias"), "alias");
  EXPECT_TRUE(ValidateId("job-1234-abcd", "job-", "job_id").ok());
  ExpectInvalid(ValidateId("job-12;drop", "job-", "job_id"), "job_id");
  ExpectInvalid(ValidateId("ds-1", "job-", "job_id"), "job_id");
}

TEST(ValidationTest, UpdateModelMasksAndListModelsFilters) {
  v1::UpdateModelRequest update;
  update.set_model("calo:2");
  ExpectInvalid(ValidateUpdateModel(update), "update_mask");
  for (const char* path : {"description", "visibility", "tags"}) {
    update.mutable_update_mask()->add_paths(path);
  }
  update.mutable_model_version()->set_visibility(v1::VISIBILITY_PUBLIC);
  EXPECT_TRUE(ValidateUpdateModel(update).ok()) << ValidateUpdateModel(update);
  update.mutable_model_version()->set_visibility(v1::VISIBILITY_UNSPECIFIED);
  ExpectInvalid(ValidateUpdateModel(update), "model_version.visibility");
  update.mutable_model_version()->set_visibility(v1::VISIBILITY_PRIVATE);
  update.mutable_model_version()->set_description(std::string(1025, 'd'));
  ExpectInvalid(ValidateUpdateModel(update), "model_version.description");
  update.mutable_update_mask()->set_paths(0, "name");  // the description is no longer read
  ExpectInvalid(ValidateUpdateModel(update), "update_mask.paths[0]");
  update.mutable_update_mask()->set_paths(0, "tags");
  ExpectInvalid(ValidateUpdateModel(update), "update_mask.paths[2]");
  update.mutable_update_mask()->set_paths(0, "description");
  (*update.mutable_model_version()->mutable_tags())[""] = "empty key";
  update.mutable_model_version()->clear_description();
  ExpectInvalid(ValidateUpdateModel(update), "model_version.tags");
  update.set_model("calo");
  ExpectInvalid(ValidateUpdateModel(update), "model");

  v1::ListModelsRequest list;
  for (const char* dataset :
       {"ds-0a1b", "electrons_2024.v1", "toymc:layout=25,events=100", "file:///data/Ele_1.h5"}) {
    list.set_dataset(dataset);
    EXPECT_TRUE(ValidateListModels(list).ok()) << dataset << ValidateListModels(list);
  }
  for (const char* dataset : {"ds-", "ds-a/b", "two words", "../x"}) {
    list.set_dataset(dataset);
    ExpectInvalid(ValidateListModels(list), "dataset");
  }
  list.set_dataset(std::string(129, 'n'));
  ExpectInvalid(ValidateListModels(list), "dataset");
  list.clear_dataset();
  list.set_model_preset("3dgan-51");
  list.set_particle(v1::PARTICLE_CHARGED_PION);
  EXPECT_TRUE(ValidateListModels(list).ok());
  list.set_model_preset("3dgan 51");
  ExpectInvalid(ValidateListModels(list), "model_preset");
  list.clear_model_preset();
  list.set_particle(static_cast<v1::Particle>(42));
  ExpectInvalid(ValidateListModels(list), "particle");
}

TEST(StatusMappingTest, CodesAndMessagesPassThrough) {
  const grpc::Status s = ToGrpcStatus(absl::NotFoundError("job job-1 not found"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "job job-1 not found");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(ToGrpcStatus(absl::DataLossError("x")).error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(AuthTest, AudienceOfEachMethod) {
  EXPECT_EQ(AudienceOf("/gantry.v1.TrainingService/SubmitJob"), Audience::kTenant);
  EXPECT_EQ(AudienceOf("/gantry.v1.AdminService/CreateTenant"), Audience::kAdmin);
  EXPECT_EQ(AudienceOf("/gantry.v1.WorkerService/Connect"), Audience::kWorker);
  EXPECT_EQ(AudienceOf("/gantry.v1.WorkerService/Register"), Audience::kWorkerJoin);
  EXPECT_EQ(AudienceOf("/gantry.v1.DatasetService/ReadDataset"), Audience::kTenantOrWorker);
  EXPECT_EQ(AudienceOf("/gantry.v1.DatasetService/UploadDataset"), Audience::kTenant);
  EXPECT_EQ(AudienceOf("/grpc.health.v1.Health/Check"), Audience::kNone);
  // Reflection (served only with --reflection) needs a tenant or admin token.
  EXPECT_EQ(AudienceOf("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"),
            Audience::kTenant);
}

}  // namespace
}  // namespace gantry::server
