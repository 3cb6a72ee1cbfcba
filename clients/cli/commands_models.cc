// `gantry models ...`: the model registry: list, show, plots, export, aliases, tags, update,
// archive.
#include <google/protobuf/struct.pb.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/atomic_file.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/export_file.h"
#include "clients/cli/format.h"
#include "clients/cli/json_output.h"
#include "clients/cli/plot_directory.h"
#include "clients/cli/table.h"
#include "clients/plots/model_plots.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "jobspec/export_profile.h"
#include "jobspec/model_card.h"

namespace gantry::cli {
namespace {

// The metrics FormatFieldMetrics does not show (they go on the "Metrics" line).
google::protobuf::Map<std::string, double> OtherThanField(
    const google::protobuf::Map<std::string, double>& metrics) {
  google::protobuf::Map<std::string, double> out;
  for (const auto& [key, value] : metrics) {
    if (!IsFieldMetric(metrics, key) && !absl::StartsWith(key, "left_out_")) out[key] = value;
  }
  return out;
}

// The left-out band's row: the band and its control with their fom beside the MC floor; "" when
// the model was trained on every energy.
std::string LeftOutSummary(const v1::ModelVersion& m) {
  const auto& hp = m.lineage().hyper_parameters();
  auto band = hp.find("left_out_energy_gev");
  if (band == hp.end()) return "";
  auto fom = [&](const std::string& prefix) {
    auto value = m.metrics().find(prefix + "fom");
    auto floor = m.metrics().find(prefix + "fom_null");
    if (value == m.metrics().end()) return std::string("not scored");
    return absl::StrFormat("fom %.4g (MC floor %.4g)", value->second,
                           floor == m.metrics().end() ? 0.0 : floor->second);
  };
  std::string out = absl::StrCat(band->second, " GeV not trained on: ", fom("left_out_"));
  auto control = hp.find("left_out_control_energy_gev");
  absl::StrAppend(&out, control == hp.end()
                            ? "; no control band"
                            : absl::StrCat("; trained ", control->second,
                                           " GeV: ", fom("left_out_control_")));
  return out;
}

using v1::CatalogService;

std::string ModelRef(const v1::ModelVersion& model) {
  return absl::StrCat(model.name(), ":", model.version());
}

void PrintModelsTable(const std::vector<const v1::ModelVersion*>& models, std::ostream& out) {
  Table table(
      {"MODEL", "STATUS", "ALIASES", "PRESET", "PARTICLE", "FOM", "VISIBILITY", "OWNER", "AGE"});
  const absl::Time now = absl::Now();
  for (const v1::ModelVersion* m : models) {
    auto fom = m->metrics().find("fom");
    table.AddRow({ModelRef(*m), ModelStatusName(m->status()), absl::StrJoin(m->aliases(), ","),
                  m->lineage().model_preset(), ParticleName(m->particle()),
                  fom == m->metrics().end() ? "" : absl::StrFormat("%.4g", fom->second),
                  VisibilityName(m->visibility()), m->owner(), FormatAge(m->created_at(), now)});
  }
  table.Render(out);
}

absl::Status PrintModel(CommandContext& context, const v1::ModelVersion& model) {
  if (context.json) return PrintJson(context.out, model);
  PrintModelsTable({&model}, context.out);
  return absl::OkStatus();
}

// "--max-metric fom=0.2" -> MetricFilter{metric: fom, max: 0.2}.
absl::Status AddMetricFilters(const ParsedArgs& args, const std::string& flag, bool is_max,
                              v1::ListModelsRequest* request) {
  for (const std::string& text : args.GetAll(flag)) {
    ASSIGN_OR_RETURN(auto pair, ParseKeyValueFlag(flag, text));
    ASSIGN_OR_RETURN(double bound, ParseDoubleFlag(flag, pair.second));
    v1::MetricFilter* filter = request->add_metric_filters();
    filter->set_metric(pair.first);
    if (is_max) {
      filter->set_max(bound);
    } else {
      filter->set_min(bound);
    }
  }
  return absl::OkStatus();
}

absl::Status List(CommandContext& context) {
  v1::ListModelsRequest request;
  request.set_name(context.args.Get("name").value_or(""));
  RETURN_IF_ERROR(AddKeyValues(context.args, "tag", request.mutable_tags()));
  RETURN_IF_ERROR(AddMetricFilters(context.args, "max-metric", true, &request));
  RETURN_IF_ERROR(AddMetricFilters(context.args, "min-metric", false, &request));
  request.set_order_by(context.args.Get("order-by").value_or(""));
  request.set_include_archived(context.args.Has("include-archived"));
  request.set_dataset(context.args.Get("dataset").value_or(""));
  request.set_model_preset(context.args.Get("preset").value_or(""));
  if (auto particle = context.args.Get("particle"); particle.has_value()) {
    absl::StatusOr<v1::Particle> parsed = ParseParticle(*particle);
    if (!parsed.ok()) return UsageError(absl::StrCat("--particle: ", parsed.status().message()));
    request.set_particle(*parsed);
  }
  ASSIGN_OR_RETURN(int limit, IntFlagOr(context.args, "limit", 50));
  if (limit < 0) return UsageError("--limit: must be >= 0 (0 = all)");
  std::vector<v1::ModelVersion> models;
  std::string page_token;
  do {
    request.mutable_page()->set_page_token(page_token);
    int remaining = limit == 0 ? 1000 : limit - static_cast<int>(models.size());
    request.mutable_page()->set_page_size(std::min(remaining, 1000));
    v1::ListModelsResponse response;
    RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::ListModels, request, &response));
    for (auto& m : *response.mutable_models()) models.push_back(std::move(m));
    page_token = response.next_page_token();
  } while (!page_token.empty() && (limit == 0 || static_cast<int>(models.size()) < limit));
  if (limit > 0 && static_cast<int>(models.size()) > limit) models.resize(limit);
  std::vector<const v1::ModelVersion*> pointers;
  for (const auto& m : models) pointers.push_back(&m);
  if (context.json) {
    return PrintJsonArray(context.out, std::vector<const google::protobuf::Message*>(
                                           pointers.begin(), pointers.end()));
  }
  if (models.empty()) {
    context.out << "No models.\n";
    return absl::OkStatus();
  }
  PrintModelsTable(pointers, context.out);
  return absl::OkStatus();
}

absl::Status Get(CommandContext& context) {
  v1::GetModelRequest request;
  request.set_model(context.args.Positional(0));
  v1::ModelVersion m;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::GetModel, request, &m));
  if (context.args.Has("card")) {
    if (m.model_card_json().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          ModelRef(m), " has no model card in the registry (a baseline, or registered before "
                       "generator interfaces were recorded); `gantry models export` writes one"));
    }
    context.out << m.model_card_json() << "\n";
    return absl::OkStatus();
  }
  if (context.json) return PrintJson(context.out, m);
  const v1::Lineage& lineage = m.lineage();
  std::vector<std::pair<std::string, std::string>> rows = {
      {"Model", ModelRef(m)},
      {"Status", ModelStatusName(m.status())},
      {"Aliases", absl::StrJoin(m.aliases(), ",")},
      {"Owner", m.owner()},
      {"Visibility", VisibilityName(m.visibility())},
      {"Description", m.description()},
      {"Tags", FormatLabels(m.tags())},
      {"Created", FormatTimestamp(m.created_at())},
      {"Particle", ParticleName(m.particle())},
      {"Energy [GeV]", FormatRange(m.energy_range_gev())},
      {"Theta [rad]", FormatRange(m.theta_range_rad())},
      {"Left out", LeftOutSummary(m)},
      {"Checkpoint",
       absl::StrCat(FormatBytes(m.checkpoint_size_bytes()), " sha256 ", m.checkpoint_sha256(),
                    lineage.has_checkpoint_step()
                        ? absl::StrCat(" (epoch ", lineage.checkpoint_epoch(), ", step ",
                                       lineage.checkpoint_step(), ")")
                        : "")},
      {"Metrics", FormatMetrics(OtherThanField(m.metrics()))},
      {"bf16", FormatBf16(m.bf16())},
      {"Job", lineage.job_id()},
      {"Preset", lineage.model_preset()},
      {"Dataset",
       absl::StrCat(lineage.dataset(), lineage.dataset_sha256().empty() ? "" : " sha256 ",
                    lineage.dataset_sha256())},
      {"World size", absl::StrCat(lineage.world_size())},
      {"Parent model", lineage.parent_model()},
      {"Code version", lineage.code_version()},
      {"Hyper-params", FormatLabels(lineage.hyper_parameters())},
  };
  // A summary: validation keeps dozens of histograms per energy bin (--json has them all).
  std::vector<std::string> names, bins;
  for (const auto& h : m.histograms()) {
    if (std::find(names.begin(), names.end(), h.name()) == names.end()) names.push_back(h.name());
    if (!h.energy_bin().empty() &&
        std::find(bins.begin(), bins.end(), h.energy_bin()) == bins.end()) {
      bins.push_back(h.energy_bin());
    }
  }
  std::string histograms;
  if (!names.empty()) {
    constexpr size_t kShown = 6;
    const std::vector<std::string> shown(names.begin(),
                                         names.begin() + std::min(kShown, names.size()));
    histograms = absl::StrCat(
        m.histograms_size(), " (", absl::StrJoin(shown, ", "),
        names.size() > kShown ? absl::StrCat(" and ", names.size() - kShown, " more") : "", ")",
        bins.empty()
            ? ""
            : absl::StrCat(" in ", bins.size(), " energy bins: ", absl::StrJoin(bins, ", ")),
        "; --json for the data");
  }
  rows.push_back({"Histograms", histograms});
  rows.push_back({"Validation", m.validation_curve().empty()
                                    ? ""
                                    : absl::StrCat(m.validation_curve_size(), " points of job ",
                                                   lineage.job_id(), " (below)")});
  for (auto& [key, value] : rows) {
    context.out << key << ":" << std::string(14 - key.size(), ' ')
                << (value.empty() ? "-" : EscapeControlText(value)) << '\n';
  }
  if (const std::string field = FormatFieldMetrics(m.metrics()); !field.empty()) {
    context.out << '\n' << field;
  }
  if (!m.validation_curve().empty()) {
    context.out << '\n' << FormatValidationCurve(m.validation_curve());
  }
  if (auto wanted = context.args.Get("histogram"); wanted.has_value()) {
    int shown = 0;
    for (const auto& h : m.histograms()) {
      if (*wanted != "all" && h.name() != *wanted) continue;
      context.out << '\n' << FormatHistogram(h);
      ++shown;
    }
    if (shown == 0) {
      return absl::NotFoundError(absl::StrCat(ModelRef(m), " has no histogram \"", *wanted,
                                              "\" (it has: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

// --json of `models plots`: {"model", "directory", "files": [{"file", "plot", "energyBin"}],
// "warnings": [...]}.
google::protobuf::Struct PlotsReportJson(const v1::ModelVersion& model,
                                         const PlotDirectory& directory,
                                         const plots::ModelPlotsReport& report) {
  google::protobuf::Struct json;
  auto& fields = *json.mutable_fields();
  fields["model"].set_string_value(ModelRef(model));
  fields["directory"].set_string_value(directory.path());
  auto* files = fields["files"].mutable_list_value();
  for (const plots::PlotFile& file : report.files) {
    auto& entry = *files->add_values()->mutable_struct_value()->mutable_fields();
    entry["file"].set_string_value(file.file_name);
    entry["plot"].set_string_value(file.kind);
    entry["energyBin"].set_string_value(file.energy_bin);
  }
  auto* warnings = fields["warnings"].mutable_list_value();
  for (const std::string& warning : report.warnings) {
    warnings->add_values()->set_string_value(warning);
  }
  return json;
}

absl::Status Plots(CommandContext& context) {
  const std::string out_dir = context.args.Get("out").value_or("");
  if (out_dir.empty()) return UsageError("--out DIR: give the folder to write the plots into");
  const std::string format = context.args.Get("format").value_or("png");
  plots::ModelPlotsOptions options;
  if (format == "png") {
    options.render.format = plots::ImageFormat::kPng;
  } else if (format == "svg") {
    options.render.format = plots::ImageFormat::kSvg;
  } else {
    return UsageError(absl::StrCat("--format: '", format, "' is not png or svg"));
  }
  const bool force = context.args.Has("force");
  RETURN_IF_ERROR(PlotDirectory::Check(out_dir, force));
  v1::GetModelRequest request;
  request.set_model(context.args.Positional(0));
  v1::ModelVersion model;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::GetModel, request, &model));
  ASSIGN_OR_RETURN(std::unique_ptr<PlotDirectory> directory, PlotDirectory::Open(out_dir, force));
  plots::ModelPlotsReport report;
  const absl::Status written = plots::WriteModelPlots(
      model, options,
      [&](const std::string& name, const std::string& bytes) {
        return directory->Write(name, bytes);
      },
      &report);
  for (const std::string& warning : report.warnings) {
    context.err << "gantry: warning: " << EscapeControlText(warning) << '\n';
  }
  RETURN_IF_ERROR(written);
  if (context.json) return PrintJson(context.out, PlotsReportJson(model, *directory, report));
  const size_t figures = report.files.empty() ? 0 : report.files.size() - 1;
  context.out << ModelRef(model) << ": " << figures << " plots in " << directory->path()
              << " (index: " << directory->path() << "/index.md)\n";
  return absl::OkStatus();
}

// "latent [N, 16] float32" for each tensor.
std::string FormatTensors(const google::protobuf::RepeatedPtrField<v1::ExportTensor>& tensors) {
  std::vector<std::string> parts;
  for (const v1::ExportTensor& t : tensors) {
    std::vector<std::string> dims;
    for (int64_t d : t.shape()) dims.push_back(d < 0 ? "N" : absl::StrCat(d));
    parts.push_back(
        absl::StrCat(t.name(), " [", absl::StrJoin(dims, ", "), "] ", t.element_type()));
  }
  return absl::StrJoin(parts, ", ");
}

absl::Status Export(CommandContext& context) {
  const std::string out = context.args.Get("out").value_or("");
  if (out.empty()) return UsageError("--out FILE: give the file to write the export into");
  const std::string format_name = context.args.Get("format").value_or("");
  const std::string profile_name = context.args.Get("profile").value_or("gantry");
  v1::ExportModelRequest request;
  request.set_model(context.args.Positional(0));
  if (format_name.empty()) {
    return UsageError("--format onnx|pytorch|torchscript: give the export format");
  } else if (format_name == "onnx") {
    request.set_format(v1::EXPORT_FORMAT_ONNX);
  } else if (format_name == "pytorch") {
    request.set_format(v1::EXPORT_FORMAT_PYTORCH);
  } else if (format_name == "torchscript") {
    request.set_format(v1::EXPORT_FORMAT_TORCHSCRIPT);
  } else {
    return UsageError(
        absl::StrCat("--format: '", format_name, "' is not onnx, pytorch or torchscript"));
  }
  absl::StatusOr<v1::ExportProfile> profile = jobspec::ParseExportProfile(profile_name);
  if (!profile.ok()) return UsageError(absl::StrCat("--profile: ", profile.status().message()));
  request.set_profile(*profile);
  if (absl::Status s = jobspec::CheckProfileFormat(*profile, request.format()); !s.ok()) {
    return UsageError(absl::StrCat("--profile ", profile_name, ": ", s.message()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ExportFile> file,
                   ExportFile::Create(out, context.args.Has("force")));
  // The model card goes beside the file (FILE.card.json), with the same --force rule.
  const std::string card_path = out + ".card.json";
  if (!context.args.Has("force") && access(card_path.c_str(), F_OK) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(card_path, " exists; give another --out or --force"));
  }
  ASSIGN_OR_RETURN(auto stub, NewStub<v1::CatalogService>(context));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  auto rpc = connection->NewLongContext(absl::Minutes(10));
  auto reader = stub->ExportModel(rpc.get(), request);
  v1::ExportModelChunk chunk;
  v1::ExportMetadata metadata;
  absl::Status written;
  while (reader->Read(&chunk)) {
    if (chunk.has_metadata()) {
      metadata = chunk.metadata();
      written = file->Begin(metadata);
    } else {
      written = file->Append(chunk.offset(), chunk.data());
    }
    if (!written.ok()) {
      rpc->TryCancel();
      break;
    }
  }
  const grpc::Status finished = reader->Finish();
  RETURN_IF_ERROR(written);
  RETURN_IF_ERROR(FromGrpc(finished, connection->config().server));
  RETURN_IF_ERROR(file->Finish());
  // The card from the registry entry of the version exported and the file as verified here.
  metadata.set_size_bytes(file->bytes());
  metadata.set_sha256(file->sha256());
  v1::GetModelRequest get;
  get.set_model(metadata.model_ref());
  v1::ModelVersion model;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::GetModel, get, &model));
  const std::string file_name = file->path().substr(file->path().rfind('/') + 1);
  ASSIGN_OR_RETURN(std::string card, jobspec::ModelCardJson(model, metadata, file_name));
  card += '\n';
  RETURN_IF_ERROR(WriteFileAtomically(card_path, {card}));
  if (context.json) {
    google::protobuf::Struct json;
    auto& fields = *json.mutable_fields();
    fields["out"].set_string_value(file->path());
    fields["model"].set_string_value(metadata.model_ref());
    fields["format"].set_string_value(format_name);
    fields["profile"].set_string_value(jobspec::ExportProfileName(metadata.profile()));
    fields["consumerSnippet"].set_string_value(jobspec::ConsumerSnippet(metadata, file_name));
    fields["sizeBytes"].set_number_value(static_cast<double>(file->bytes()));
    fields["sha256"].set_string_value(file->sha256());
    fields["inputs"].set_string_value(FormatTensors(metadata.inputs()));
    fields["outputs"].set_string_value(FormatTensors(metadata.outputs()));
    fields["modelCard"].set_string_value(card_path);
    return PrintJson(context.out, json);
  }
  context.out << "exported " << metadata.model_ref() << " as " << format_name << " ("
              << jobspec::ExportProfileName(metadata.profile()) << " profile) to " << file->path()
              << " (" << file->bytes() << " bytes, sha256 " << file->sha256() << ")\n"
              << "  inputs:  " << FormatTensors(metadata.inputs()) << "\n"
              << "  outputs: " << FormatTensors(metadata.outputs()) << "\n"
              << "  model card: " << card_path << "\n\n"
              << jobspec::ConsumerSnippet(metadata, file_name);
  return absl::OkStatus();
}

absl::Status AliasSet(CommandContext& context) {
  absl::StatusOr<int> version = ParseIntFlag("version", context.args.Positional(2));
  if (!version.ok() || *version <= 0) {
    return UsageError(absl::StrCat("VERSION: '", context.args.Positional(2),
                                   "' is not a version number (1, 2, ...)"));
  }
  v1::SetAliasRequest request;
  request.set_name(context.args.Positional(0));
  request.set_alias(context.args.Positional(1));
  request.set_version(*version);
  v1::ModelVersion m;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::SetAlias, request, &m));
  return PrintModel(context, m);
}

absl::Status AliasDelete(CommandContext& context) {
  v1::DeleteAliasRequest request;
  request.set_name(context.args.Positional(0));
  request.set_alias(context.args.Positional(1));
  v1::DeleteAliasResponse response;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::DeleteAlias, request, &response));
  if (context.json) return PrintJson(context.out, response);
  context.out << "deleted alias " << request.name() << "@" << request.alias() << '\n';
  return absl::OkStatus();
}

absl::Status Tag(CommandContext& context) {
  v1::SetTagsRequest request;
  request.set_model(context.args.Positional(0));
  const auto& positionals = context.args.positionals();
  for (size_t i = 1; i < positionals.size(); ++i) {
    ASSIGN_OR_RETURN(auto pair, ParseKeyValueFlag("tag", positionals[i]));
    (*request.mutable_set())[pair.first] = pair.second;
  }
  for (const std::string& key : context.args.GetAll("remove")) request.add_remove(key);
  if (request.set().empty() && request.remove().empty()) {
    return UsageError("give at least one KEY=VALUE to set or --remove KEY");
  }
  v1::ModelVersion m;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::SetTags, request, &m));
  if (context.json) return PrintJson(context.out, m);
  context.out << ModelRef(m) << " tags: " << FormatLabels(m.tags()) << '\n';
  return absl::OkStatus();
}

// The update mask holds the fields whose flags are given, in a fixed order.
absl::Status Update(CommandContext& context) {
  v1::UpdateModelRequest request;
  request.set_model(context.args.Positional(0));
  v1::ModelVersion* patch = request.mutable_model_version();
  google::protobuf::FieldMask* mask = request.mutable_update_mask();
  if (auto description = context.args.Get("description"); description.has_value()) {
    patch->set_description(*description);
    mask->add_paths("description");
  }
  if (auto visibility = context.args.Get("visibility"); visibility.has_value()) {
    absl::StatusOr<v1::Visibility> parsed = ParseVisibility(*visibility);
    if (!parsed.ok()) return UsageError(absl::StrCat("--visibility: ", parsed.status().message()));
    patch->set_visibility(*parsed);
    mask->add_paths("visibility");
  }
  if (auto tags = context.args.Get("tags"); tags.has_value()) {
    // "a=1,b" -> {a: "1", b: ""}; "" removes every tag.
    for (absl::string_view item : absl::StrSplit(*tags, ',', absl::SkipEmpty())) {
      const size_t eq = item.find('=');
      const std::string key(item.substr(0, eq));
      if (key.empty()) {
        return UsageError(absl::StrCat("--tags: '", item, "' has no key; write KEY or KEY=VALUE"));
      }
      (*patch->mutable_tags())[key] =
          eq == absl::string_view::npos ? "" : std::string(item.substr(eq + 1));
    }
    mask->add_paths("tags");
  }
  if (mask->paths().empty()) {
    return UsageError("give at least one of --description, --visibility, --tags");
  }
  v1::ModelVersion m;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::UpdateModel, request, &m));
  if (context.json) return PrintJson(context.out, m);
  context.out << ModelRef(m) << " updated (" << absl::StrJoin(mask->paths(), ", ") << ")\n"
              << "  description: " << m.description() << "\n"
              << "  visibility:  " << VisibilityName(m.visibility()) << "\n"
              << "  tags:        " << FormatLabels(m.tags()) << "\n";
  return absl::OkStatus();
}

absl::Status Archive(CommandContext& context) {
  v1::ArchiveModelRequest request;
  request.set_model(context.args.Positional(0));
  v1::ModelVersion m;
  RETURN_IF_ERROR(CallUnary(context, &CatalogService::Stub::ArchiveModel, request, &m));
  return PrintModel(context, m);
}

// The commands that name, tag and archive versions.
void AddModelLabelCommands(std::vector<Command>* commands) {
  commands->push_back({{"models", "alias", "set"},
                       "Point an alias (e.g. champion) at a version",
                       "",
                       {{"NAME", "model name"},
                        {"ALIAS", "[a-z][a-z0-9_-]{0,62}, not a number"},
                        {"VERSION", "version number"}},
                       {},
                       AliasSet});
  commands->push_back({{"models", "alias", "delete"},
                       "Remove an alias",
                       "",
                       {{"NAME", "model name"}, {"ALIAS", "the alias"}},
                       {},
                       AliasDelete});
  commands->push_back({{"models", "tag"},
                       "Set or remove tags of a model version",
                       "",
                       {{"MODEL", "name:version or name@alias"},
                        {"KEY=VALUE", "tags to add or overwrite", true, true}},
                       {{"remove", "KEY", "tag key to remove", true}},
                       Tag});
  commands->push_back(
      {{"models", "update"},
       "Change a version's description, visibility or tags (owner only)",
       "Changes only the fields whose flags are given (the update mask is built from them); at "
       "least one is required. --tags replaces every tag of the version. An archived version "
       "keeps its visibility and tags; its description may change.",
       {{"MODEL", "name:version or name@alias"}},
       {{"description", "TEXT", "new description (at most 1024 characters)"},
        {"visibility", "V", "private or public"},
        {"tags", "K=V,...", "the new tags, comma-separated KEY=VALUE or KEY; '' removes all"}},
       Update});
  commands->push_back({{"models", "archive"},
                       "Archive a version (hidden from listings, no generation; kept for lineage)",
                       "",
                       {{"MODEL", "name:version or name@alias"}},
                       {},
                       Archive});
}

}  // namespace

void AddModelCommands(std::vector<Command>* commands) {
  commands->push_back(
      {{"models", "list"},
       "List model versions (newest first)",
       "",
       {},
       {{"name", "NAME", "only versions of this model"},
        {"tag", "K=V", "only versions carrying this tag", true},
        {"max-metric", "M=X", "only versions with metric M <= X, e.g. fom=0.2", true},
        {"min-metric", "M=X", "only versions with metric M >= X", true},
        {"order-by", "KEY", "created_at (default) or metric:<name> (ascending)"},
        {"include-archived", "", "also list archived versions"},
        {"dataset", "DS",
         "only versions trained on this dataset: its ds- id or name, or a toymc:/file:// "
         "reference"},
        {"preset", "P", "only versions of this model preset, e.g. 3dgan-25"},
        {"particle", "P", "only versions of this particle: electron, photon, pi0 or charged-pion"},
        {"limit", "N", "at most N versions (default 50; 0 = all)"}},
       List});
  commands->push_back({{"models", "get"},
                       "Show a model version: metrics, lineage, histograms",
                       "--card prints the version's model card instead (JSON, docs/API.md "
                       "\"Model card\"): the generator's gantry-profile interface, validity "
                       "domain, provenance and metrics, with no file (an export's card has one).",
                       {{"MODEL", "name:version or name@alias"}},
                       {{"histogram", "NAME",
                         "also print this validation histogram's bins (every energy bin), or all"},
                        {"card", "", "print the model card (JSON) instead"}},
                       Get});
  commands->push_back(
      {{"models", "plots"},
       "Draw a version's validation curve and plots (GAN over Monte Carlo) into PNG or SVG files",
       "Draws the validation curve of the model version (validation_curve: its physics metrics at "
       "every validated checkpoint against the training step, each with its statistical floor "
       "dashed) and the validation histograms stored with it: longitudinal and transverse "
       "profiles, energy-sum, hit-count, sampling-fraction and cell-energy distributions per "
       "energy "
       "bin, and the sampling fraction against energy, each with a GAN/MC ratio panel; writes them "
       "and an index.md into DIR (created when missing). A non-empty DIR is refused unless "
       "--force; "
       "--force replaces files of the same names and leaves other files alone. Histograms that "
       "or curve values that cannot be drawn are skipped with a warning.",
       {{"MODEL", "name:version or name@alias"}},
       {{"out", "DIR", "folder to write into (required)"},
        {"format", "png|svg", "image format (default png)"},
        {"force", "", "write into a non-empty DIR, replacing files of the same names"}},
       Plots});
  commands->push_back(
      {{"models", "export"},
       "Download a version's generator as ONNX, TorchScript or a PyTorch state dict",
       "Exports the model version's generator through a serving worker: --format onnx writes an "
       "ONNX graph (opset 13) for ONNX Runtime, --format torchscript a module for "
       "torch::jit::load, --format pytorch a torch.load-able dict that "
       "clients/python/gantry_export rebuilds. --profile chooses whose input conventions the "
       "file follows: gantry (inputs latent, energy in GeV and, for variable-angle models, "
       "theta; output shower in GeV), par04 (Geant4's Par04 example: one packed input, output "
       "as fractions of the primary's energy; onnx or torchscript) or ddml (Key4hep DDML's "
       "regular-grid GAN: uniform latent, output in MeV, layer-major; torchscript, fixed-angle "
       "models); the command prints the consumer's configuration lines (docs/API.md \"Export "
       "profiles\"). The file is written as FILE.tmp, checked against "
       "the size and sha256 the server declared, then renamed to FILE. Beside it goes "
       "FILE.card.json, the model card: inputs and their units, the latent prior, cell order and "
       "size, the energies and angles it was trained on, provenance, checksums and validation "
       "metrics (docs/API.md \"Model card\"). An existing FILE or card is refused unless --force.",
       {{"MODEL", "name:version or name@alias"}},
       {{"format", "onnx|pytorch|torchscript", "export format (required)"},
        {"profile", "gantry|par04|ddml", "input and output conventions (default gantry)"},
        {"out", "FILE", "file to write (required)"},
        {"force", "", "replace FILE and FILE.card.json if they exist"}},
       Export});
  AddModelLabelCommands(commands);
}

}  // namespace gantry::cli
