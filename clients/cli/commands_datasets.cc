// `gantry datasets ...`: upload, list, show, download and delete HDF5 shower datasets.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/safe_text.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/format.h"
#include "clients/cli/json_output.h"
#include "clients/cli/table.h"
#include "gantry/v1/datasets.grpc.pb.h"

namespace gantry::cli {
namespace {

using v1::DatasetService;

constexpr size_t kChunkBytes = 1 << 20;  // 1 MiB per message (the API allows 4)
constexpr absl::Duration kTransferDeadline = absl::Hours(6);  // uploads and downloads

void ShowProgress(CommandContext& context, const std::string& verb, int64_t done, int64_t total) {
  if (!context.err_is_tty) return;
  int percent = total > 0 ? static_cast<int>(100.0 * done / total) : 100;
  context.err << "\r" << verb << " " << percent << "%  " << FormatBytes(done) << " / "
              << FormatBytes(total) << "   " << std::flush;
}

void PrintDatasetsTable(const std::vector<const v1::Dataset*>& datasets, std::ostream& out) {
  Table table({"ID", "NAME", "LAYOUT", "EVENTS", "SHAPE", "ENERGY_GEV", "PARTICLE", "SIZE", "AGE"});
  const absl::Time now = absl::Now();
  for (const v1::Dataset* d : datasets) {
    table.AddRow({d->id(), d->name(), LayoutName(d->layout()), absl::StrCat(d->events()),
                  FormatShape(d->shape()), FormatRange(d->energy_range_gev()),
                  ParticleName(d->particle()), FormatBytes(d->size_bytes()),
                  FormatAge(d->created_at(), now)});
  }
  table.Render(out);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status Upload(CommandContext& context) {
  const std::string path = context.args.Positional(0);
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, " is not a readable file"));
  }
  v1::UploadDatasetRequest first;
  v1::UploadDatasetHeader* header = first.mutable_header();
  std::string name = context.args.Get("name").value_or("");
  if (name.empty()) {  // default: the file name without its extension
    name = BaseName(path);
    if (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0) name.resize(dot);
  }
  header->set_name(name);
  header->set_file_name(BaseName(path));
  header->set_size_bytes(info.st_size);
  if (auto particle = context.args.Get("particle"); particle.has_value()) {
    absl::StatusOr<v1::Particle> parsed = ParseParticle(*particle);
    if (!parsed.ok()) return UsageError(absl::StrCat("--particle: ", parsed.status().message()));
    header->set_particle(*parsed);
  }
  RETURN_IF_ERROR(AddKeyValues(context.args, "label", header->mutable_labels()));
  ASSIGN_OR_RETURN(std::string sha256, Sha256OfFile(path));
  header->set_sha256(sha256);

  ASSIGN_OR_RETURN(auto stub, NewStub<DatasetService>(context));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  auto rpc = connection->NewLongContext(kTransferDeadline);
  v1::Dataset dataset;
  auto writer = stub->UploadDataset(rpc.get(), &dataset);
  bool open = writer->Write(first);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(kChunkBytes);
  int64_t sent = 0;
  v1::UploadDatasetRequest chunk;
  while (open && in) {
    in.read(buffer.data(), buffer.size());
    std::streamsize got = in.gcount();
    if (got <= 0) break;
    chunk.set_chunk(buffer.data(), static_cast<size_t>(got));
    open = writer->Write(chunk);
    sent += got;
    ShowProgress(context, "uploading", sent, info.st_size);
  }
  if (open) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (context.err_is_tty) context.err << "\n";
  RETURN_IF_ERROR(FromGrpc(status, connection->config().server));
  if (in.bad()) return absl::DataLossError(absl::StrCat("read error on ", path));
  if (context.json) return PrintJson(context.out, dataset);
  PrintDatasetsTable({&dataset}, context.out);
  return absl::OkStatus();
}

absl::Status List(CommandContext& context) {
  ASSIGN_OR_RETURN(int limit, IntFlagOr(context.args, "limit", 50));
  if (limit < 0) return UsageError("--limit: must be >= 0 (0 = all)");
  v1::ListDatasetsRequest request;
  request.set_name(context.args.Get("name").value_or(""));
  std::vector<v1::Dataset> datasets;
  std::string page_token;
  do {
    request.mutable_page()->set_page_token(page_token);
    int remaining = limit == 0 ? 1000 : limit - static_cast<int>(datasets.size());
    request.mutable_page()->set_page_size(std::min(remaining, 1000));
    v1::ListDatasetsResponse response;
    RETURN_IF_ERROR(CallUnary(context, &DatasetService::Stub::ListDatasets, request, &response));
    for (auto& d : *response.mutable_datasets()) datasets.push_back(std::move(d));
    page_token = response.next_page_token();
  } while (!page_token.empty() && (limit == 0 || static_cast<int>(datasets.size()) < limit));
  if (limit > 0 && static_cast<int>(datasets.size()) > limit) datasets.resize(limit);
  std::vector<const v1::Dataset*> pointers;
  for (const auto& d : datasets) pointers.push_back(&d);
  if (context.json) {
    return PrintJsonArray(context.out, std::vector<const google::protobuf::Message*>(
                                           pointers.begin(), pointers.end()));
  }
  if (datasets.empty()) {
    context.out << "No datasets.\n";
    return absl::OkStatus();
  }
  PrintDatasetsTable(pointers, context.out);
  return absl::OkStatus();
}

absl::StatusOr<v1::Dataset> FetchDataset(CommandContext& context, const std::string& id) {
  v1::GetDatasetRequest request;
  request.set_dataset_id(id);
  v1::Dataset dataset;
  RETURN_IF_ERROR(CallUnary(context, &DatasetService::Stub::GetDataset, request, &dataset));
  return dataset;
}

absl::Status Get(CommandContext& context) {
  ASSIGN_OR_RETURN(v1::Dataset d, FetchDataset(context, context.args.Positional(0)));
  if (context.json) return PrintJson(context.out, d);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"ID", d.id()},
      {"Name", d.name()},
      {"Owner", d.owner()},
      {"Layout", LayoutName(d.layout())},
      {"Events", absl::StrCat(d.events())},
      {"Shape", FormatShape(d.shape())},
      {"Energy [GeV]", FormatRange(d.energy_range_gev())},
      {"Theta [rad]", FormatRange(d.theta_range_rad())},
      {"Particle", ParticleName(d.particle())},
      {"Size", absl::StrCat(FormatBytes(d.size_bytes()), " (", d.size_bytes(), " bytes)")},
      {"SHA-256", d.sha256()},
      {"Created", FormatTimestamp(d.created_at())},
      {"Labels", FormatLabels(d.labels())},
  };
  for (auto& [key, value] : rows) {
    context.out << key << ":" << std::string(14 - key.size(), ' ')
                << (value.empty() ? "-" : EscapeControlText(value)) << '\n';
  }
  return absl::OkStatus();
}

absl::Status Download(CommandContext& context) {
  const std::string id = context.args.Positional(0);
  const std::string output = context.args.Get("output").value_or(absl::StrCat(id, ".h5"));
  const std::string partial = absl::StrCat(output, ".part");
  ASSIGN_OR_RETURN(auto stub, NewStub<DatasetService>(context));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  v1::ReadDatasetRequest request;
  request.set_dataset_id(id);
  auto rpc = connection->NewLongContext(kTransferDeadline);
  auto reader = stub->ReadDataset(rpc.get(), request);
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", partial));
  gantry::Sha256 hash;
  std::string expected_sha;
  int64_t total = 0, received = 0;
  v1::DatasetChunk chunk;
  while (reader->Read(&chunk)) {
    if (!chunk.sha256().empty()) expected_sha = chunk.sha256();
    if (chunk.total_bytes() > 0) total = chunk.total_bytes();
    if (chunk.offset() != received) {
      rpc->TryCancel();
      reader->Finish();
      std::remove(partial.c_str());
      return absl::DataLossError(absl::StrCat("chunk at offset ", chunk.offset(), " but ", received,
                                              " bytes received so far"));
    }
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    hash.Update(chunk.data());
    received += static_cast<int64_t>(chunk.data().size());
    ShowProgress(context, "downloading", received, total);
  }
  grpc::Status status = reader->Finish();
  if (context.err_is_tty) context.err << "\n";
  out.close();
  if (!status.ok()) {
    std::remove(partial.c_str());
    return FromGrpc(status, connection->config().server);
  }
  if (!out) return absl::DataLossError(absl::StrCat("write error on ", partial));
  const std::string actual = hash.HexDigest();
  if (!expected_sha.empty() && actual != expected_sha) {
    std::remove(partial.c_str());
    return absl::DataLossError(
        absl::StrCat("downloaded file has sha256 ", actual, ", server said ", expected_sha));
  }
  if (std::rename(partial.c_str(), output.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot rename ", partial, " to ", output));
  }
  context.out << "wrote " << output << " (" << FormatBytes(received) << ", sha256 " << actual
              << ")\n";
  return absl::OkStatus();
}

absl::Status Delete(CommandContext& context) {
  v1::DeleteDatasetRequest request;
  request.set_dataset_id(context.args.Positional(0));
  v1::DeleteDatasetResponse response;
  RETURN_IF_ERROR(CallUnary(context, &DatasetService::Stub::DeleteDataset, request, &response));
  if (context.json) return PrintJson(context.out, response);
  context.out << "deleted " << request.dataset_id() << '\n';
  return absl::OkStatus();
}

}  // namespace

void AddDatasetCommands(std::vector<Command>* commands) {
  commands->push_back(
      {{"datasets", "upload"},
       "Upload an HDF5 shower file (3DGAN fixed/variable angle or CaloChallenge layout)",
       "Streams FILE in 1 MiB chunks after a header with its size and SHA-256 (computed here);\n"
       "the server checks the layout, shapes and energies before storing it.",
       {{"FILE", "path of the .h5 file"}},
       {{"name", "NAME", "dataset name, unique per tenant (default: the file name without .h5)"},
        {"particle", "P", "electron, photon, pi0 or charged-pion (default: from the file name)"},
        {"label", "K=V", "dataset label", true}},
       Upload});
  commands->push_back({{"datasets", "list"},
                       "List datasets",
                       "",
                       {},
                       {{"name", "NAME", "only the dataset with this name"},
                        {"limit", "N", "at most N datasets (default 50; 0 = all)"}},
                       List});
  commands->push_back({{"datasets", "get"},
                       "Show one dataset",
                       "",
                       {{"DATASET", "ds-<uuid> or the dataset's name"}},
                       {},
                       Get});
  commands->push_back({{"datasets", "download"},
                       "Download a dataset's file (checked against its SHA-256)",
                       "",
                       {{"DATASET", "ds-<uuid> or the dataset's name"}},
                       {{"output", "FILE", "where to write it (default <DATASET>.h5)"}},
                       Download});
  commands->push_back({{"datasets", "delete"},
                       "Delete a dataset (refused while a queued or running job uses it)",
                       "",
                       {{"DATASET", "ds-<uuid> or the dataset's name"}},
                       {},
                       Delete});
}

}  // namespace gantry::cli
