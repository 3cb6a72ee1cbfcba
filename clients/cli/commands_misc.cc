// `gantry health`, `gantry generate` and `gantry config`.
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/format.h"
#include "clients/cli/json_output.h"
#include "clients/cli/npy_writer.h"
#include "gantry/base/status_macros.h"
#include "gantry/v1/generation.grpc.pb.h"

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
  range.set_min(min);
  range.set_max(max);
  return range;
}

absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const ParsedArgs& args) {
  v1::GenerateRequest request;
  request.set_model(args.Positional(0));
  const std::vector<std::string> energies = args.GetAll("energy");
  const std::vector<std::string> thetas = args.GetAll("theta");
  const bool ranged = args.Has("energy-range");
  if (ranged == !energies.empty()) {
    return UsageError("give either --energy (repeatable) or --energy-range MIN:MAX with --count");
  }
  if (!energies.empty()) {
    if (!thetas.empty() && thetas.size() != 1 && thetas.size() != energies.size()) {
      return UsageError(
          absl::StrCat("--theta: give one value for all showers or one per --energy (",
                       energies.size(), "), got ", thetas.size()));
    }
    for (size_t i = 0; i < energies.size(); ++i) {
      v1::Condition* condition = request.mutable_list()->add_items();
      ASSIGN_OR_RETURN(double energy, ParseDoubleFlag("energy", energies[i]));
      condition->set_energy_gev(energy);
      if (!thetas.empty()) {
        ASSIGN_OR_RETURN(double theta,
                         ParseDoubleFlag("theta", thetas[thetas.size() == 1 ? 0 : i]));
        condition->set_theta_rad(theta);
      }
    }
  } else {
    if (!thetas.empty()) return UsageError("--theta goes with --energy; use --theta-range");
    v1::ConditionRange* range = request.mutable_range();
    ASSIGN_OR_RETURN(*range->mutable_energy_gev(),
                     ParseRangeFlag("energy-range", *args.Get("energy-range")));
    if (auto theta = args.Get("theta-range"); theta.has_value()) {
      ASSIGN_OR_RETURN(*range->mutable_theta_rad(), ParseRangeFlag("theta-range", *theta));
    }
    auto count = args.Get("count");
    if (!count.has_value()) return UsageError("--energy-range needs --count N");
    ASSIGN_OR_RETURN(int n, ParseIntFlag("count", *count));
    range->set_count(n);
  }
  if (auto particle = args.Get("particle"); particle.has_value()) {
    absl::StatusOr<v1::Particle> parsed = ParseParticle(*particle);
    if (!parsed.ok()) return UsageError(absl::StrCat("--particle: ", parsed.status().message()));
    request.set_particle(*parsed);
  }
  if (auto seed = args.Get("seed"); seed.has_value()) {
    ASSIGN_OR_RETURN(uint64_t value, ParseUint64Flag("seed", *seed));
    request.set_seed(value);
  }
  if (auto precision = args.Get("precision"); precision.has_value()) {
    absl::StatusOr<v1::Precision> parsed = ParsePrecision(*precision);
    if (!parsed.ok()) return UsageError(absl::StrCat("--precision: ", parsed.status().message()));
    request.set_precision(*parsed);
  }
  if (auto chunk = args.Get("chunk"); chunk.has_value()) {
    ASSIGN_OR_RETURN(int value, ParseIntFlag("chunk", *chunk));
    request.set_chunk_showers(value);
  }
  return request;
}

absl::Status Generate(CommandContext& context) {
  ASSIGN_OR_RETURN(v1::GenerateRequest request, BuildGenerateRequest(context.args));
  ASSIGN_OR_RETURN(auto stub, NewStub<v1::GenerationService>(context));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  auto rpc = connection->NewLongContext(kGenerateDeadline);
  auto reader = stub->Generate(rpc.get(), request);
  v1::GenerateChunk chunk;
  std::string data;
  std::vector<int64_t> shape;
  std::string model_ref;
  int64_t showers = 0;
  while (reader->Read(&chunk)) {
    if (context.json) RETURN_IF_ERROR(PrintJson(context.out, chunk));
    data += chunk.showers();
    if (chunk.shape_size() > 0) {
      shape.assign(chunk.shape().begin(), chunk.shape().end());
      showers += chunk.shape(0);
    }
    if (!chunk.model_ref().empty()) model_ref = chunk.model_ref();
  }
  RETURN_IF_ERROR(FromGrpc(reader->Finish(), connection->config().server));
  if (!shape.empty()) shape[0] = showers;
  if (auto output = context.args.Get("output"); output.has_value()) {
    RETURN_IF_ERROR(WriteNpyFloat32(*output, shape, data));
  }
  if (!context.json) {
    context.out << "generated " << showers << " showers of shape " << absl::StrJoin(shape, "x")
                << " from " << model_ref;
    if (auto output = context.args.Get("output"); output.has_value()) {
      context.out << " -> " << *output;
    }
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
              << "  [" << (config.ca_cert_source.empty() ? "-" : config.ca_cert_source) << "]\n";
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
       "Generate showers from a registered model (served by issue 5; UNIMPLEMENTED until then)",
       "Conditions are either a list (--energy, repeatable, with optional --theta) or a range\n"
       "(--energy-range MIN:MAX [--theta-range MIN:MAX] --count N). With --output the showers\n"
       "are written as a NumPy .npy array of float32 [n, x, y, z] in GeV per cell.",
       {{"MODEL", "name:version or name@alias"}},
       {{"energy", "GEV", "primary energy of one shower", true},
        {"theta", "RAD", "incidence angle: one for all, or one per --energy", true},
        {"energy-range", "MIN:MAX", "draw energies uniformly from this range [GeV]"},
        {"theta-range", "MIN:MAX", "draw angles uniformly from this range [rad]"},
        {"count", "N", "number of showers with --energy-range"},
        {"particle", "P", "must match the model's particle if given"},
        {"seed", "N", "same seed + model + conditions = same showers"},
        {"precision", "P", "fp32 (default) or bf16"},
        {"chunk", "N", "showers per streamed chunk (default 64)"},
        {"output", "FILE", "write the showers to FILE (.npy)"}},
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
}

std::vector<Command> AllCommands() {
  std::vector<Command> commands;
  AddJobCommands(&commands);
  AddDatasetCommands(&commands);
  AddModelCommands(&commands);
  AddAdminCommands(&commands);
  AddMiscCommands(&commands);
  return commands;
}

}  // namespace gantry::cli
