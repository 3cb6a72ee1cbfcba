// End to end model export: a real gantry-server on a fresh PostgreSQL database and a real
// gantry-worker daemon (serving on, its default) that trains a tiny 3DGAN for a few steps, then
// exports it: `gantry models export` -> CatalogService.ExportModel (resolution, access, router) ->
// WorkerGenerationService.Export (checkpoint fetched and verified, ExportCheckpoint) -> back. The
// files are checked as tests/export checks the offline export: the python3-onnx checker, ONNX
// Runtime (onnxruntime-node) and the PyTorch rebuild of clients/python/gantry_export reproduce
// gantry's own generation from the same checkpoint (export_fixture --checkpoint) to 1e-4.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using ::testing::HasSubstr;

using ::gantry::testing::Exists;
using ::gantry::testing::ReadFile;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

// What an ExportModel call returned.
struct Exported {
  grpc::Status status;
  std::vector<v1::ExportModelChunk> chunks;
};

class ExportE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-export-join-token-0123456789abcdef\n");
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "8000"});
    token_ = NewTenant("physics");
    worker_process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{GANTRY_WORKER_BINARY, "daemon", "--server=" + server_->address(),
                                 "--join-token-file=" + join_token_file_, "--name=x1", "--slots=1",
                                 "--threads=1", "--cache-dir=" + dir_.path() + "/x1",
                                 "--advertise-host=127.0.0.1", "--rendezvous-ports=29950-29969"},
        dir_.path() + "/x1.log");
    ASSERT_GT(worker_process_->pid(), 0);
  }

  void TearDown() override {
    worker_process_.reset();
    ServerFixture::TearDown();
  }

  std::string Logs() {
    return "--- x1\n" + (worker_process_ ? worker_process_->Log() : std::string()) +
           "--- server\n" + server_->Stderr();
  }

  // Runs a program; stdout and stderr kept apart.
  Result Run(const std::vector<std::string>& argv, int timeout_ms = 120000) {
    const std::string out = dir_.path() + "/cmd.out", err = dir_.path() + "/cmd.err";
    std::string command = "exec";
    for (const std::string& a : argv) command += " '" + a + "'";
    command += " >" + out + " 2>" + err + " </dev/null";
    ChildProcess child({"/bin/sh", "-c", command}, dir_.path() + "/cmd.log");
    Result r;
    r.exit_code = child.Wait(timeout_ms);
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // The gantry binary as the tenant.
  Result Gantry(std::vector<std::string> args) {
    std::vector<std::string> argv = {GANTRY_CLI_BINARY, "--server", server_->address(), "--token",
                                     token_};
    argv.insert(argv.end(), args.begin(), args.end());
    return Run(argv);
  }

  // The tiny preset for 25 steps on toy showers of 10-200 GeV (export_fixture's energies),
  // validated on a hold-out of 50 events; its model ref. The checks need a generator that
  // deposits energy in every shower (an empty shower would make the comparison vacuous): these
  // seeds give one, and the tiny learning rate keeps it near its seeded initialisation, the same
  // on every CPU.
  std::string TrainTinyModel() {
    v1::JobSpec spec;
    spec.set_display_name("export-tiny");
    spec.set_model_name("export-tiny");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=250,seed=1,emin=10,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(1);
    spec.mutable_hyper_parameters()->set_batch_per_rank(8);
    spec.mutable_hyper_parameters()->set_seed(1);
    spec.mutable_hyper_parameters()->set_learning_rate(1e-6);
    spec.set_world_size(1);
    spec.mutable_validation()->set_holdout_fraction(0.2);
    v1::Job job = SubmitJob(token_, spec);
    job = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 120000);
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
    return job.model_ref();
  }

  Exported Export(const std::string& token, const std::string& model, int format) {
    v1::ExportModelRequest request;
    request.set_model(model);
    request.set_format(static_cast<v1::ExportFormat>(format));
    Exported e;
    auto ctx = Ctx(token, 60000);
    auto reader = catalog_->ExportModel(ctx.get(), request);
    v1::ExportModelChunk chunk;
    while (reader->Read(&chunk)) e.chunks.push_back(chunk);
    e.status = reader->Finish();
    return e;
  }

  std::string join_token_file_;
  std::string token_;
  std::unique_ptr<ChildProcess> worker_process_;
};

// One body (the training run is most of the cost): the RPC's stream, the CLI's files checked in
// ONNX Runtime and PyTorch, the refusals, and UNAVAILABLE once the worker is gone.
TEST_F(ExportE2eTest, ExportsThroughTheServerAndTheFilesReproduceGantry) {
  const std::string model_ref = TrainTinyModel();
  ASSERT_EQ(model_ref, "export-tiny:1");
  v1::GetModelRequest get;
  get.set_model(model_ref);
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  // The registry's card: the interface the training rank recorded, no file.
  EXPECT_EQ(model.generator().latent_size(), 16);
  EXPECT_EQ(model.generator().grid_size(), 3);
  EXPECT_THAT(model.model_card_json(), HasSubstr("\"file\":null"));
  EXPECT_THAT(model.model_card_json(), HasSubstr("\"latent\":{\"input\":\"latent\",\"size\":16,"));
  Result card_cli = Gantry({"models", "get", model_ref, "--card"});
  ASSERT_EQ(card_cli.exit_code, 0) << card_cli.err;
  EXPECT_EQ(card_cli.out, model.model_card_json() + "\n");

  // The RPC: metadata first (declared size and sha256 match the bytes that follow), then data in
  // order, each chunk at most 1 MiB.
  Exported onnx = Export(token_, model_ref, v1::EXPORT_FORMAT_ONNX);
  ASSERT_TRUE(onnx.status.ok()) << onnx.status.error_message() << Logs();
  ASSERT_GE(onnx.chunks.size(), 2u);
  ASSERT_TRUE(onnx.chunks[0].has_metadata());
  const v1::ExportMetadata& meta = onnx.chunks[0].metadata();
  EXPECT_EQ(meta.format(), v1::EXPORT_FORMAT_ONNX);
  EXPECT_EQ(meta.model_ref(), model_ref);
  EXPECT_EQ(meta.checkpoint_sha256(), model.checkpoint_sha256());
  ASSERT_EQ(meta.inputs_size(), 2);
  EXPECT_EQ(meta.inputs(0).name(), "latent");
  EXPECT_EQ(meta.inputs(1).name(), "energy");
  EXPECT_THAT(std::vector<int64_t>(meta.inputs(1).shape().begin(), meta.inputs(1).shape().end()),
              ::testing::ElementsAre(-1, 1));
  ASSERT_EQ(meta.outputs_size(), 1);
  EXPECT_EQ(meta.outputs(0).name(), "shower");
  EXPECT_THAT(std::vector<int64_t>(meta.outputs(0).shape().begin(), meta.outputs(0).shape().end()),
              ::testing::ElementsAre(-1, 25, 25, 25));
  std::string bytes;
  for (size_t i = 1; i < onnx.chunks.size(); ++i) {
    EXPECT_FALSE(onnx.chunks[i].has_metadata());
    EXPECT_EQ(onnx.chunks[i].offset(), static_cast<int64_t>(bytes.size()));
    EXPECT_LE(onnx.chunks[i].data().size(), 1u << 20);
    bytes += onnx.chunks[i].data();
  }
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), meta.size_bytes());
  EXPECT_EQ(Sha256Hex(bytes), meta.sha256());

  // The CLI: ONNX and PyTorch files, what it wrote printed, no FILE.tmp left.
  const std::string out = dir_.path() + "/out";
  ASSERT_EQ(::mkdir(out.c_str(), 0755), 0);
  Result cli_onnx =
      Gantry({"models", "export", model_ref, "--format", "onnx", "--out", out + "/model.onnx"});
  ASSERT_EQ(cli_onnx.exit_code, 0) << cli_onnx.err << Logs();
  const std::string written = ReadFile(out + "/model.onnx");
  EXPECT_EQ(written, bytes);  // the same checkpoint exports to the same bytes
  EXPECT_THAT(cli_onnx.out, HasSubstr("exported " + model_ref + " as onnx (gantry profile) to " +
                                      out + "/model.onnx (" + std::to_string(written.size()) +
                                      " bytes, sha256 " + Sha256Hex(written) + ")"));
  EXPECT_THAT(cli_onnx.out, HasSubstr("inputs:  latent [N, 16] float32, energy [N, 1] float32"));
  EXPECT_THAT(cli_onnx.out, HasSubstr("outputs: shower [N, 25, 25, 25] float32"));
  EXPECT_FALSE(Exists(out + "/model.onnx.tmp"));
  // The model card beside it: the file's checksum, the model's training range and lineage.
  EXPECT_THAT(cli_onnx.out, HasSubstr("model card: " + out + "/model.onnx.card.json"));
  const std::string card = ReadFile(out + "/model.onnx.card.json");
  EXPECT_THAT(card, HasSubstr("{\"schema\":\"gantry.model_card/1\",\"model\":{\"ref\":\"" +
                              model_ref + "\""));
  EXPECT_THAT(card, HasSubstr("\"file\":{\"name\":\"model.onnx\",\"format\":\"onnx\","
                              "\"size_bytes\":" + std::to_string(written.size()) +
                              ",\"sha256\":\"" + Sha256Hex(written) + "\"}"));
  EXPECT_THAT(card, HasSubstr("\"latent\":{\"input\":\"latent\",\"size\":16,"));
  EXPECT_THAT(card, HasSubstr("\"energy_gev\":{\"min\":" ));
  EXPECT_THAT(card,
              HasSubstr("\"checkpoint\":{\"sha256\":\"" + model.checkpoint_sha256() + "\""));
  EXPECT_THAT(card, HasSubstr("\"job_id\":\"" + model.lineage().job_id() + "\""));
  Result cli_pt = Gantry(
      {"models", "export", "export-tiny@latest-none", "--format", "pytorch", "--out", out + "/x"});
  EXPECT_EQ(cli_pt.exit_code, 1);  // an unknown alias
  EXPECT_THAT(cli_pt.err, HasSubstr("NOT_FOUND"));
  EXPECT_FALSE(Exists(out + "/x"));
  EXPECT_FALSE(Exists(out + "/x.tmp"));
  cli_pt =
      Gantry({"models", "export", model_ref, "--format", "pytorch", "--out", out + "/model.pt"});
  ASSERT_EQ(cli_pt.exit_code, 0) << cli_pt.err << Logs();
  EXPECT_THAT(cli_pt.out, HasSubstr("as pytorch (gantry profile) to " + out + "/model.pt"));
  Result json = Gantry(
      {"--json", "models", "export", model_ref, "--format", "pytorch", "--out", out + "/json.pt"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const std::string pt = ReadFile(out + "/json.pt");
  EXPECT_EQ(pt, ReadFile(out + "/model.pt"));
  EXPECT_THAT(json.out, HasSubstr("\"sha256\":\"" + Sha256Hex(pt) + "\""));
  EXPECT_THAT(json.out, HasSubstr("\"model\":\"" + model_ref + "\""));
  EXPECT_THAT(json.out, HasSubstr("\"modelCard\":\"" + out + "/json.pt.card.json\""));
  EXPECT_THAT(ReadFile(out + "/json.pt.card.json"), HasSubstr("\"format\":\"pytorch\""));

  // A format the CLI does not know is a usage error (exit 2) before anything is sent.
  Result tflite =
      Gantry({"models", "export", model_ref, "--format", "tflite", "--out", out + "/m.tflite"});
  EXPECT_EQ(tflite.exit_code, 2);
  EXPECT_THAT(tflite.err, HasSubstr("'tflite' is not onnx, pytorch or torchscript"));
  EXPECT_FALSE(Exists(out + "/m.tflite"));
  // So is a profile in a format that does not write it.
  Result ddml_onnx = Gantry({"models", "export", model_ref, "--format", "onnx", "--profile", "ddml",
                             "--out", out + "/m.onnx"});
  EXPECT_EQ(ddml_onnx.exit_code, 2);
  EXPECT_THAT(ddml_onnx.err, HasSubstr("give format torchscript"));
  EXPECT_FALSE(Exists(out + "/m.onnx"));

  // The profiles: each file, its card's contract and the consumer's configuration lines.
  Result par04 = Gantry({"models", "export", model_ref, "--format", "onnx", "--profile", "par04",
                         "--out", out + "/model.par04.onnx"});
  ASSERT_EQ(par04.exit_code, 0) << par04.err << Logs();
  EXPECT_THAT(par04.out, HasSubstr("as onnx (par04 profile)"));
  EXPECT_THAT(par04.out, HasSubstr("inputs:  input [N, 20] float32"));
  EXPECT_THAT(par04.out, HasSubstr("outputs: shower [N, 15625] float32"));
  EXPECT_THAT(par04.out, HasSubstr("/Par04/inference/setModelPathName ./model.par04.onnx\n"));
  EXPECT_THAT(par04.out, HasSubstr("/Par04/inference/setSizeLatentVector 16\n"));
  EXPECT_THAT(par04.out, HasSubstr(Sha256Hex(ReadFile(out + "/model.par04.onnx"))));
  const std::string par04_card = ReadFile(out + "/model.par04.onnx.card.json");
  EXPECT_THAT(par04_card, HasSubstr("\"profile\":{\"name\":\"par04\""));
  EXPECT_THAT(par04_card, HasSubstr("\"encoding\":\"E / 1024000 (Par04's fMaxEnergy)\""));
  for (const auto& [profile, file] : {std::pair<std::string, std::string>{"gantry", "model.ts"},
                                      {"par04", "model.par04.ts"},
                                      {"ddml", "model.ddml.ts"}}) {
    Result ts = Gantry({"models", "export", model_ref, "--format", "torchscript", "--profile",
                        profile, "--out", out + "/" + file});
    ASSERT_EQ(ts.exit_code, 0) << profile << ": " << ts.err << Logs();
    EXPECT_THAT(ReadFile(out + "/" + file + ".card.json"), HasSubstr("\"format\":\"torchscript\""));
  }
  EXPECT_THAT(ReadFile(out + "/model.ddml.ts.card.json"), HasSubstr("\"unit\":\"MeV"));

  // An existing --out is refused without --force and left as it was; --force replaces it.
  Result again =
      Gantry({"models", "export", model_ref, "--format", "pytorch", "--out", out + "/model.onnx"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("ALREADY_EXISTS"));
  EXPECT_THAT(again.err, HasSubstr("exists; give another --out or --force"));
  EXPECT_EQ(ReadFile(out + "/model.onnx"), written);
  // So is an existing FILE.card.json (checked before anything is downloaded).
  {
    std::ofstream(out + "/fresh.onnx.card.json") << "someone else's card\n";
  }
  Result card_there =
      Gantry({"models", "export", model_ref, "--format", "onnx", "--out", out + "/fresh.onnx"});
  EXPECT_EQ(card_there.exit_code, 1);
  EXPECT_THAT(card_there.err, HasSubstr("fresh.onnx.card.json exists"));
  EXPECT_FALSE(Exists(out + "/fresh.onnx"));
  EXPECT_EQ(ReadFile(out + "/fresh.onnx.card.json"), "someone else's card\n");
  Result forced = Gantry(
      {"models", "export", model_ref, "--format", "onnx", "--out", out + "/model.onnx", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(ReadFile(out + "/model.onnx"), written);

  // The files against gantry's own generation from the same checkpoint (the one the worker
  // fetched and verified): export_fixture writes inputs and expected showers (and its own
  // exports, replaced by the CLI's), then the three checks of tests/export run on them.
  const std::string ref = dir_.path() + "/ref";
  const std::string checkpoint = dir_.path() + "/x1/models/" + model.checkpoint_sha256() + ".pt";
  ASSERT_TRUE(Exists(checkpoint)) << checkpoint;
  ASSERT_EQ(::mkdir(ref.c_str(), 0755), 0);
  Result fixture =
      Run({GANTRY_EXPORT_FIXTURE, "--checkpoint=" + checkpoint, "--out_dir=" + ref, "--count=4"});
  ASSERT_EQ(fixture.exit_code, 0) << fixture.err;
  ASSERT_EQ(Run({"/bin/cp", out + "/model.onnx", out + "/model.pt", out + "/model.ts",
                 out + "/model.par04.onnx", out + "/model.par04.ts", out + "/model.ddml.ts", ref})
                .exit_code,
            0);
  Result checker = Run({GANTRY_EXPORT_PYTHON3, GANTRY_EXPORT_CHECK, "onnx-checker", ref});
  EXPECT_EQ(checker.exit_code, 0) << checker.out << checker.err;
  Result ort = Run({GANTRY_NODE, GANTRY_ORT_CHECK, ref});
  EXPECT_EQ(ort.exit_code, 0) << ort.out << ort.err;
  Result rebuild = Run({GANTRY_EXPORT_PYTHON3, GANTRY_EXPORT_CHECK, "pytorch", ref});
  EXPECT_EQ(rebuild.exit_code, 0) << rebuild.out << rebuild.err;
  Result consumer = Run({GANTRY_TORCHSCRIPT_CONSUMER, ref});
  EXPECT_EQ(consumer.exit_code, 0) << consumer.out << consumer.err;

  // The card's physics redone with the exported TorchScript file in place of gantry: the training
  // data regenerated from the card's toy MC settings (the same events, another writer), the
  // hold-out split and latent seed the card records, gantry's validation on the file's showers.
  const std::string data = dir_.path() + "/training.h5";
  Result toy = Run({GANTRY_TOYMC_BINARY, model.lineage().dataset(), data});
  ASSERT_EQ(toy.exit_code, 0) << toy.err;
  for (const std::string file : {"model.ts", "model.par04.ts"}) {
    Result physics = Run(
        {GANTRY_CARD_METRICS_CHECK, out + "/" + file, out + "/" + file + ".card.json", data});
    EXPECT_EQ(physics.exit_code, 0) << file << "\n" << physics.out << physics.err;
    std::cout << file << ":\n" << physics.out;
  }

  // Another tenant's private model does not exist for them.
  const std::string other = NewTenant("intruder");
  Exported hidden = Export(other, model_ref, v1::EXPORT_FORMAT_ONNX);
  EXPECT_EQ(hidden.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << hidden.status.error_message();
  EXPECT_TRUE(hidden.chunks.empty());

  // Unspecified and unknown formats: INVALID_ARGUMENT naming the accepted ones.
  for (int format : {0, 7}) {
    Exported bad = Export(token_, model_ref, format);
    EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << format;
    EXPECT_THAT(
        bad.status.error_message(),
        HasSubstr("EXPORT_FORMAT_ONNX, EXPORT_FORMAT_PYTORCH or EXPORT_FORMAT_TORCHSCRIPT"));
    EXPECT_TRUE(bad.chunks.empty());
  }

  // No worker left: UNAVAILABLE once the server saw the daemon go (its control stream closed).
  worker_process_.reset();
  grpc::Status unavailable;
  for (int i = 0; i < 100; ++i) {
    unavailable = Export(token_, model_ref, v1::EXPORT_FORMAT_ONNX).status;
    if (unavailable.error_code() == grpc::StatusCode::UNAVAILABLE &&
        unavailable.error_message().find("no worker can serve") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(unavailable.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(unavailable.error_message(), HasSubstr("no worker can serve"));
  Result none =
      Gantry({"models", "export", model_ref, "--format", "onnx", "--out", out + "/none.onnx"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("UNAVAILABLE"));
  EXPECT_FALSE(Exists(out + "/none.onnx"));
  EXPECT_FALSE(Exists(out + "/none.onnx.tmp"));
}

}  // namespace
}  // namespace gantry::testing
