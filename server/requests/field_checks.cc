#include "server/requests/field_checks.h"

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/safe_text.h"
#include "base/status_details.h"
#include "base/status_macros.h"
#include "showers/toy_mc.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

namespace checks {

absl::Status CheckParticle(v1::Particle particle, absl::string_view field) {
  if (!v1::Particle_IsValid(particle)) {
    return Invalid(field,
                   absl::StrCat("is ", static_cast<int>(particle), ", not a known Particle value"));
  }
  return absl::OkStatus();
}

}  // namespace checks

using checks::AllChars;
using checks::CheckFinite;
using checks::CheckInt;
using checks::CheckParticle;
using checks::CheckRange01;
using checks::Invalid;
using checks::Sub;

absl::StatusOr<ModelRef> ParseModelRef(absl::string_view ref, absl::string_view field) {
  if (ref.empty()) {
    return Invalid(field, "is missing; give a model as \"name:version\" or \"name@alias\"");
  }
  ModelRef out;
  const size_t slash = ref.find('/');
  if (slash != absl::string_view::npos) {
    out.owner = std::string(ref.substr(0, slash));
    RETURN_IF_ERROR(ValidateTenantName(out.owner, field));
    ref = ref.substr(slash + 1);
  }
  const size_t at = ref.find('@');
  const size_t colon = ref.rfind(':');
  if (at != absl::string_view::npos) {
    out.name = std::string(ref.substr(0, at));
    out.alias = std::string(ref.substr(at + 1));
    RETURN_IF_ERROR(ValidateModelName(out.name, field));
    RETURN_IF_ERROR(ValidateAlias(out.alias, field));
    return out;
  }
  if (colon == absl::string_view::npos) {
    return Invalid(field, absl::StrCat("\"", BoundedField(ref),
                                       "\" is not a model reference; use \"name:version\" (e.g. "
                                       "\"calo:3\") or \"name@alias\""));
  }
  out.name = std::string(ref.substr(0, colon));
  RETURN_IF_ERROR(ValidateModelName(out.name, field));
  const absl::string_view version = ref.substr(colon + 1);
  if (!absl::SimpleAtoi(version, &out.version) || out.version <= 0 || !AllChars(version, "")) {
    return Invalid(field, absl::StrCat("version \"", BoundedField(version), "\" in \"",
                                       BoundedField(ref), "\" must be a positive integer"));
  }
  return out;
}

absl::StatusOr<DatasetRefKind> ValidateDatasetRef(absl::string_view ref, absl::string_view preset,
                                                  absl::string_view field) {
  if (ref.empty()) {
    return Invalid(field,
                   "is missing; give \"ds-<id>\" (an uploaded dataset), \"toymc:<key=value,...>\" "
                   "or \"file:///absolute/path.h5\"");
  }
  if (absl::StartsWith(ref, "ds-")) {
    RETURN_IF_ERROR(ValidateId(ref, "ds-", field));
    return DatasetRefKind::kUploaded;
  }
  if (absl::StartsWith(ref, "toymc:")) {
    absl::StatusOr<showers::ToyMcConfig> config =
        showers::ParseToyMcSpec(std::string_view(ref.data(), ref.size()));
    // ParseToyMcSpec bounds what it quotes of the reference.
    if (!config.ok()) return Invalid(field, config.status().message());
    absl::Status valid = showers::ValidateToyMcConfig(*config);
    if (!valid.ok()) return Invalid(field, valid.message());
    const bool fixed = config->layout == showers::Layout::kFixedAngle3DGan;
    if ((preset == "3dgan-25" && !fixed) || (preset == "3dgan-51" && fixed)) {
      return Invalid(field,
                     absl::StrCat("toy Monte Carlo layout does not fit model_preset \"",
                                  BoundedField(preset), "\"; use layout=", fixed ? "51" : "25"));
    }
    return DatasetRefKind::kToyMc;
  }
  if (absl::StartsWith(ref, "file://")) {
    const absl::string_view path = ref.substr(7);
    if (path.empty() || path[0] != '/') {
      return Invalid(field, absl::StrCat("\"", BoundedField(ref),
                                         "\" must name an absolute path: file:///dir/file.h5"));
    }
    if (path.find("/../") != absl::string_view::npos || absl::EndsWith(path, "/..")) {
      return Invalid(field, "file:// paths must not contain \"..\"");
    }
    return DatasetRefKind::kFile;
  }
  return Invalid(field, absl::StrCat("\"", BoundedField(ref),
                                     "\" is not a dataset reference; use \"ds-<id>\", "
                                     "\"toymc:<key=value,...>\" or \"file:///path.h5\""));
}

absl::Status ValidateModelName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > 128 || !absl::ascii_isalnum(name[0]) ||
      !AllChars(name, "._-")) {
    return Invalid(field, absl::StrCat("model name \"", BoundedField(name),
                                       "\" is invalid; use 1-128 characters [A-Za-z0-9._-] "
                                       "starting with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAlias(absl::string_view alias, absl::string_view field) {
  bool ok = !alias.empty() && alias.size() <= 63 && absl::ascii_islower(alias[0]);
  for (char c : alias) {
    ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-');
  }
  if (!ok) {
    return Invalid(field, absl::StrCat("alias \"", BoundedField(alias),
                                       "\" is invalid; use [a-z][a-z0-9_-]{0,62}, e.g. "
                                       "\"champion\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateTenantName(absl::string_view name, absl::string_view field) {
  bool ok = !name.empty() && name.size() <= 63 && absl::ascii_islower(name[0]);
  for (char c : name) ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-');
  if (!ok) {
    return Invalid(field, absl::StrCat("tenant name \"", BoundedField(name),
                                       "\" is invalid; use [a-z][a-z0-9-]{0,62}"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDatasetName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > 128 || !AllChars(name, "._-")) {
    return Invalid(field, absl::StrCat("dataset name \"", BoundedField(name),
                                       "\" is invalid; use 1-128 characters [A-Za-z0-9._-]"));
  }
  if (absl::StartsWith(name, "ds-")) {
    return Invalid(field,
                   absl::StrCat("dataset name \"", BoundedField(name),
                                "\" starts with \"ds-\", which marks dataset ids; rename it"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabels(const google::protobuf::Map<std::string, std::string>& labels,
                            absl::string_view field) {
  if (static_cast<int>(labels.size()) > kMaxLabels) {
    return Invalid(field,
                   absl::StrCat("has ", labels.size(), " entries; give at most ", kMaxLabels));
  }
  for (const auto& [key, value] : labels) {
    if (key.empty() || key.size() > 63 || !AllChars(key, "._/-")) {
      return Invalid(field, absl::StrCat("key \"", BoundedField(key),
                                         "\" is invalid; use 1-63 characters [A-Za-z0-9._/-]"));
    }
    if (value.size() > 256) {
      return Invalid(absl::StrCat(field, "[", key, "]"), "is longer than 256 characters");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSha256(absl::string_view hex, absl::string_view field) {
  bool ok = hex.size() == 64;
  for (char c : hex) ok = ok && (absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'));
  if (!ok) return Invalid(field, "must be 64 lower-case hex digits (a SHA-256)");
  return absl::OkStatus();
}

absl::Status ValidateId(absl::string_view id, absl::string_view prefix, absl::string_view field) {
  if (id.empty()) return Invalid(field, absl::StrCat("is missing; give an id \"", prefix, "...\""));
  if (!absl::StartsWith(id, prefix) || id.size() == prefix.size() ||
      id.size() > prefix.size() + 64 || !AllChars(id.substr(prefix.size()), "-")) {
    return Invalid(field,
                   absl::StrCat("\"", BoundedField(id), "\" is not a valid id; ids look like \"",
                                prefix, "<uuid>\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ValidatePage(const v1::PageRequest& page, absl::string_view field) {
  if (page.page_size() < 0 || page.page_size() > kMaxPageSize) {
    return Invalid(Sub(field, "page_size"),
                   absl::StrCat("is ", page.page_size(), "; use 0 (default ", kDefaultPageSize,
                                ") to ", kMaxPageSize));
  }
  if (page.page_token().size() > 1024) {
    return Invalid(Sub(field, "page_token"), "is too long; pass back next_page_token unchanged");
  }
  return page.page_size() == 0 ? kDefaultPageSize : page.page_size();
}

absl::Status ValidateDescription(absl::string_view description, absl::string_view field) {
  if (description.size() > 1024) return Invalid(field, "is longer than 1024 characters");
  return absl::OkStatus();
}

}  // namespace gantry::server
