// Integration tests of datasets (real HDF5 upload, read-back, refusal of bad files), the model
// catalog (versions inserted through ModelRepository, as a finished job registers them), generation
// request checks and the worker protocol.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/grpc_status.h"
#include "base/sha256.h"
#include "base/status_details.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "storage/database.h"
#include "storage/model_repository.h"
#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

using ::gantry::testing::ReadFile;

// Regular files under the blob store (excluding its temp dir).
int CountBlobs(const std::string& data_dir) {
  int n = 0;
  const std::filesystem::path blobs = std::filesystem::path(data_dir) / "blobs";
  if (!std::filesystem::exists(blobs)) return 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(blobs)) {
    if (entry.is_regular_file() && entry.path().parent_path().filename() != "tmp") ++n;
  }
  return n;
}

class ServerDataTest : public ServerFixture {
 protected:
  // Unreferenced blobs are garbage-collected within a few seconds. The grace also bounds an
  // upload's sandboxed inspection (a slower one is refused, ABORTED), which under the sanitizers
  // and a loaded machine took longer than 300 ms.
  std::vector<std::string> SetUpServerArgs() const override {
    return {"--blob-gc-interval-ms=100", "--blob-gc-grace-ms=3000"};
  }

  // A small real 3DGAN fixed-angle file written by the data library.
  std::string WriteShowerFile(const std::string& name, int events) {
    showers::ToyMcConfig config;
    config.events = events;
    config.energy_min_gev = 20;
    config.energy_max_gev = 80;
    config.seed = 7;
    absl::StatusOr<showers::ShowerSet> set = showers::SimulateToyMc(config);
    EXPECT_TRUE(set.ok()) << set.status();
    const std::string path = dir_.File(name);
    absl::Status written = showers::WriteShowerFile(path, *set);
    EXPECT_TRUE(written.ok()) << written;
    return path;
  }

  grpc::Status Upload(const std::string& token, const std::string& name,
                      const std::string& file_name, const std::string& bytes,
                      const std::string& sha256, v1::Dataset* dataset) {
    auto ctx = Ctx(token, 30000);
    auto writer = datasets_->UploadDataset(ctx.get(), dataset);
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_size_bytes(bytes.size());
    header.mutable_header()->set_sha256(sha256);
    header.mutable_header()->set_file_name(file_name);
    (*header.mutable_header()->mutable_labels())["source"] = "toymc";
    writer->Write(header);
    constexpr size_t kChunk = 64 * 1024;
    for (size_t at = 0; at < bytes.size(); at += kChunk) {
      v1::UploadDatasetRequest chunk;
      chunk.set_chunk(bytes.substr(at, kChunk));
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Read(const std::string& token, const std::string& id, int64_t offset,
                    std::string* bytes, std::string* sha256 = nullptr) {
    v1::ReadDatasetRequest request;
    request.set_dataset_id(id);
    request.set_offset(offset);
    auto ctx = Ctx(token, 30000);
    auto reader = datasets_->ReadDataset(ctx.get(), request);
    v1::DatasetChunk chunk;
    bytes->clear();
    while (reader->Read(&chunk)) {
      EXPECT_EQ(chunk.offset(), offset + static_cast<int64_t>(bytes->size()));
      if (!chunk.sha256().empty() && sha256 != nullptr) *sha256 = chunk.sha256();
      bytes->append(chunk.data());
    }
    return reader->Finish();
  }

  // Registers a model version directly in storage (what a job does when it succeeds).
  v1::ModelVersion Register(const std::string& owner, const std::string& name, double fom,
                            v1::Visibility visibility,
                            const std::function<void(v1::ModelVersion&)>& edit = nullptr) {
    if (db_conn_ == nullptr) {
      auto db = storage::Database::Create(db_.dsn(), 2);
      EXPECT_TRUE(db.ok()) << db.status();
      db_conn_ = std::move(*db);
      models_ = std::make_unique<storage::ModelRepository>(*db_conn_);
    }
    v1::ModelVersion m;
    m.set_owner(owner);
    m.set_name(name);
    m.set_visibility(visibility);
    m.set_description("test model");
    (*m.mutable_tags())["detector"] = "ecal";
    (*m.mutable_metrics())["fom"] = fom;
    m.set_particle(v1::PARTICLE_ELECTRON);
    m.mutable_energy_range_gev()->set_min(10);
    m.mutable_energy_range_gev()->set_max(500);
    m.set_checkpoint_sha256(std::string(64, 'a'));
    m.mutable_lineage()->set_model_preset("3dgan-25");
    if (edit) edit(m);
    absl::StatusOr<v1::ModelVersion> registered = models_->Register(m);
    EXPECT_TRUE(registered.ok()) << registered.status();
    return registered.ok() ? *registered : v1::ModelVersion();
  }

  std::unique_ptr<storage::Database> db_conn_;
  std::unique_ptr<storage::ModelRepository> models_;
};

TEST_F(ServerDataTest, UploadAnHdf5FileThenListGetAndReadItBack) {
  const std::string alice = NewTenant("alice");
  const std::string bob = NewTenant("bob");
  const std::string bytes = ReadFile(WriteShowerFile("Ele_sample.h5", 12));
  ASSERT_GT(bytes.size(), 1000u);
  const std::string sha = gantry::Sha256Hex(bytes);

  v1::Dataset dataset;
  grpc::Status s = Upload(alice, "electrons", "Ele_sample.h5", bytes, sha, &dataset);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(dataset.id().rfind("ds-", 0), 0u);
  EXPECT_EQ(dataset.name(), "electrons");
  EXPECT_EQ(dataset.owner(), "alice");
  EXPECT_EQ(dataset.layout(), v1::DATASET_LAYOUT_3DGAN_FIXED_ANGLE);
  EXPECT_EQ(std::vector<int64_t>(dataset.shape().begin(), dataset.shape().end()),
            (std::vector<int64_t>{25, 25, 25}));
  EXPECT_EQ(dataset.events(), 12);
  EXPECT_GE(dataset.energy_range_gev().min(), 20 - 1e-3);
  EXPECT_LE(dataset.energy_range_gev().max(), 80 + 1e-3);
  EXPECT_LT(dataset.energy_range_gev().min(), dataset.energy_range_gev().max());
  EXPECT_EQ(dataset.particle(), v1::PARTICLE_ELECTRON);
  EXPECT_EQ(dataset.sha256(), sha);
  EXPECT_EQ(dataset.size_bytes(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(dataset.labels().at("source"), "toymc");

  v1::ListDatasetsResponse listed;
  ASSERT_TRUE(datasets_->ListDatasets(Ctx(alice).get(), {}, &listed).ok());
  ASSERT_EQ(listed.datasets_size(), 1);
  EXPECT_EQ(listed.datasets(0).id(), dataset.id());
  v1::GetDatasetRequest get;
  get.set_dataset_id("electrons");
  v1::Dataset got;
  ASSERT_TRUE(datasets_->GetDataset(Ctx(alice).get(), get, &got).ok());
  EXPECT_EQ(got.id(), dataset.id());

  std::string read, read_sha;
  s = Read(alice, dataset.id(), 0, &read, &read_sha);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(read_sha, sha);
  EXPECT_EQ(gantry::Sha256Hex(read), sha);
  EXPECT_TRUE(read == bytes);
  s = Read(alice, dataset.id(), 1000, &read);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_TRUE(read == bytes.substr(1000));
  s = Read(alice, dataset.id(), bytes.size() + 1, &read);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE) << Describe(s);

  // Workers read datasets by id with their worker credential (to fill their caches); the join
  // token only registers.
  v1::CreateTokenResponse join;
  ASSERT_TRUE(admin_->CreateJoinToken(Ctx(admin_token_).get(), {}, &join).ok());
  s = Read(join.token(), dataset.id(), 0, &read);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  v1::RegisterRequest reg;
  reg.set_name("reader");
  reg.set_slots(1);
  reg.set_advertise_host("127.0.0.1");
  v1::RegisterResponse registered;
  ASSERT_TRUE(worker_->Register(Ctx(join.token()).get(), reg, &registered).ok());
  s = Read(registered.worker_credential(), dataset.id(), 0, &read);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_TRUE(read == bytes);

  // The same name twice is refused; another tenant sees nothing.
  v1::Dataset again;
  s = Upload(alice, "electrons", "Ele_sample.h5", bytes, sha, &again);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << Describe(s);
  get.set_dataset_id(dataset.id());
  s = datasets_->GetDataset(Ctx(bob).get(), get, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  s = Read(bob, dataset.id(), 0, &read);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  ASSERT_TRUE(datasets_->ListDatasets(Ctx(bob).get(), {}, &listed).ok());
  EXPECT_EQ(listed.datasets_size(), 0);

  // Jobs may train on it; bob may not; it cannot be deleted while a job waits for it.
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = GoodSpec();
  submit.mutable_spec()->set_dataset(dataset.id());
  v1::Job job;
  s = training_->SubmitJob(Ctx(alice).get(), submit, &job);
  ASSERT_TRUE(s.ok()) << Describe(s);
  s = training_->SubmitJob(Ctx(bob).get(), submit, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  EXPECT_NE(s.error_message().find("spec.dataset"), std::string::npos) << s.error_message();
  v1::DeleteDatasetRequest del;
  del.set_dataset_id(dataset.id());
  v1::DeleteDatasetResponse deleted;
  s = datasets_->DeleteDataset(Ctx(alice).get(), del, &deleted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  s = datasets_->DeleteDataset(Ctx(bob).get(), del, &deleted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);

  v1::CancelJobRequest cancel;
  cancel.set_job_id(s.ok() ? "" : "");
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), {}, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  cancel.set_job_id(jobs.jobs(0).id());
  ASSERT_TRUE(training_->CancelJob(Ctx(alice).get(), cancel, &job).ok());
  EXPECT_EQ(CountBlobs(dir_.File("data")), 1);
  s = datasets_->DeleteDataset(Ctx(alice).get(), del, &deleted);
  ASSERT_TRUE(s.ok()) << Describe(s);
  s = datasets_->GetDataset(Ctx(alice).get(), get, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  EXPECT_TRUE(Eventually([&] { return CountBlobs(dir_.File("data")) == 0; }, 20000))
      << "the unused blob is garbage-collected";
}

TEST_F(ServerDataTest, CorruptAndMismatchedUploadsAreRefusedAndNothingIsStored) {
  const std::string alice = NewTenant("alice");
  const std::string good = ReadFile(WriteShowerFile("Ele_good.h5", 4));
  v1::Dataset dataset;

  grpc::Status s = Upload(alice, "junk", "junk.h5", std::string(5000, 'x'), "", &dataset);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("file"), std::string::npos) << s.error_message();

  const std::string truncated = good.substr(0, good.size() / 2);
  s = Upload(alice, "truncated", "Ele_t.h5", truncated, "", &dataset);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);

  s = Upload(alice, "wrong-sha", "Ele_good.h5", good, std::string(64, '0'), &dataset);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("header.sha256"), std::string::npos) << s.error_message();

  // Declared size larger than what arrives.
  {
    auto ctx = Ctx(alice);
    auto writer = datasets_->UploadDataset(ctx.get(), &dataset);
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name("short");
    header.mutable_header()->set_size_bytes(good.size() + 10);
    writer->Write(header);
    v1::UploadDatasetRequest chunk;
    chunk.set_chunk(good);
    writer->Write(chunk);
    writer->WritesDone();
    s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_NE(s.error_message().find("header.size_bytes"), std::string::npos) << s.error_message();
  }

  v1::ListDatasetsResponse listed;
  ASSERT_TRUE(datasets_->ListDatasets(Ctx(alice).get(), {}, &listed).ok());
  EXPECT_EQ(listed.datasets_size(), 0);
  EXPECT_TRUE(Eventually([&] { return CountBlobs(dir_.File("data")) == 0; }, 20000))
      << "refused uploads' blobs are garbage-collected";
  EXPECT_EQ(HealthStatus(), 1);

  // The good file still goes in afterwards.
  s = Upload(alice, "good", "Ele_good.h5", good, gantry::Sha256Hex(good), &dataset);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(dataset.events(), 4);
}

TEST_F(ServerDataTest, CatalogListsResolvesAliasesTagsAndArchivesWithTenantVisibility) {
  const std::string alice = NewTenant("alice");
  const std::string bob = NewTenant("bob");
  Register("alice", "calo", 0.5, v1::VISIBILITY_PRIVATE);
  Register("alice", "calo", 0.3, v1::VISIBILITY_PRIVATE);
  Register("alice", "shared", 0.4, v1::VISIBILITY_PUBLIC);
  Register("bob", "bobs", 0.1, v1::VISIBILITY_PRIVATE);

  v1::ListModelsRequest list;
  v1::ListModelsResponse listed;
  ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), list, &listed).ok());
  std::set<std::string> refs;
  for (const auto& m : listed.models()) refs.insert(m.name() + ":" + std::to_string(m.version()));
  EXPECT_EQ(refs, (std::set<std::string>{"calo:1", "calo:2", "shared:1"}));

  list.set_order_by("metric:fom");
  ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.models_size(), 3);
  EXPECT_EQ(listed.models(0).name() + ":" + std::to_string(listed.models(0).version()), "calo:2");
  v1::MetricFilter* filter = list.add_metric_filters();
  filter->set_metric("fom");
  filter->set_max(0.35);
  ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.models_size(), 1);
  EXPECT_EQ(listed.models(0).version(), 2);

  v1::GetModelRequest get;
  get.set_model("calo:2");
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(alice).get(), get, &model).ok());
  EXPECT_EQ(model.metrics().at("fom"), 0.3);
  EXPECT_EQ(model.owner(), "alice");

  v1::SetAliasRequest alias;
  alias.set_name("calo");
  alias.set_alias("champion");
  alias.set_version(2);
  grpc::Status s = catalog_->SetAlias(Ctx(alice).get(), alias, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  get.set_model("calo@champion");
  ASSERT_TRUE(catalog_->GetModel(Ctx(alice).get(), get, &model).ok());
  EXPECT_EQ(model.version(), 2);
  alias.set_version(1);
  ASSERT_TRUE(catalog_->SetAlias(Ctx(alice).get(), alias, &model).ok());
  ASSERT_TRUE(catalog_->GetModel(Ctx(alice).get(), get, &model).ok());
  EXPECT_EQ(model.version(), 1);
  v1::DeleteAliasRequest del;
  del.set_name("calo");
  del.set_alias("champion");
  v1::DeleteAliasResponse deleted;
  ASSERT_TRUE(catalog_->DeleteAlias(Ctx(alice).get(), del, &deleted).ok());
  s = catalog_->GetModel(Ctx(alice).get(), get, &model);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);

  v1::SetTagsRequest tags;
  tags.set_model("calo:1");
  (*tags.mutable_set())["stage"] = "candidate";
  tags.add_remove("detector");
  ASSERT_TRUE(catalog_->SetTags(Ctx(alice).get(), tags, &model).ok());
  EXPECT_EQ(model.tags().at("stage"), "candidate");
  EXPECT_EQ(model.tags().count("detector"), 0u);

  v1::ArchiveModelRequest archive;
  archive.set_model("calo:1");
  ASSERT_TRUE(catalog_->ArchiveModel(Ctx(alice).get(), archive, &model).ok());
  EXPECT_EQ(model.status(), v1::MODEL_STATUS_ARCHIVED);
  list.Clear();
  ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), list, &listed).ok());
  EXPECT_EQ(listed.models_size(), 2);
  list.set_include_archived(true);
  ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), list, &listed).ok());
  EXPECT_EQ(listed.models_size(), 3);

  // Bob: alice's private versions do not exist for him, her public one does but is not his to
  // change.
  get.set_model("calo:2");
  s = catalog_->GetModel(Ctx(bob).get(), get, &model);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  get.set_model("shared:1");
  s = catalog_->GetModel(Ctx(bob).get(), get, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(model.owner(), "alice");
  tags.set_model("shared:1");
  s = catalog_->SetTags(Ctx(bob).get(), tags, &model);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  list.Clear();
  ASSERT_TRUE(catalog_->ListModels(Ctx(bob).get(), list, &listed).ok());
  refs.clear();
  for (const auto& m : listed.models()) refs.insert(m.name() + ":" + std::to_string(m.version()));
  EXPECT_EQ(refs, (std::set<std::string>{"shared:1", "bobs:1"}));
}

// Expects INVALID_ARGUMENT whose one google.rpc.BadRequest violation is `field` and whose message
// names it and `mention`.
void ExpectFieldError(const grpc::Status& s, const std::string& field, const std::string& mention) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_EQ(s.error_message().rfind(field + ": ", 0), 0u) << s.error_message();
  EXPECT_NE(s.error_message().find(mention), std::string::npos) << s.error_message();
  const StatusDetails details = GetStatusDetails(FromGrpcStatus(s));
  ASSERT_EQ(details.field_violations.size(), 1u) << Describe(s);
  EXPECT_EQ(details.field_violations[0].field, field);
  EXPECT_EQ(details.reason, "INVALID_FIELD");
}

TEST_F(ServerDataTest, UpdateModelChangesTheMaskedFieldsForTheOwnerOnly) {
  const std::string alice = NewTenant("alice");
  const std::string bob = NewTenant("bob");
  Register("alice", "calo", 0.5, v1::VISIBILITY_PRIVATE);
  Register("alice", "calo", 0.3, v1::VISIBILITY_PRIVATE);
  Register("alice", "shared", 0.4, v1::VISIBILITY_PUBLIC);
  auto update = [&](const std::string& token, const std::string& model,
                    const std::vector<std::string>& paths,
                    const std::function<void(v1::ModelVersion&)>& set, v1::ModelVersion* out) {
    v1::UpdateModelRequest request;
    request.set_model(model);
    for (const std::string& path : paths) request.mutable_update_mask()->add_paths(path);
    if (set) set(*request.mutable_model_version());
    return catalog_->UpdateModel(Ctx(token).get(), request, out);
  };
  const auto everything = [](v1::ModelVersion& m) {
    m.set_description("calorimeter GAN, final");
    m.set_visibility(v1::VISIBILITY_PUBLIC);
    (*m.mutable_tags())["stage"] = "final";
    m.set_name("ignored");  // outside the mask
  };

  // Only the masked field changes.
  v1::ModelVersion model;
  grpc::Status s = update(alice, "calo:2", {"description"}, everything, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(model.name(), "calo");
  EXPECT_EQ(model.description(), "calorimeter GAN, final");
  EXPECT_EQ(model.visibility(), v1::VISIBILITY_PRIVATE);
  EXPECT_EQ(model.tags().at("detector"), "ecal");
  // Visibility and tags (the whole map), by alias too; Bob can then read it.
  v1::SetAliasRequest alias;
  alias.set_name("calo");
  alias.set_alias("champion");
  alias.set_version(2);
  ASSERT_TRUE(catalog_->SetAlias(Ctx(alice).get(), alias, &model).ok());
  s = update(alice, "calo@champion", {"visibility", "tags"}, everything, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(model.version(), 2);
  EXPECT_EQ(model.visibility(), v1::VISIBILITY_PUBLIC);
  EXPECT_EQ(model.tags().size(), 1u);
  EXPECT_EQ(model.tags().at("stage"), "final");
  v1::GetModelRequest get;
  get.set_model("alice/calo:2");
  s = catalog_->GetModel(Ctx(bob).get(), get, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(model.description(), "calorimeter GAN, final");

  // The owner rule: another tenant's private version does not exist for Bob, a public one is not
  // his to change; nothing changed.
  s = update(bob, "alice/calo:1", {"description"}, everything, &model);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  s = update(bob, "alice/shared:1", {"description"}, everything, &model);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  s = update(alice, "calo:9", {"description"}, everything, &model);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  get.set_model("shared:1");
  ASSERT_TRUE(catalog_->GetModel(Ctx(alice).get(), get, &model).ok());
  EXPECT_EQ(model.description(), "test model");

  // Bad masks and values, each naming the field; nothing is stored.
  s = update(alice, "calo:1", {}, everything, &model);
  ExpectFieldError(s, "update_mask", "description, visibility, tags");
  s = update(alice, "calo:1", {"description", "lineage"}, everything, &model);
  ExpectFieldError(s, "update_mask.paths[1]", "\"lineage\" cannot be updated");
  s = update(alice, "calo:1", {"*"}, everything, &model);
  ExpectFieldError(s, "update_mask.paths[0]", "\"*\"");
  s = update(alice, "calo:1", {"tags", "description", "tags"}, everything, &model);
  ExpectFieldError(s, "update_mask.paths[2]", "given twice");
  s = update(
      alice, "calo:1", {"description"},
      [](v1::ModelVersion& m) { m.set_description(std::string(1025, 'x')); }, &model);
  ExpectFieldError(s, "model_version.description", "1024");
  s = update(alice, "calo:1", {"visibility"}, nullptr, &model);
  ExpectFieldError(s, "model_version.visibility", "VISIBILITY_PUBLIC");
  s = update(
      alice, "calo:1", {"tags"}, [](v1::ModelVersion& m) { (*m.mutable_tags())["bad key!"] = "x"; },
      &model);
  ExpectFieldError(s, "model_version.tags", "bad key!");
  s = update(alice, "calo", {"description"}, everything, &model);
  ExpectFieldError(s, "model", "name:version");
  get.set_model("calo:1");
  ASSERT_TRUE(catalog_->GetModel(Ctx(alice).get(), get, &model).ok());
  EXPECT_EQ(model.description(), "test model");
  EXPECT_EQ(model.tags().at("detector"), "ecal");

  // Archived: the description may change, visibility and tags may not.
  v1::ArchiveModelRequest archive;
  archive.set_model("calo:1");
  ASSERT_TRUE(catalog_->ArchiveModel(Ctx(alice).get(), archive, &model).ok());
  s = update(alice, "calo:1", {"description"}, everything, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(model.status(), v1::MODEL_STATUS_ARCHIVED);
  EXPECT_EQ(model.description(), "calorimeter GAN, final");
  for (const char* path : {"visibility", "tags"}) {
    s = update(alice, "calo:1", {path}, everything, &model);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << path << Describe(s);
    EXPECT_NE(s.error_message().find("archived"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(HealthStatus(), 1);
}

TEST_F(ServerDataTest, ListModelsFiltersByDatasetPresetAndParticle) {
  const std::string alice = NewTenant("alice");
  v1::Dataset uploaded;
  const std::string path = WriteShowerFile("ele.h5", 20);
  const std::string bytes = ReadFile(path);
  grpc::Status s = Upload(alice, "electrons", "ele.h5", bytes, gantry::Sha256Hex(bytes), &uploaded);
  ASSERT_TRUE(s.ok()) << Describe(s);
  const auto trained_on = [](const std::string& dataset, const std::string& preset,
                             v1::Particle particle) {
    return [=](v1::ModelVersion& m) {
      m.mutable_lineage()->set_dataset(dataset);
      m.mutable_lineage()->set_model_preset(preset);
      m.set_particle(particle);
    };
  };
  Register("alice", "a", 0.5, v1::VISIBILITY_PRIVATE,
           trained_on(uploaded.id(), "3dgan-25", v1::PARTICLE_ELECTRON));
  Register("alice", "b", 0.2, v1::VISIBILITY_PRIVATE,
           trained_on(uploaded.id(), "tiny", v1::PARTICLE_ELECTRON));
  Register("alice", "c", 0.1, v1::VISIBILITY_PRIVATE,
           trained_on("toymc:layout=25,events=100", "tiny", v1::PARTICLE_PHOTON));

  const auto names = [&](const v1::ListModelsRequest& request) {
    v1::ListModelsResponse listed;
    const grpc::Status status = catalog_->ListModels(Ctx(alice).get(), request, &listed);
    EXPECT_TRUE(status.ok()) << Describe(status);
    std::vector<std::string> out;
    for (const auto& m : listed.models()) out.push_back(m.name());
    return out;
  };
  v1::ListModelsRequest list;
  list.set_dataset("electrons");
  EXPECT_EQ(names(list), (std::vector<std::string>{"b", "a"}));
  list.set_dataset(uploaded.id());
  EXPECT_EQ(names(list), (std::vector<std::string>{"b", "a"}));
  list.set_model_preset("tiny");
  EXPECT_EQ(names(list), (std::vector<std::string>{"b"}));
  list.Clear();
  list.set_particle(v1::PARTICLE_PHOTON);
  EXPECT_EQ(names(list), (std::vector<std::string>{"c"}));
  list.set_particle(v1::PARTICLE_ELECTRON);
  list.set_order_by("metric:fom");
  list.mutable_page()->set_page_size(1);
  v1::ListModelsResponse listed;
  ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.models_size(), 1);
  EXPECT_EQ(listed.models(0).name(), "b");
  list.mutable_page()->set_page_token(listed.next_page_token());
  ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.models_size(), 1);
  EXPECT_EQ(listed.models(0).name(), "a");
  EXPECT_TRUE(listed.next_page_token().empty());

  // Bad filters name the field.
  list.Clear();
  list.set_dataset("no/such name");
  s = catalog_->ListModels(Ctx(alice).get(), list, &listed);
  ExpectFieldError(s, "dataset", "dataset name");
  list.Clear();
  list.set_dataset("ds-!");
  ExpectFieldError(catalog_->ListModels(Ctx(alice).get(), list, &listed), "dataset", "ds-");
  list.Clear();
  list.set_model_preset("3dgan 25");
  ExpectFieldError(catalog_->ListModels(Ctx(alice).get(), list, &listed), "model_preset", "preset");
  list.Clear();
  list.set_particle(static_cast<v1::Particle>(99));
  ExpectFieldError(catalog_->ListModels(Ctx(alice).get(), list, &listed), "particle", "99");
}

TEST_F(ServerDataTest, ListModelsFineTunedFromFindsChildrenWithinWhatTheViewerSees) {
  const std::string alice = NewTenant("alice");
  const std::string bob = NewTenant("bob");
  const auto child_of = [](const std::string& parent) {
    return [=](v1::ModelVersion& m) { m.mutable_lineage()->set_parent_model(parent); };
  };
  Register("alice", "base", 0.5, v1::VISIBILITY_PUBLIC);                       // alice/base:1
  Register("alice", "base", 0.4, v1::VISIBILITY_PRIVATE, child_of("base:1"));  // alice/base:2
  Register("alice", "tuned", 0.3, v1::VISIBILITY_PRIVATE, child_of("base:1"));
  Register("alice", "other", 0.3, v1::VISIBILITY_PRIVATE, child_of("base:2"));
  // Others' tunings of alice's public base:1: bob's unqualified (he has no base:1 of his own) and
  // qualified; carol's "base:1" means her own private base:1, not alice's.
  Register("bob", "bob-tuned", 0.2, v1::VISIBILITY_PUBLIC, child_of("base:1"));
  Register("bob", "bob-qualified", 0.2, v1::VISIBILITY_PRIVATE, child_of("alice/base:1"));
  const std::string carol = NewTenant("carol");
  Register("carol", "base", 0.9, v1::VISIBILITY_PRIVATE);  // carol/base:1
  Register("carol", "carol-tuned", 0.2, v1::VISIBILITY_PUBLIC, child_of("base:1"));
  // A version whose description holds the bytes of a lineage field: found by bytes, refused
  // by the exact check.
  Register("alice", "lookalike", 0.1, v1::VISIBILITY_PRIVATE, [](v1::ModelVersion& m) {
    v1::Lineage decoy;
    decoy.set_parent_model("base:1");
    m.set_description(decoy.SerializeAsString());
  });

  const auto children = [&](const std::string& token, const std::string& parent) {
    v1::ListModelsRequest request;
    request.set_fine_tuned_from(parent);
    v1::ListModelsResponse listed;
    const grpc::Status status = catalog_->ListModels(Ctx(token).get(), request, &listed);
    EXPECT_TRUE(status.ok()) << Describe(status);
    std::vector<std::string> out;
    for (const auto& m : listed.models())
      out.push_back(m.owner() + "/" + m.name() + ":" + std::to_string(m.version()));
    return out;
  };
  EXPECT_EQ(children(alice, "base:1"),
            (std::vector<std::string>{"bob/bob-tuned:1", "alice/tuned:1", "alice/base:2"}));
  EXPECT_EQ(children(alice, "alice/base:1"), children(alice, "base:1"));
  EXPECT_EQ(children(alice, "base:2"), (std::vector<std::string>{"alice/other:1"}));
  // bob sees his own children of alice's public base:1, never alice's private ones; carol sees
  // hers under her own base:1.
  EXPECT_EQ(children(bob, "alice/base:1"),
            (std::vector<std::string>{"bob/bob-qualified:1", "bob/bob-tuned:1"}));
  EXPECT_EQ(children(carol, "base:1"), (std::vector<std::string>{"carol/carol-tuned:1"}));
  EXPECT_TRUE(children(alice, "tuned:1").empty());

  // Pages through the filter hold every child once, newest first (a page may be shorter than
  // page_size where the exact check dropped a row).
  std::vector<std::string> paged;
  v1::ListModelsRequest request;
  request.set_fine_tuned_from("base:1");
  request.mutable_page()->set_page_size(2);
  for (int pages = 0; pages < 5; ++pages) {
    v1::ListModelsResponse page;
    ASSERT_TRUE(catalog_->ListModels(Ctx(alice).get(), request, &page).ok());
    for (const auto& m : page.models()) paged.push_back(m.name());
    if (page.next_page_token().empty()) break;
    request.mutable_page()->set_page_token(page.next_page_token());
  }
  EXPECT_EQ(paged, (std::vector<std::string>{"bob-tuned", "tuned", "base"}));

  // A private version of another tenant is NOT_FOUND, as GetModel says; bad references name the
  // field.
  v1::ListModelsRequest bad;
  v1::ListModelsResponse listed;
  bad.set_fine_tuned_from("alice/base:2");
  grpc::Status s = catalog_->ListModels(Ctx(bob).get(), bad, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  bad.set_fine_tuned_from("base@champion");
  ExpectFieldError(catalog_->ListModels(Ctx(alice).get(), bad, &listed), "fine_tuned_from",
                   "alias");
  bad.set_fine_tuned_from("base");
  s = catalog_->ListModels(Ctx(alice).get(), bad, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("fine_tuned_from"), std::string::npos) << Describe(s);
}

TEST_F(ServerDataTest, GenerateChecksTheRequestAgainstTheModelBeforeLookingForAWorker) {
  const std::string alice = NewTenant("alice");
  Register("alice", "calo", 0.5, v1::VISIBILITY_PRIVATE);
  auto generate = [&](const v1::GenerateRequest& request) {
    auto ctx = Ctx(alice);
    auto reader = generation_->Generate(ctx.get(), request);
    v1::GenerateChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  };
  v1::GenerateRequest request;
  request.set_model("calo:1");
  request.mutable_list()->add_items()->set_energy_gev(100);
  grpc::Status s = generate(request);
  // Valid, and no worker serves generation in this test.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(s);
  EXPECT_NE(s.error_message().find("no worker serves generation"), std::string::npos)
      << s.error_message();

  request.mutable_list()->add_items()->set_energy_gev(600);
  s = generate(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("list.items[1].energy_gev"), std::string::npos)
      << s.error_message();

  request.clear_list();
  request.mutable_range()->mutable_energy_gev()->set_min(5);
  request.mutable_range()->mutable_energy_gev()->set_max(50);
  request.mutable_range()->set_count(10);
  s = generate(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("range.energy_gev.min"), std::string::npos) << s.error_message();

  request.mutable_range()->mutable_energy_gev()->set_min(10);
  request.set_particle(v1::PARTICLE_PHOTON);
  s = generate(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("particle"), std::string::npos) << s.error_message();

  request.set_particle(v1::PARTICLE_UNSPECIFIED);
  v1::ArchiveModelRequest archive;
  archive.set_model("calo:1");
  v1::ModelVersion archived;
  ASSERT_TRUE(catalog_->ArchiveModel(Ctx(alice).get(), archive, &archived).ok());
  s = generate(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
}

TEST_F(ServerDataTest, WorkersRegisterHeartbeatAndMoveCheckpoints) {
  v1::CreateJoinTokenRequest join_request;
  v1::CreateTokenResponse join;
  ASSERT_TRUE(admin_->CreateJoinToken(Ctx(admin_token_).get(), join_request, &join).ok());
  v1::RegisterRequest reg;
  reg.set_name("worker-a");
  reg.set_slots(4);
  reg.set_advertise_host("127.0.0.1");
  (*reg.mutable_labels())["pool"] = "onprem";
  v1::RegisterResponse registered, again;
  ASSERT_TRUE(worker_->Register(Ctx(join.token()).get(), reg, &registered).ok());
  EXPECT_GT(registered.heartbeat_interval_ms(), 0);
  EXPECT_EQ(registered.worker_credential().rfind("gwc_", 0), 0u) << "a worker credential";
  // A live name is refused to a caller that does not show the worker's credential...
  grpc::Status taken = worker_->Register(Ctx(join.token()).get(), reg, &again);
  EXPECT_EQ(taken.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(taken);
  EXPECT_NE(taken.error_message().find("in use"), std::string::npos) << taken.error_message();
  // ... and the worker itself, showing it, keeps its id and credential.
  reg.set_previous_credential(registered.worker_credential());
  ASSERT_TRUE(worker_->Register(Ctx(join.token()).get(), reg, &again).ok());
  EXPECT_EQ(again.worker_id(), registered.worker_id()) << "stable per name";
  EXPECT_EQ(again.worker_credential(), registered.worker_credential());
  const std::string credential = registered.worker_credential();

  {
    auto ctx = Ctx(credential);
    auto stream = worker_->Connect(ctx.get());
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(registered.worker_id());
    ASSERT_TRUE(stream->Write(hello));
    v1::WorkerMessage beat;
    beat.mutable_heartbeat()->set_free_slots(3);
    ASSERT_TRUE(stream->Write(beat));
    v1::ServerMessage ack;
    ASSERT_TRUE(stream->Read(&ack));
    EXPECT_GT(ack.ack().server_time_ms(), 0);
    v1::ListWorkersResponse workers;
    ASSERT_TRUE(admin_->ListWorkers(Ctx(admin_token_).get(), {}, &workers).ok());
    ASSERT_EQ(workers.workers_size(), 1);
    EXPECT_EQ(workers.workers(0).free_slots(), 3);
    EXPECT_TRUE(workers.workers(0).connected());
    EXPECT_EQ(workers.workers(0).labels().at("pool"), "onprem");
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(admin_->ListWorkers(Ctx(admin_token_).get(), {}, &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_FALSE(workers.workers(0).connected());

  // Another worker's id is refused.
  {
    auto ctx = Ctx(credential);
    auto stream = worker_->Connect(ctx.get());
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id("wrk-00000000-0000-0000-0000-000000000000");
    stream->Write(hello);
    stream->WritesDone();
    v1::ServerMessage message;
    EXPECT_FALSE(stream->Read(&message));
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
    EXPECT_NE(s.error_message().find("hello.worker_id"), std::string::npos) << s.error_message();
  }

  // Checkpoints: a rank (its assignment's credential) uploads with sha256 verification, then
  // fetches back.
  DriverWorker host(channel_, join.token(), "worker-b", 4);
  ASSERT_TRUE(host.status().ok()) << Describe(host.status());
  host.set_free_slots(4);
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = GoodSpec();
  v1::Job job;
  ASSERT_TRUE(training_->SubmitJob(Ctx(admin_token_).get(), submit, &job).ok());
  std::optional<v1::ServerMessage> placed = host.Next();
  ASSERT_TRUE(placed.has_value() && placed->has_assignment());
  const std::string rank_credential = placed->assignment().rank_credential();
  EXPECT_EQ(rank_credential.rfind("grk_", 0), 0u) << "a rank credential";
  std::string checkpoint(300000, '\0');
  for (size_t i = 0; i < checkpoint.size(); ++i) checkpoint[i] = static_cast<char>(i * 31 % 251);
  const std::string sha = gantry::Sha256Hex(checkpoint);
  auto upload = [&](const std::string& claimed_sha, v1::UploadCheckpointResponse* response) {
    auto ctx = Ctx(rank_credential);
    auto writer = worker_->UploadCheckpoint(ctx.get(), response);
    v1::UploadCheckpointRequest header;
    header.mutable_header()->set_job_id(job.id());
    header.mutable_header()->set_epoch(1);
    header.mutable_header()->set_step(10);
    header.mutable_header()->set_sha256(claimed_sha);
    header.mutable_header()->set_size_bytes(checkpoint.size());
    writer->Write(header);
    for (size_t at = 0; at < checkpoint.size(); at += 100000) {
      v1::UploadCheckpointRequest chunk;
      chunk.set_chunk(checkpoint.substr(at, 100000));
      writer->Write(chunk);
    }
    writer->WritesDone();
    return writer->Finish();
  };
  v1::UploadCheckpointResponse uploaded;
  grpc::Status s = upload(std::string(64, 'b'), &uploaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << Describe(s);
  s = upload(sha, &uploaded);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(uploaded.sha256(), sha);
  EXPECT_EQ(uploaded.size_bytes(), static_cast<int64_t>(checkpoint.size()));

  v1::FetchCheckpointRequest fetch;
  fetch.set_sha256(sha);
  fetch.set_offset(5);
  auto ctx = Ctx(rank_credential);
  auto reader = worker_->FetchCheckpoint(ctx.get(), fetch);
  v1::CheckpointChunk chunk;
  std::string fetched;
  while (reader->Read(&chunk)) {
    EXPECT_EQ(chunk.total_bytes(), static_cast<int64_t>(checkpoint.size()));
    fetched += chunk.data();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(fetched == checkpoint.substr(5));

  // The job's event log records the checkpoint.
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto wctx = Ctx(admin_token_, 1500);
  auto events = training_->WatchJob(wctx.get(), watch);
  v1::JobEvent event;
  bool saw_checkpoint = false;
  while (events->Read(&event)) {
    if (event.has_checkpoint_saved()) {
      saw_checkpoint = true;
      EXPECT_EQ(event.checkpoint_saved().sha256(), sha);
      break;
    }
  }
  EXPECT_TRUE(saw_checkpoint);
  wctx->TryCancel();
}

}  // namespace
}  // namespace gantry::testing
