#include "base/status_details.h"

#include <cstdint>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/rpc/error_details.pb.h"

namespace gantry {
namespace {

constexpr absl::string_view kBadRequestUrl = "type.googleapis.com/google.rpc.BadRequest";
constexpr absl::string_view kErrorInfoUrl = "type.googleapis.com/google.rpc.ErrorInfo";
constexpr absl::string_view kRetryInfoUrl = "type.googleapis.com/google.rpc.RetryInfo";

std::string Cut(absl::string_view text) {
  if (text.size() <= kMaxDetailBytes) return std::string(text);
  size_t cut = kMaxDetailBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "...");
}

template <typename Message>
bool ReadPayload(const absl::Status& status, absl::string_view url, Message* out) {
  auto payload = status.GetPayload(url);
  return payload.has_value() && out->ParseFromString(std::string(*payload));
}

template <typename Message>
void WritePayload(absl::Status* status, absl::string_view url, const Message& message) {
  status->SetPayload(url, absl::Cord(message.SerializeAsString()));
}

}  // namespace

absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  if (status.ok()) return status;
  absl::Status out(status.code(), message);
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

bool HasErrorReason(const absl::Status& status) {
  return status.GetPayload(kErrorInfoUrl).has_value();
}

bool HasRetryDelay(const absl::Status& status) {
  return status.GetPayload(kRetryInfoUrl).has_value();
}

absl::Status AddFieldViolation(absl::Status status, absl::string_view field,
                               absl::string_view description) {
  if (status.ok()) return status;
  google::rpc::BadRequest bad;
  ReadPayload(status, kBadRequestUrl, &bad);
  if (static_cast<size_t>(bad.field_violations_size()) >= kMaxFieldViolations) return status;
  google::rpc::BadRequest::FieldViolation* v = bad.add_field_violations();
  v->set_field(Cut(field));
  v->set_description(Cut(description));
  WritePayload(&status, kBadRequestUrl, bad);
  return status;
}

absl::Status SetErrorReason(absl::Status status, absl::string_view reason,
                            const std::map<std::string, std::string>& metadata) {
  if (status.ok()) return status;
  google::rpc::ErrorInfo info;
  info.set_reason(Cut(reason));
  info.set_domain(std::string(kErrorDomain));
  for (const auto& [key, value] : metadata) {
    if (info.metadata_size() >= static_cast<int>(kMaxFieldViolations)) break;
    (*info.mutable_metadata())[Cut(key)] = Cut(value);
  }
  WritePayload(&status, kErrorInfoUrl, info);
  return status;
}

absl::Status SetRetryDelay(absl::Status status, absl::Duration delay) {
  if (status.ok()) return status;
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  google::rpc::RetryInfo retry;
  const int64_t nanos = absl::ToInt64Nanoseconds(delay);
  retry.mutable_retry_delay()->set_seconds(nanos / 1000000000);
  retry.mutable_retry_delay()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  WritePayload(&status, kRetryInfoUrl, retry);
  return status;
}

StatusDetails GetStatusDetails(const absl::Status& status) {
  StatusDetails details;
  google::rpc::BadRequest bad;
  if (ReadPayload(status, kBadRequestUrl, &bad)) {
    for (const auto& v : bad.field_violations()) {
      details.field_violations.push_back({v.field(), v.description()});
    }
  }
  google::rpc::ErrorInfo info;
  if (ReadPayload(status, kErrorInfoUrl, &info)) {
    details.reason = info.reason();
    details.domain = info.domain();
    details.metadata.insert(info.metadata().begin(), info.metadata().end());
  }
  google::rpc::RetryInfo retry;
  if (ReadPayload(status, kRetryInfoUrl, &retry) && retry.has_retry_delay()) {
    details.retry_delay = absl::Seconds(retry.retry_delay().seconds()) +
                          absl::Nanoseconds(retry.retry_delay().nanos());
  }
  return details;
}

std::string DefaultErrorReason(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  return name.empty() ? "UNKNOWN" : name;
}

std::optional<absl::Duration> DefaultRetryDelay(absl::StatusCode code) {
  if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kAborted) {
    return absl::Seconds(1);
  }
  return std::nullopt;
}

std::vector<std::string> DescribeStatusDetails(const absl::Status& status) {
  std::vector<std::string> lines;
  const StatusDetails details = GetStatusDetails(status);
  for (const FieldViolation& v : details.field_violations) {
    lines.push_back(absl::StrCat("  field ", v.field, ": ", v.description));
  }
  if (!details.reason.empty() && details.reason != DefaultErrorReason(status.code())) {
    std::string line = absl::StrCat("  reason: ", details.reason);
    if (!details.metadata.empty()) {
      absl::StrAppend(&line, " (", absl::StrJoin(details.metadata, ", ", absl::PairFormatter("=")),
                      ")");
    }
    lines.push_back(std::move(line));
  }
  if (details.retry_delay.has_value()) {
    lines.push_back(absl::StrCat("  retry after ", absl::FormatDuration(*details.retry_delay)));
  }
  return lines;
}

}  // namespace gantry
