#include "server/http/query_requests.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/field_checks.h"
#include "base/status_macros.h"

namespace gantry::server::http {
namespace {

namespace v1 = ::gantry::v1;

// Query values longer than this are refused (no field of these requests is near it).
constexpr size_t kMaxValueBytes = 1024;
// The most values of one repeated parameter.
constexpr int kMaxRepeated = 64;

absl::Status Invalid(absl::string_view param, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("query parameter ", param, ": ", why));
}

// Checks that every parameter is known, single ones appear once, repeated ones at most
// kMaxRepeated times, and no value is too long.
absl::Status CheckNames(const QueryParams& params, const std::set<std::string>& single,
                        const std::set<std::string>& repeated) {
  for (auto it = params.begin(); it != params.end(); it = params.upper_bound(it->first)) {
    const std::string& name = it->first;
    const size_t count = params.count(name);
    if (single.count(name) == 0 && repeated.count(name) == 0) {
      std::set<std::string> all = single;
      all.insert(repeated.begin(), repeated.end());
      return Invalid(name.substr(0, 64),
                     absl::StrCat("unknown; this route takes ", absl::StrJoin(all, ", ")));
    }
    if (single.count(name) > 0 && count > 1) return Invalid(name, "given more than once");
    if (count > kMaxRepeated) {
      return Invalid(name, absl::StrCat("given ", count, " times; at most ", kMaxRepeated));
    }
  }
  for (const auto& [name, value] : params) {
    if (value.size() > kMaxValueBytes) {
      return Invalid(name, absl::StrCat("longer than ", kMaxValueBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

std::string Single(const QueryParams& params, const std::string& name) {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

absl::StatusOr<bool> Bool(const QueryParams& params, const std::string& name) {
  const std::string value = absl::AsciiStrToLower(Single(params, name));
  if (value.empty()) return false;
  if (std::optional<bool> parsed = checks::ParseBoolWord(value)) return *parsed;
  return Invalid(name, "must be true or false");
}

absl::StatusOr<int32_t> Int(const QueryParams& params, const std::string& name, int32_t fallback) {
  const std::string value = Single(params, name);
  if (value.empty()) return fallback;
  int32_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) return Invalid(name, "must be an integer");
  return n;
}

// "name<0.05", "name<=0.05", "name>0.1", "name>=0.1".
absl::StatusOr<v1::MetricFilter> ParseMetricFilter(const std::string& text) {
  const size_t op = text.find_first_of("<>");
  const auto bad = [&] {
    return Invalid("metricFilters",
                   absl::StrCat("\"", text.substr(0, 64),
                                "\" is not METRIC<VALUE, METRIC<=VALUE, METRIC>VALUE or "
                                "METRIC>=VALUE, e.g. mre_sampling_fraction<0.05"));
  };
  if (op == std::string::npos || op == 0) return bad();
  const bool upper = text[op] == '<';
  size_t value_at = op + 1;
  if (value_at < text.size() && text[value_at] == '=') ++value_at;
  double value = 0;
  if (!absl::SimpleAtod(text.substr(value_at), &value)) return bad();
  v1::MetricFilter filter;
  filter.set_metric(std::string(absl::StripAsciiWhitespace(text.substr(0, op))));
  if (upper) {
    filter.set_max(value);
  } else {
    filter.set_min(value);
  }
  return filter;
}

absl::Status ReadPage(const QueryParams& params, v1::PageRequest* page) {
  ASSIGN_OR_RETURN(int32_t size, Int(params, "pageSize", 0));
  page->set_page_size(size);
  page->set_page_token(Single(params, "pageToken"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ListModelsRequest> ListModelsRequestFrom(const QueryParams& params) {
  RETURN_IF_ERROR(
      CheckNames(params,
                 {"name", "orderBy", "includeArchived", "dataset", "modelPreset", "particle",
                  "pageSize", "pageToken", "q", "nameContains", "owner", "alias", "fineTunedFrom"},
                 {"tags", "metricFilters"}));
  v1::ListModelsRequest r;
  r.set_name(Single(params, "name"));
  r.set_order_by(Single(params, "orderBy"));
  ASSIGN_OR_RETURN(bool archived, Bool(params, "includeArchived"));
  r.set_include_archived(archived);
  r.set_dataset(Single(params, "dataset"));
  r.set_model_preset(Single(params, "modelPreset"));
  if (const std::string particle = Single(params, "particle"); !particle.empty()) {
    v1::Particle value = v1::PARTICLE_UNSPECIFIED;
    if (!v1::Particle_Parse(particle, &value)) {
      return Invalid("particle",
                     "must be PARTICLE_ELECTRON, PARTICLE_PHOTON, PARTICLE_PI0 or "
                     "PARTICLE_CHARGED_PION");
    }
    r.set_particle(value);
  }
  RETURN_IF_ERROR(ReadPage(params, r.mutable_page()));
  auto [tags_begin, tags_end] = params.equal_range("tags");
  for (auto it = tags_begin; it != tags_end; ++it) {
    const size_t colon = it->second.find(':');
    if (colon == std::string::npos || colon == 0) {
      return Invalid("tags", "must be KEY:VALUE, e.g. tags=campaign:2025");
    }
    const std::string key = it->second.substr(0, colon);
    const std::string value = it->second.substr(colon + 1);
    auto [existing, inserted] = r.mutable_tags()->insert({key, value});
    if (!inserted && existing->second != value) {
      return Invalid("tags", absl::StrCat("key \"", key.substr(0, 64), "\" given twice"));
    }
  }
  auto [filters_begin, filters_end] = params.equal_range("metricFilters");
  for (auto it = filters_begin; it != filters_end; ++it) {
    ASSIGN_OR_RETURN(*r.add_metric_filters(), ParseMetricFilter(it->second));
  }
  if (params.count("q") > 0 && params.count("nameContains") > 0) {
    return Invalid("q", "and nameContains are the same filter; give one");
  }
  r.set_name_contains(params.count("q") > 0 ? Single(params, "q") : Single(params, "nameContains"));
  r.set_owner(Single(params, "owner"));
  r.set_fine_tuned_from(Single(params, "fineTunedFrom"));
  r.set_alias(Single(params, "alias"));
  return r;
}

absl::StatusOr<v1::ListJobsRequest> ListJobsRequestFrom(const QueryParams& params) {
  RETURN_IF_ERROR(CheckNames(params, {"pageSize", "pageToken"}, {"state"}));
  v1::ListJobsRequest r;
  auto [begin, end] = params.equal_range("state");
  for (auto it = begin; it != end; ++it) {
    v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
    if (!v1::JobState_Parse(it->second, &state) &&
        !v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(it->second), &state)) {
      return Invalid("state", absl::StrCat("\"", it->second.substr(0, 64),
                                           "\" is not a job state, e.g. JOB_STATE_RUNNING"));
    }
    r.add_states(state);
  }
  RETURN_IF_ERROR(ReadPage(params, r.mutable_page()));
  return r;
}

absl::StatusOr<v1::GetJobLogsRequest> GetJobLogsRequestFrom(const QueryParams& params,
                                                            const std::string& job_id) {
  RETURN_IF_ERROR(CheckNames(params, {"rank", "tail"}, {}));
  v1::GetJobLogsRequest r;
  r.set_job_id(job_id);
  ASSIGN_OR_RETURN(int32_t rank, Int(params, "rank", -1));
  ASSIGN_OR_RETURN(int32_t tail, Int(params, "tail", 0));
  r.set_rank(rank);
  r.set_tail(tail);
  return r;
}

}  // namespace gantry::server::http
