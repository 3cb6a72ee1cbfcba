// `gantry health`, `gantry generate` and `gantry config`.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "clients/cli/cli_app.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/completion.h"
#include "clients/cli/format.h"
#include "clients/cli/generation_progress.h"
#include "clients/cli/json_output.h"
#include "clients/cli/npy_writer.h"
#include "clients/cli/reference.h"
#include "clients/cli/shower_output.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "showers/stream/generate_chunk.h"

namespace gantry::cli {
namespace {

constexpr absl::Duration kGenerateDeadline = absl::Minutes(30);

absl::Status Health(CommandContext& context) {
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  const std::string service = context.args.Get("service").value_or("");
  ASSIGN_OR_RETURN(std::string status, connection->CheckHealth(service));
  if (context.json) {
    context.out << "{\"status\":\"" << status << "\"}\n";
  } else {
    context.out << status << '\n';
  }
  if (status != "SERVING") context.exit_code = 1;
  return absl::OkStatus();
}

// "MIN:MAX" -> Range.
absl::StatusOr<v1::Range> ParseRangeFlag(const std::string& flag, const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() != 2) {
    return UsageError(absl::StrCat("--", flag, ": '", text, "' is not of the form MIN:MAX"));
  }
  v1::Range range;
  ASSIGN_OR_RETURN(double min, ParseDoubleFlag(flag, parts[0]));
  ASSIGN_OR_RETURN(double max, ParseDoubleFlag(flag, parts[1]));
  if (min > max) {
    return UsageError(absl::StrCat("--", flag, ": '", text, "' has MIN greater than MAX"));
  }
  range.set_min(min);
  range.set_max(max);
  return range;
}

bool IsRange(const std::string& text) { return text.find(':') != std::string::npos; }

// The flags that say which showers to generate, shorthands folded in.
struct ConditionFlags {
  std::vector<std::string> energies;
  std::vector<std::string> thetas;
  std::optional<std::string> energy_range;
  std::optional<std::string> theta_range;
  std::optional<int> count;
};

// Reads --energy, --theta, --energy-range, --theta-range, --angle and --count, folding
// --energy MIN:MAX, --angle and a single --energy with --count into the lists and ranges.
absl::StatusOr<ConditionFlags> ReadConditionFlags(const ParsedArgs& args) {
  std::vector<std::string> energies = args.GetAll("energy");
  std::vector<std::string> thetas = args.GetAll("theta");
  std::optional<std::string> energy_range = args.Get("energy-range");
  std::optional<std::string> theta_range = args.Get("theta-range");
  if (energies.size() == 1 && IsRange(energies[0])) {
    if (energy_range.has_value()) return UsageError("give --energy MIN:MAX or --energy-range");
    energy_range = energies[0];
    energies.clear();
  }
  for (const std::string& e : energies) {
    if (IsRange(e)) return UsageError("--energy MIN:MAX can be given only once");
  }
  if (auto angle = args.Get("angle"); angle.has_value()) {
    if (!thetas.empty() || theta_range.has_value()) {
      return UsageError("give --angle, or --theta / --theta-range, not both");
    }
    if (IsRange(*angle)) {
      theta_range = *angle;
    } else {
      thetas.push_back(*angle);
    }
  }
  std::optional<int> count;
  if (auto text = args.Get("count"); text.has_value()) {
    ASSIGN_OR_RETURN(int n, ParseIntFlag("count", *text));
    if (n <= 0) return UsageError(absl::StrCat("--count: must be positive, got ", n));
    count = n;
  }
  if (energies.size() == 1 && count.has_value() && !energy_range.has_value()) {
    energy_range = absl::StrCat(energies[0], ":", energies[0]);  // N showers at one energy
    energies.clear();
  }
  if (!energies.empty() && energy_range.has_value()) {
    return UsageError("give either --energy GEV (repeatable) or --energy MIN:MAX, not both");
  }
  return ConditionFlags{std::move(energies), std::move(thetas), std::move(energy_range),
                        std::move(theta_range), count};
}

// Fills the request's range of conditions (no --energy list): the energy range (the model's
// training range by default), the angle and the count.
absl::Status FillConditionRange(const ConditionFlags& flags, const v1::ModelVersion& model,
                                v1::GenerateRequest* request) {
  v1::ConditionRange* range = request->mutable_range();
  if (flags.energy_range.has_value()) {
    ASSIGN_OR_RETURN(*range->mutable_energy_gev(), ParseRangeFlag("energy", *flags.energy_range));
  } else if (model.energy_range_gev().max() > 0) {
    *range->mutable_energy_gev() = model.energy_range_gev();  // the training range
  } else {
    return UsageError(absl::StrCat("--energy MIN:MAX is needed: the model ", model.name(), ":",
                                   model.version(), " records no training energy range"));
  }
  if (!flags.count.has_value()) return UsageError("--energy MIN:MAX needs --count N");
  if (flags.thetas.size() > 1) {
    return UsageError("--theta goes with --energy GEV; use --angle MIN:MAX");
  }
  if (flags.thetas.size() == 1) {
    ASSIGN_OR_RETURN(double theta, ParseDoubleFlag("angle", flags.thetas[0]));
    range->mutable_theta_rad()->set_min(theta);
    range->mutable_theta_rad()->set_max(theta);
  } else if (flags.theta_range.has_value()) {
    ASSIGN_OR_RETURN(*range->mutable_theta_rad(), ParseRangeFlag("angle", *flags.theta_range));
  }
  range->set_count(*flags.count);
  return absl::OkStatus();
}

// Fills the request's list of conditions: one per --energy, with one --theta for all or one each.
absl::Status FillConditionList(const ConditionFlags& flags, v1::GenerateRequest* request) {
  const std::vector<std::string>& energies = flags.energies;
  const std::vector<std::string>& thetas = flags.thetas;
  if (flags.theta_range.has_value()) {
    return UsageError("--angle MIN:MAX goes with --energy MIN:MAX");
  }
  if (!thetas.empty() && thetas.size() != 1 && thetas.size() != energies.size()) {
    return UsageError(absl::StrCat("--theta: give one value for all showers or one per --energy (",
                                   energies.size(), "), got ", thetas.size()));
  }
  if (flags.count.has_value()) {
    return UsageError("--count with a list of --energy values: give one --energy or MIN:MAX");
  }
  for (size_t i = 0; i < energies.size(); ++i) {
    ASSIGN_OR_RETURN(double energy, ParseDoubleFlag("energy", energies[i]));
    std::optional<double> theta;
    if (!thetas.empty()) {
      ASSIGN_OR_RETURN(theta, ParseDoubleFlag("theta", thetas[thetas.size() == 1 ? 0 : i]));
    }
    v1::Condition* condition = request->mutable_list()->add_items();
    condition->set_energy_gev(energy);
    if (theta.has_value()) condition->set_theta_rad(*theta);
  }
  return absl::OkStatus();
}

// Sets the request's options from --particle, --seed, --precision, --chunk and --priority.
absl::Status SetRequestOptions(const ParsedArgs& args, v1::GenerateRequest* request) {
  if (auto particle = args.Get("particle"); particle.has_value()) {
    absl::StatusOr<v1::Particle> parsed = ParseParticle(*particle);
    if (!parsed.ok()) return UsageError(absl::StrCat("--particle: ", parsed.status().message()));
    request->set_particle(*parsed);
  }
  if (auto seed = args.Get("seed"); seed.has_value()) {
    ASSIGN_OR_RETURN(uint64_t value, ParseUint64Flag("seed", *seed));
    request->set_seed(value);
  }
  if (auto precision = args.Get("precision"); precision.has_value()) {
    absl::StatusOr<v1::Precision> parsed = ParsePrecision(*precision);
    if (!parsed.ok()) return UsageError(absl::StrCat("--precision: ", parsed.status().message()));
    request->set_precision(*parsed);
  }
  if (auto chunk = args.Get("chunk"); chunk.has_value()) {
    ASSIGN_OR_RETURN(int value, ParseIntFlag("chunk", *chunk));
    request->set_chunk_showers(value);
  }
  if (auto priority = args.Get("priority"); priority.has_value()) {
    ASSIGN_OR_RETURN(int value, ParseIntFlag("priority", *priority));
    request->set_priority(value);
  }
  return absl::OkStatus();
}

// Builds the request from the flags. `model` (from CatalogService.GetModel) supplies the energy
// range when none is given.
absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const ParsedArgs& args,
                                                         const v1::ModelVersion& model) {
  v1::GenerateRequest request;
  request.set_model(args.Positional(0));
  ASSIGN_OR_RETURN(const ConditionFlags flags, ReadConditionFlags(args));
  const bool ranged = flags.energies.empty();
  if (ranged) {
    RETURN_IF_ERROR(FillConditionRange(flags, model, &request));
  } else {
    RETURN_IF_ERROR(FillConditionList(flags, &request));
  }
  RETURN_IF_ERROR(SetRequestOptions(args, &request));
  return request;
}

int64_t RequestedShowers(const v1::GenerateRequest& request) {
  return request.has_range() ? request.range().count() : request.list().items_size();
}

absl::Status Generate(CommandContext& context) {
  const ParsedArgs& args = context.args;
  std::optional<std::string> out_path = args.Get("out");
  if (auto output = args.Get("output"); output.has_value()) {
    if (out_path.has_value()) return UsageError("give --out or --output, not both");
    out_path = output;
  }
  // Usage errors before any network traffic: a placeholder model stands in for the training range.
  v1::ModelVersion placeholder;
  placeholder.mutable_energy_range_gev()->set_max(1);
  RETURN_IF_ERROR(BuildGenerateRequest(args, placeholder).status());
  // The model: its particle names the file's particle and its training range is the default.
  v1::GetModelRequest get;
  get.set_model(args.Positional(0));
  v1::ModelVersion model;
  RETURN_IF_ERROR(CallUnary(context, &v1::CatalogService::Stub::GetModel, get, &model));
  ASSIGN_OR_RETURN(v1::GenerateRequest request, BuildGenerateRequest(args, model));
  const int64_t total = RequestedShowers(request);
  std::unique_ptr<ShowerOutput> output;
  if (out_path.has_value()) {
    const v1::Particle particle =
        request.particle() != v1::PARTICLE_UNSPECIFIED ? request.particle() : model.particle();
    ASSIGN_OR_RETURN(output,
                     ShowerOutput::Create(*out_path, showers::FileParticle(particle), total));
  }
  ASSIGN_OR_RETURN(auto stub, NewStub<v1::GenerationService>(context));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  auto rpc = connection->NewLongContext(kGenerateDeadline + absl::Milliseconds(50) * total);
  auto reader = stub->Generate(rpc.get(), request);
  const bool show_progress = !args.Has("quiet");
  GenerationProgress progress(total, context.err_is_tty, absl::Now());
  v1::GenerateChunk chunk;
  std::vector<int64_t> shape;
  std::string model_ref;
  int64_t showers = 0;
  absl::Status written;
  while (reader->Read(&chunk)) {
    if (context.json && !output) RETURN_IF_ERROR(PrintJson(context.out, chunk));
    if (chunk.shape_size() > 0) {
      shape.assign(chunk.shape().begin(), chunk.shape().end());
      showers += chunk.shape(0);
    }
    if (!chunk.model_ref().empty()) model_ref = chunk.model_ref();
    if (output != nullptr) {
      written = output->Append(chunk);
      if (!written.ok()) {
        rpc->TryCancel();
        break;
      }
    }
    if (show_progress) context.err << progress.Update(showers, absl::Now()) << std::flush;
  }
  const grpc::Status finished = reader->Finish();
  if (show_progress && showers > 0) {
    context.err << progress.Finish(showers, absl::Now()) << std::flush;
  }
  absl::Status status = written.ok() ? FromGrpc(finished, connection->config().server) : written;
  if (status.ok() && output != nullptr) status = output->Finish();
  if (!status.ok()) {
    if (output != nullptr && output->showers() > 0) {
      return absl::Status(status.code(),
                          absl::StrCat(status.message(), " (", output->showers(),
                                       " showers written to ", output->part_path(), ")"));
    }
    return status;
  }
  if (!shape.empty()) shape[0] = showers;
  // The seed the server used (it draws one when --seed is not given): rerun with it for the same
  // showers.
  std::string seed = request.seed() != 0 ? absl::StrCat(request.seed()) : "";
  const auto& metadata = rpc->GetServerInitialMetadata();
  if (auto it = metadata.find("gantry-seed"); it != metadata.end()) {
    seed = std::string(it->second.data(), it->second.size());
  }
  if (context.json) {
    if (output != nullptr) {
      context.out << "{\"showers\":" << showers << ",\"shape\":[" << absl::StrJoin(shape, ",")
                  << "],\"modelRef\":\"" << model_ref << "\",\"seed\":\"" << seed << "\",\"out\":\""
                  << *out_path << "\"}\n";
    }
  } else {
    context.out << "generated " << showers << " showers of shape " << absl::StrJoin(shape, "x")
                << " from " << model_ref;
    if (!seed.empty()) context.out << " (seed " << seed << ")";
    if (output != nullptr) context.out << " -> " << *out_path;
    context.out << '\n';
  }
  return absl::OkStatus();
}

absl::Status Config(CommandContext& context) {
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  const CliConfig& config = connection->config();
  std::string token = "(none)";
  if (!config.token.empty()) {
    token = absl::StrCat(config.token.substr(0, std::min<size_t>(4, config.token.size())), "... (",
                         config.token.size(), " characters)");
  }
  context.out << "server  = " << config.server << "  [" << config.server_source << "]\n"
              << "token   = " << token << "  ["
              << (config.token_source.empty() ? "-" : config.token_source) << "]\n"
              << "ca_cert = " << (config.ca_cert.empty() ? "(none: plaintext)" : config.ca_cert)
              << "  [" << (config.ca_cert_source.empty() ? "-" : config.ca_cert_source) << "]\n"
              << "allow_plaintext = " << (config.allow_plaintext ? "true" : "false") << "  ["
              << (config.allow_plaintext_source.empty() ? "-" : config.allow_plaintext_source)
              << "]\n";
  return absl::OkStatus();
}

// Prints the shell completion script (bash only) generated from the command table.
absl::Status Completion(CommandContext& context) {
  const std::string shell = context.args.Positional(0);
  if (shell != "bash") {
    return UsageError("completion: unsupported shell '" + shell + "' (supported: bash)");
  }
  context.out << BashCompletionScript(AllCommands(), GlobalFlags());
  return absl::OkStatus();
}

// Prints the command reference (docs/CLI.md) generated from the command table.
absl::Status Reference(CommandContext& context) {
  context.out << MarkdownReference(AllCommands(), GlobalFlags());
  return absl::OkStatus();
}

}  // namespace

void AddMiscCommands(std::vector<Command>* commands) {
  commands->push_back({{"health"},
                       "Check the server's grpc.health.v1 status (exit 0 only when SERVING)",
                       "",
                       {},
                       {{"service", "NAME", "a service name, e.g. gantry.v1.TrainingService"}},
                       Health});
  commands->push_back(
      {{"generate"},
       "Generate showers from a registered model into an HDF5 (or .npy) file",
       "Conditions: --energy MIN:MAX --count N draws energies uniformly (GeV; without --energy\n"
       "the model's training range is used), --angle MIN:MAX (rad) likewise for the angle of\n"
       "variable-angle models; or a list: --energy GEV (repeatable, or once with --count N) with\n"
       "optional --theta. --out FILE.h5 writes HDF5 in the layout of the model's training data\n"
       "(25x25x25: ECAL + target [PDG id, E, 0, 0]; 51x51x25: ECAL, energy, theta, mtheta, eta,\n"
       "sum), FILE.npy a NumPy float32 [n, x, y, z] array in GeV per cell. Showers are appended\n"
       "as they stream in, into FILE.part, renamed to FILE when complete. A progress bar goes\n"
       "to stderr unless --quiet.",
       {{"MODEL", "name:version or name@alias"}},
       {{"energy", "GEV|MIN:MAX", "primary energy (repeatable) or a range with --count", true},
        {"count", "N", "number of showers"},
        {"angle", "RAD|MIN:MAX", "incidence angle or range (variable-angle models)"},
        {"theta", "RAD", "incidence angle: one for all, or one per --energy", true},
        {"energy-range", "MIN:MAX", "same as --energy MIN:MAX"},
        {"theta-range", "MIN:MAX", "same as --angle MIN:MAX"},
        {"particle", "P", "must match the model's particle if given"},
        {"seed", "N", "same seed + model + conditions = same showers"},
        {"precision", "P", "fp32 (default) or bf16"},
        {"chunk", "N", "showers per streamed chunk (default 64)"},
        {"priority", "P", "0..9, higher is served first within the model's queue (see LoadModel)"},
        {"out", "FILE", "write the showers to FILE (.h5/.hdf5: HDF5; .npy: NumPy)"},
        {"output", "FILE", "same as --out"},
        {"quiet", "", "no progress bar"}},
       Generate});
  commands->push_back({{"config"},
                       "Show the resolved server, token (masked) and CA certificate, with sources",
                       "Precedence: flags > environment (GANTRY_SERVER, GANTRY_TOKEN, "
                       "GANTRY_CA_CERT) > config file\n(--config, else GANTRY_CONFIG, else "
                       "~/.config/gantry/config; lines 'key = value' with keys\nserver, token, "
                       "ca_cert).",
                       {},
                       {},
                       Config});
  commands->push_back({{"completion"},
                       "Print the shell completion script (bash)",
                       "Load it in the current shell with 'source <(gantry completion bash)', or "
                       "save it as\n~/.local/share/bash-completion/completions/gantry.",
                       {{"SHELL", "bash"}},
                       {},
                       Completion});
  commands->push_back({{"reference"},
                       "Print this command reference as Markdown (docs/CLI.md is its output)",
                       "",
                       {},
                       {},
                       Reference});
}

std::vector<Command> AllCommands() {
  std::vector<Command> commands;
  AddJobCommands(&commands);
  AddStudyCommands(&commands);
  AddDatasetCommands(&commands);
  AddModelCommands(&commands);
  AddAdminCommands(&commands);
  AddPoolCommands(&commands);
  AddCostCommands(&commands);
  AddMiscCommands(&commands);
  return commands;
}

}  // namespace gantry::cli
