#include "workers/runner/dataset_source.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gantry/base/sha256.h"
#include "gantry/base/status_macros.h"
#include "gantry/v1/datasets.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "workers/data/hdf5_io.h"
#include "workers/data/toy_mc.h"

namespace gantry::runner {
namespace {

namespace fs = std::filesystem;

absl::Status Annotate(const absl::Status& status, const std::string& reference) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("dataset \"", reference, "\": ", status.message()));
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& server) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("ReadDataset at ", server, ": ", s.error_message()));
}

bool IsSha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void SetRangesFromEvents(MaterializedDataset& d) {
  const std::vector<float>& e = d.showers.energy_gev;
  if (!e.empty()) {
    const auto [lo, hi] = std::minmax_element(e.begin(), e.end());
    d.energy_min_gev = *lo;
    d.energy_max_gev = *hi;
  }
  const std::vector<float>& t = d.showers.theta_rad;
  if (!t.empty()) {
    const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
    d.theta_min_rad = *lo;
    d.theta_max_rad = *hi;
  }
}

}  // namespace

std::string DatasetSource::CachePath(const std::string& sha256) const {
  return (fs::path(options_.cache_dir) / "datasets" / (sha256 + ".h5")).string();
}

absl::StatusOr<MaterializedDataset> DatasetSource::Materialize(
    const std::string& reference, const std::string& expected_sha256) const {
  absl::StatusOr<MaterializedDataset> result;
  if (absl::StartsWith(reference, "toymc:")) {
    result = FromToyMc(reference);
  } else if (absl::StartsWith(reference, "file://")) {
    result = FromFile(reference);
  } else if (absl::StartsWith(reference, "ds-")) {
    return FromServer(reference, expected_sha256);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset \"", reference,
                     "\": unknown kind; use ds-<id>, toymc:<key=value,...> or file:///path.h5"));
  }
  if (!result.ok()) return Annotate(result.status(), reference);
  if (!absl::StartsWith(reference, "toymc:")) SetRangesFromEvents(*result);
  if (!expected_sha256.empty() && result->sha256 != expected_sha256) {
    return absl::DataLossError(absl::StrCat("dataset \"", reference, "\": sha256 is ",
                                            result->sha256, ", the assignment expects ",
                                            expected_sha256));
  }
  return result;
}

absl::StatusOr<MaterializedDataset> DatasetSource::FromToyMc(const std::string& reference) const {
  ASSIGN_OR_RETURN(data::ToyMcConfig config, data::ParseToyMcSpec(reference));
  config.threads = std::max(config.threads, std::max(1, options_.threads));
  MaterializedDataset out;
  ASSIGN_OR_RETURN(out.showers, data::SimulateToyMc(config));
  out.sha256 = Sha256Hex(data::FormatToyMcSpec(config));
  out.energy_min_gev = config.energy_min_gev;
  out.energy_max_gev = config.energy_max_gev;
  if (config.layout == data::Layout::kVariableAngle3DGan) {
    out.theta_min_rad = config.theta_min_rad;
    out.theta_max_rad = config.theta_max_rad;
  }
  return out;
}

absl::StatusOr<MaterializedDataset> DatasetSource::FromFile(const std::string& reference) const {
  const std::string path = reference.substr(std::string("file://").size());
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError("file:// needs an absolute path (file:///data/file.h5)");
  }
  MaterializedDataset out;
  out.local_path = path;
  ASSIGN_OR_RETURN(out.sha256, Sha256OfFile(path));
  ASSIGN_OR_RETURN(out.showers, data::ReadShowerFile(path));
  return out;
}

absl::StatusOr<MaterializedDataset> DatasetSource::FromServer(
    const std::string& reference, const std::string& expected_sha256) const {
  if (!expected_sha256.empty() && !IsSha256(expected_sha256)) {
    return absl::InvalidArgumentError(absl::StrCat("dataset \"", reference,
                                                   "\": assignment dataset_sha256 \"",
                                                   expected_sha256, "\" is not a sha256"));
  }
  if (options_.cache_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset \"", reference, "\": a cache directory is needed to download it"));
  }
  MaterializedDataset out;
  std::error_code ec;
  fs::create_directories(fs::path(options_.cache_dir) / "datasets", ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("dataset \"", reference, "\": cannot create ",
                                               options_.cache_dir, "/datasets: ", ec.message()));
  }
  // A valid cached copy is reused.
  if (!expected_sha256.empty() && fs::exists(CachePath(expected_sha256))) {
    absl::StatusOr<std::string> cached = Sha256OfFile(CachePath(expected_sha256));
    if (cached.ok() && *cached == expected_sha256) {
      out.sha256 = expected_sha256;
      out.local_path = CachePath(expected_sha256);
      out.from_cache = true;
    } else {
      fs::remove(CachePath(expected_sha256), ec);  // corrupt: fetch again
    }
  }
  if (!out.from_cache) {
    const std::string part =
        (fs::path(options_.cache_dir) / "datasets" /
         ((expected_sha256.empty() ? reference : expected_sha256) + ".h5.part"))
            .string();
    absl::StatusOr<std::string> announced = Download(reference, part, &out.downloaded_bytes);
    if (!announced.ok()) return Annotate(announced.status(), reference);
    absl::StatusOr<std::string> actual = Sha256OfFile(part);
    if (!actual.ok()) return Annotate(actual.status(), reference);
    const std::string& want = expected_sha256.empty() ? *announced : expected_sha256;
    if (*actual != want) {
      fs::remove(part, ec);
      return absl::DataLossError(absl::StrCat(
          "dataset \"", reference, "\": downloaded bytes hash to ", *actual, " but ",
          expected_sha256.empty() ? "the server announced " : "the assignment expects ", want,
          "; the partial file was removed"));
    }
    out.sha256 = *actual;
    out.local_path = CachePath(out.sha256);
    fs::rename(part, out.local_path, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("dataset \"", reference, "\": cannot move ", part,
                                                 " into the cache: ", ec.message()));
    }
  }
  absl::StatusOr<data::ShowerSet> showers = data::ReadShowerFile(out.local_path);
  if (!showers.ok()) return Annotate(showers.status(), reference);
  out.showers = std::move(*showers);
  SetRangesFromEvents(out);
  return out;
}

absl::StatusOr<std::string> DatasetSource::Download(const std::string& id, const std::string& part,
                                                    int64_t* bytes) const {
  if (options_.server.empty()) {
    return absl::InvalidArgumentError("no server address to download it from (--server)");
  }
  std::error_code ec;
  int64_t offset = fs::exists(part, ec) ? static_cast<int64_t>(fs::file_size(part, ec)) : 0;
  if (ec) offset = 0;
  std::ofstream out(part, std::ios::binary | (offset > 0 ? std::ios::app : std::ios::trunc));
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", part));

  auto channel = grpc::CreateChannel(options_.server, grpc::InsecureChannelCredentials());
  auto stub = v1::DatasetService::NewStub(channel);
  grpc::ClientContext context;
  if (!options_.token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ReadDatasetRequest request;
  request.set_dataset_id(id);
  request.set_offset(offset);
  std::unique_ptr<grpc::ClientReader<v1::DatasetChunk>> reader =
      stub->ReadDataset(&context, request);
  v1::DatasetChunk chunk;
  std::string announced;
  int64_t total = -1;
  *bytes = 0;
  while (reader->Read(&chunk)) {
    if (options_.stop != nullptr && options_.stop->load()) {
      context.TryCancel();
      reader->Finish().ok();
      return absl::CancelledError("download cancelled");
    }
    if (!chunk.sha256().empty()) announced = chunk.sha256();
    if (chunk.total_bytes() > 0) total = chunk.total_bytes();
    if (chunk.offset() != offset + *bytes) {
      context.TryCancel();
      reader->Finish().ok();
      return absl::DataLossError(
          absl::StrCat("chunk at offset ", chunk.offset(), ", expected ", offset + *bytes));
    }
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    if (!out) return absl::UnavailableError(absl::StrCat("write to ", part, " failed"));
    *bytes += static_cast<int64_t>(chunk.data().size());
  }
  grpc::Status status = reader->Finish();
  out.close();
  if (!status.ok()) return FromGrpc(status, options_.server);
  if (total >= 0 && offset + *bytes != total) {
    return absl::DataLossError(
        absl::StrCat("stream ended after ", offset + *bytes, " of ", total, " bytes"));
  }
  return announced;
}

}  // namespace gantry::runner
