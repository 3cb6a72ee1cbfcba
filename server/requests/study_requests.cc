#include "server/requests/study_requests.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "server/requests/field_checks.h"
#include "server/requests/training_requests.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

using checks::Invalid;

enum class FieldType { kDouble, kInt, kString };

// A JobSpec field a study may vary: its type and how to write it.
struct SearchableField {
  FieldType type;
  std::function<void(v1::JobSpec*, double)> set_number;            // kDouble, kInt
  std::function<void(v1::JobSpec*, const std::string&)> set_text;  // kString
};

const std::map<std::string, SearchableField>& Fields() {
  using S = v1::JobSpec;
  static const auto* const kFields = new std::map<std::string, SearchableField>{
      {"hyper_parameters.learning_rate",
       {FieldType::kDouble,
        [](S* s, double v) { s->mutable_hyper_parameters()->set_learning_rate(v); }}},
      {"hyper_parameters.batch_per_rank",
       {FieldType::kInt,
        [](S* s, double v) { s->mutable_hyper_parameters()->set_batch_per_rank(v); }}},
      {"hyper_parameters.epochs",
       {FieldType::kInt, [](S* s, double v) { s->mutable_hyper_parameters()->set_epochs(v); }}},
      {"hyper_parameters.label_flip_probability",
       {FieldType::kDouble,
        [](S* s, double v) { s->mutable_hyper_parameters()->set_label_flip_probability(v); }}},
      {"hyper_parameters.generator_steps_per_discriminator_step",
       {FieldType::kInt,
        [](S* s, double v) {
          s->mutable_hyper_parameters()->set_generator_steps_per_discriminator_step(v);
        }}},
      {"hyper_parameters.warmup_epochs",
       {FieldType::kInt,
        [](S* s, double v) { s->mutable_hyper_parameters()->set_warmup_epochs(v); }}},
      {"hyper_parameters.lr_decay_to",
       {FieldType::kDouble,
        [](S* s, double v) { s->mutable_hyper_parameters()->set_lr_decay_to(v); }}},
      {"hyper_parameters.optimizer",
       {FieldType::kString, nullptr,
        [](S* s, const std::string& v) { s->mutable_hyper_parameters()->set_optimizer(v); }}},
      {"hyper_parameters.loss_weights.adversarial",
       {FieldType::kDouble,
        [](S* s, double v) {
          s->mutable_hyper_parameters()->mutable_loss_weights()->set_adversarial(v);
        }}},
      {"hyper_parameters.loss_weights.energy",
       {FieldType::kDouble,
        [](S* s, double v) {
          s->mutable_hyper_parameters()->mutable_loss_weights()->set_energy(v);
        }}},
      {"hyper_parameters.loss_weights.angle",
       {FieldType::kDouble,
        [](S* s, double v) {
          s->mutable_hyper_parameters()->mutable_loss_weights()->set_angle(v);
        }}},
      {"hyper_parameters.loss_weights.ecal_sum",
       {FieldType::kDouble,
        [](S* s, double v) {
          s->mutable_hyper_parameters()->mutable_loss_weights()->set_ecal_sum(v);
        }}},
      {"model_overrides.latent_size",
       {FieldType::kInt, [](S* s, double v) { s->mutable_model_overrides()->set_latent_size(v); }}},
      {"model_overrides.generator_filters",
       {FieldType::kInt,
        [](S* s, double v) { s->mutable_model_overrides()->set_generator_filters(v); }}},
      {"model_overrides.discriminator_filters",
       {FieldType::kInt,
        [](S* s, double v) { s->mutable_model_overrides()->set_discriminator_filters(v); }}},
  };
  return *kFields;
}

std::string Param(int i, absl::string_view child = "") {
  std::string f = absl::StrCat("spec.parameters[", i, "]");
  if (!child.empty()) absl::StrAppend(&f, ".", child);
  return f;
}

// A choice of a numeric field as its number; INVALID_ARGUMENT when it is none (or, for integer
// fields, not integral).
absl::StatusOr<double> NumericChoice(const std::string& choice, FieldType type,
                                     absl::string_view field) {
  double v = 0;
  if (!absl::SimpleAtod(choice, &v) || !std::isfinite(v)) {
    return Invalid(field, absl::StrCat("choice \"", BoundedField(choice), "\" is not a number"));
  }
  if (type == FieldType::kInt && v != std::floor(v)) {
    return Invalid(field, absl::StrCat("choice \"", BoundedField(choice), "\" is not an integer"));
  }
  return v;
}

// The bounds a parameter can take (min and max, or every choice), each as a ParameterValue.
std::vector<v1::ParameterValue> Extremes(const v1::SearchParameter& p) {
  std::vector<v1::ParameterValue> out;
  if (p.kind() == v1::SearchParameter::KIND_CATEGORICAL) {
    for (const std::string& c : p.choices()) out.emplace_back().set_category(c);
  } else if (p.kind() == v1::SearchParameter::KIND_INTEGER) {
    out.emplace_back().set_integer(static_cast<int64_t>(p.min()));
    out.emplace_back().set_integer(static_cast<int64_t>(p.max()));
  } else {
    out.emplace_back().set_number(p.min());
    out.emplace_back().set_number(p.max());
  }
  return out;
}

std::string FormatValue(const v1::ParameterValue& v) {
  switch (v.value_case()) {
    case v1::ParameterValue::kNumber:
      return absl::StrCat(v.number());
    case v1::ParameterValue::kInteger:
      return absl::StrCat(v.integer());
    case v1::ParameterValue::kCategory:
      return v.category();
    default:
      return "?";
  }
}

absl::Status ValidateParameter(const v1::StudySpec& spec, int i) {
  const v1::SearchParameter& p = spec.parameters(i);
  auto it = Fields().find(p.name());
  if (it == Fields().end()) {
    return Invalid(Param(i, "name"),
                   absl::StrCat("\"", BoundedField(p.name()),
                                "\" is not a searchable JobSpec field; use one of: ",
                                absl::StrJoin(StudyParameterNames(), ", ")));
  }
  const FieldType type = it->second.type;
  if (!v1::SearchParameter::Kind_IsValid(p.kind()) ||
      p.kind() == v1::SearchParameter::KIND_UNSPECIFIED) {
    return Invalid(Param(i, "kind"),
                   "is missing; use CONTINUOUS, LOG_CONTINUOUS, INTEGER or CATEGORICAL");
  }
  if (p.kind() == v1::SearchParameter::KIND_CATEGORICAL) {
    if (p.choices().empty()) {
      return Invalid(Param(i, "choices"), "is empty; give at least one choice");
    }
    std::set<std::string> seen;
    for (const std::string& c : p.choices()) {
      if (c.empty() || c.size() > 128 || c.find_first_of(",=") != std::string::npos) {
        return Invalid(Param(i, "choices"),
                       absl::StrCat("choice \"", BoundedField(c),
                                    "\" is invalid; use 1-128 characters without ',' or '='"));
      }
      if (!seen.insert(c).second) {
        return Invalid(Param(i, "choices"),
                       absl::StrCat("choice \"", BoundedField(c), "\" is repeated"));
      }
      if (type != FieldType::kString) {
        RETURN_IF_ERROR(NumericChoice(c, type, Param(i, "choices")).status());
      }
    }
  } else {
    if (type == FieldType::kString) {
      return Invalid(Param(i, "kind"), absl::StrCat(p.name(),
                                                    " is text; search it as CATEGORICAL with "
                                                    "choices"));
    }
    if (!p.choices().empty()) {
      return Invalid(Param(i, "choices"), "are only for CATEGORICAL parameters; remove them");
    }
    if (!std::isfinite(p.min()) || !std::isfinite(p.max())) {
      return Invalid(Param(i), "min and max must be finite numbers");
    }
    if (!(p.min() < p.max())) {
      return Invalid(Param(i, "max"),
                     absl::StrCat("is ", p.max(), ", not above min ", p.min(),
                                  "; the range is empty or inverted: give min < max"));
    }
    if (p.kind() == v1::SearchParameter::KIND_LOG_CONTINUOUS && !(p.min() > 0)) {
      return Invalid(Param(i, "min"),
                     absl::StrCat("is ", p.min(), "; a LOG_CONTINUOUS range needs min > 0"));
    }
    if (p.kind() == v1::SearchParameter::KIND_INTEGER &&
        (p.min() != std::floor(p.min()) || p.max() != std::floor(p.max()))) {
      return Invalid(Param(i), absl::StrCat("an INTEGER range needs integral bounds, not ", p.min(),
                                            "..", p.max()));
    }
    if (type == FieldType::kInt && p.kind() != v1::SearchParameter::KIND_INTEGER) {
      return Invalid(Param(i, "kind"), absl::StrCat(p.name(),
                                                    " is an integer field; search it as INTEGER or "
                                                    "CATEGORICAL"));
    }
  }
  // Every extreme value must make a valid job.
  for (const v1::ParameterValue& v : Extremes(p)) {
    v1::JobSpec job = spec.base_job();
    RETURN_IF_ERROR(ApplyParameter(p.name(), v, &job));
    if (absl::Status s = ValidateJobSpec(job); !s.ok()) {
      return Invalid(Param(i), absl::StrCat("the value ", FormatValue(v), " of ", p.name(),
                                            " makes an invalid job: ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> StudyParameterNames() {
  std::vector<std::string> names;
  for (const auto& [name, field] : Fields()) names.push_back(name);
  return names;
}

absl::Status ApplyParameter(const std::string& name, const v1::ParameterValue& value,
                            v1::JobSpec* spec) {
  auto it = Fields().find(name);
  if (it == Fields().end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", BoundedField(name), "\" is not a searchable JobSpec field"));
  }
  const SearchableField& field = it->second;
  if (field.type == FieldType::kString) {
    if (value.value_case() != v1::ParameterValue::kCategory) {
      return absl::InvalidArgumentError(absl::StrCat(name, " takes a category (text)"));
    }
    field.set_text(spec, value.category());
    return absl::OkStatus();
  }
  double number = 0;
  switch (value.value_case()) {
    case v1::ParameterValue::kNumber:
      number = value.number();
      break;
    case v1::ParameterValue::kInteger:
      number = static_cast<double>(value.integer());
      break;
    case v1::ParameterValue::kCategory: {
      ASSIGN_OR_RETURN(number, NumericChoice(value.category(), field.type, name));
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(name, " has no value"));
  }
  if (field.type == FieldType::kInt) {
    if (number != std::floor(number) || std::abs(number) > 1e9) {
      return absl::InvalidArgumentError(absl::StrCat(name, " takes an integer, not ", number));
    }
  }
  field.set_number(spec, number);
  return absl::OkStatus();
}

absl::Status UnderBaseJob(const absl::Status& status) {
  if (status.ok()) return status;
  std::string message(status.message());
  const size_t colon = message.find(": ");
  std::string field = colon == std::string::npos ? "" : message.substr(0, colon);
  if (field == "spec.data_split.folds") {
    field = "spec.folds";
  } else if (absl::StartsWith(field, "spec.")) {
    field = absl::StrCat("spec.base_job.", field.substr(5));
  } else {
    return status;
  }
  const std::string what = message.substr(colon + 2);
  if (status.code() == absl::StatusCode::kInvalidArgument) return Invalid(field, what);
  return absl::Status(status.code(), absl::StrCat(field, ": ", what));
}

absl::Status ValidateStudySpec(const v1::StudySpec& spec) {
  if (spec.display_name().size() > 256) {
    return Invalid("spec.display_name", "is longer than 256 characters");
  }
  if (!spec.has_base_job()) {
    return Invalid("spec.base_job", "is missing; give the JobSpec every trial starts from");
  }
  if (spec.base_job().has_data_split()) {
    return Invalid("spec.base_job.data_split",
                   "is set by the study for K-fold; use spec.folds instead");
  }
  RETURN_IF_ERROR(UnderBaseJob(ValidateJobSpec(spec.base_job())));
  if (spec.parameters().empty()) {
    return Invalid("spec.parameters", "is empty; give at least one parameter to search over");
  }
  if (spec.parameters_size() > kMaxStudyParameters) {
    return Invalid("spec.parameters", absl::StrCat("has ", spec.parameters_size(),
                                                   " entries; give at most ", kMaxStudyParameters));
  }
  std::set<std::string> names;
  for (int i = 0; i < spec.parameters_size(); ++i) {
    if (!names.insert(spec.parameters(i).name()).second) {
      return Invalid(Param(i, "name"), absl::StrCat("\"", BoundedField(spec.parameters(i).name()),
                                                    "\" is searched twice"));
    }
    RETURN_IF_ERROR(ValidateParameter(spec, i));
  }
  const std::string& metric = spec.objective().metric();
  if (metric.size() > 64 || !checks::AllChars(metric, "_")) {
    return Invalid("spec.objective.metric",
                   absl::StrCat("\"", BoundedField(metric),
                                "\" is not a metric name; use a validation metric such as "
                                "\"fom\", \"eprof\" or \"mre_sampling_fraction\""));
  }
  if (spec.base_job().validation().disabled()) {
    return Invalid("spec.base_job.validation.disabled",
                   "is set, but a study judges trials by their validation metrics; unset it");
  }
  if (!v1::SearchAlgorithm_IsValid(spec.algorithm())) {
    return Invalid("spec.algorithm", "is not a known SearchAlgorithm");
  }
  const v1::StudyBudget& b = spec.budget();
  if (b.max_trials() < 1 || b.max_trials() > kMaxStudyTrials) {
    return Invalid("spec.budget.max_trials",
                   absl::StrCat("is ", b.max_trials(), "; set it to 1..", kMaxStudyTrials));
  }
  if (b.max_parallel_trials() < 1 || b.max_parallel_trials() > b.max_trials()) {
    return Invalid("spec.budget.max_parallel_trials",
                   absl::StrCat("is ", b.max_parallel_trials(), "; set it to 1..max_trials (",
                                b.max_trials(), ")"));
  }
  if (!std::isfinite(b.max_device_hours()) || b.max_device_hours() < 0) {
    return Invalid("spec.budget.max_device_hours",
                   absl::StrCat("is ", b.max_device_hours(), "; give hours >= 0 (0 = no limit)"));
  }
  if (spec.folds() != 0 && (spec.folds() < 2 || spec.folds() > kMaxFolds)) {
    return Invalid("spec.folds", absl::StrCat("is ", spec.folds(),
                                              "; use 0 (no cross-validation) or 2..", kMaxFolds));
  }
  const v1::EarlyStopping& es = spec.early_stopping();
  if (!v1::EarlyStopping::Rule_IsValid(es.rule())) {
    return Invalid("spec.early_stopping.rule", "is not a known rule; use MEDIAN or ASHA");
  }
  if (es.min_points() < 0 || es.min_points() > 1000) {
    return Invalid("spec.early_stopping.min_points",
                   absl::StrCat("is ", es.min_points(), "; set it to 0..1000"));
  }
  if (es.rule() != v1::EarlyStopping::RULE_UNSPECIFIED) {
    const v1::CheckpointPolicy& cp = spec.base_job().checkpoint_policy();
    if (cp.every_epochs() == 0 && cp.every_steps() == 0 && cp.every_minutes() == 0) {
      return Invalid("spec.early_stopping",
                     "needs validation during training, which runs at periodic checkpoints; set "
                     "spec.base_job.checkpoint_policy.every_epochs or every_steps");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateListStudies(const v1::ListStudiesRequest& request) {
  for (int i = 0; i < request.states_size(); ++i) {
    if (!v1::StudyState_IsValid(request.states(i)) ||
        request.states(i) == v1::STUDY_STATE_UNSPECIFIED) {
      return Invalid(absl::StrCat("states[", i, "]"),
                     absl::StrCat("is ", request.states(i), ", not a study state such as RUNNING"));
    }
  }
  return ValidatePage(request.page(), "page").status();
}

studies::SearchSpace SearchSpaceOf(const v1::StudySpec& spec) {
  std::vector<studies::Parameter> parameters;
  for (const v1::SearchParameter& p : spec.parameters()) {
    studies::Parameter out;
    out.name = p.name();
    out.low = p.min();
    out.high = p.max();
    switch (p.kind()) {
      case v1::SearchParameter::KIND_LOG_CONTINUOUS:
        out.kind = studies::ParameterKind::kLogContinuous;
        break;
      case v1::SearchParameter::KIND_INTEGER:
        out.kind = studies::ParameterKind::kInteger;
        break;
      case v1::SearchParameter::KIND_CATEGORICAL:
        out.kind = studies::ParameterKind::kCategorical;
        out.low = out.high = 0;
        out.choices.assign(p.choices().begin(), p.choices().end());
        break;
      default:
        out.kind = studies::ParameterKind::kContinuous;
    }
    parameters.push_back(std::move(out));
  }
  return studies::SearchSpace(std::move(parameters));
}

studies::Assignment AssignmentOf(
    const google::protobuf::Map<std::string, v1::ParameterValue>& parameters) {
  studies::Assignment out;
  for (const auto& [name, v] : parameters) {
    switch (v.value_case()) {
      case v1::ParameterValue::kNumber:
        out[name] = v.number();
        break;
      case v1::ParameterValue::kInteger:
        out[name] = static_cast<int64_t>(v.integer());
        break;
      default:
        out[name] = v.category();
    }
  }
  return out;
}

google::protobuf::Map<std::string, v1::ParameterValue> ParametersOf(
    const studies::Assignment& assignment) {
  google::protobuf::Map<std::string, v1::ParameterValue> out;
  for (const auto& [name, value] : assignment) {
    v1::ParameterValue& v = out[name];
    if (const double* d = std::get_if<double>(&value)) v.set_number(*d);
    if (const int64_t* i = std::get_if<int64_t>(&value)) v.set_integer(*i);
    if (const std::string* s = std::get_if<std::string>(&value)) v.set_category(*s);
  }
  return out;
}

std::string FormatParameters(
    const google::protobuf::Map<std::string, v1::ParameterValue>& parameters) {
  std::map<std::string, std::string> sorted;
  for (const auto& [name, v] : parameters) sorted[name] = FormatValue(v);
  return absl::StrJoin(sorted, ", ", absl::PairFormatter("="));
}

}  // namespace gantry::server
