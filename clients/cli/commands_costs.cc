// `gantry costs`: device-hours and cost of job attempts, grouped by tenant, pool, model and day.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/json_output.h"
#include "clients/cli/table.h"
#include "gantry/v1/training.grpc.pb.h"

namespace gantry::cli {
namespace {

// "2026-11-01" (UTC midnight) or RFC 3339 ("2026-11-01T12:00:00Z").
absl::Status ParseTimeFlag(const std::string& flag, const std::string& value,
                           google::protobuf::Timestamp* out) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%d", value, absl::UTCTimeZone(), &t, &error) &&
      !absl::ParseTime(absl::RFC3339_full, value, &t, &error)) {
    return UsageError(absl::StrCat("--", flag, ": \"", value,
                                   "\" is not a date; give YYYY-MM-DD (UTC) or RFC 3339"));
  }
  out->set_seconds(absl::ToUnixSeconds(t));
  out->set_nanos(
      static_cast<int32_t>((t - absl::FromUnixSeconds(out->seconds())) / absl::Nanoseconds(1)));
  return absl::OkStatus();
}

absl::Status Costs(CommandContext& context) {
  v1::GetCostReportRequest request;
  request.set_tenant(context.args.Get("tenant").value_or(""));
  request.set_pool(context.args.Get("pool").value_or(""));
  for (const std::string& by : context.args.GetAll("by")) {
    for (absl::string_view part : absl::StrSplit(by, ',', absl::SkipEmpty())) {
      request.add_group_by(std::string(part));
    }
  }
  if (auto from = context.args.Get("from")) {
    RETURN_IF_ERROR(ParseTimeFlag("from", *from, request.mutable_start_time()));
  }
  if (auto to = context.args.Get("to")) {
    RETURN_IF_ERROR(ParseTimeFlag("to", *to, request.mutable_end_time()));
  }
  v1::CostReport report;
  RETURN_IF_ERROR(CallUnary(context, &v1::TrainingService::Stub::GetCostReport, request, &report));
  if (context.json) return PrintJson(context.out, report);
  std::vector<std::string> header;
  const auto& groups = request.group_by();
  auto grouped = [&](const char* g) {
    for (const std::string& x : groups) {
      if (x == g) return true;
    }
    return false;
  };
  if (grouped("tenant")) header.push_back("TENANT");
  if (grouped("pool")) header.push_back("POOL");
  if (grouped("model")) header.push_back("MODEL");
  if (grouped("day")) header.push_back("DAY");
  for (const char* h : {"JOBS", "DEVICE-H", "COST USD"}) header.push_back(h);
  Table table(header);
  for (const v1::CostReportRow& row : report.rows()) {
    std::vector<std::string> cells;
    if (grouped("tenant")) cells.push_back(row.tenant());
    if (grouped("pool")) cells.push_back(row.pool().empty() ? "(no pool)" : row.pool());
    if (grouped("model")) cells.push_back(row.model_name());
    if (grouped("day")) cells.push_back(row.day());
    cells.push_back(absl::StrCat(row.jobs()));
    cells.push_back(absl::StrFormat("%.4f", row.device_hours()));
    cells.push_back(absl::StrFormat("%.4f", row.cost_usd()));
    table.AddRow(cells);
  }
  const auto when = [](const google::protobuf::Timestamp& ts) {
    return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(ts.seconds()),
                            absl::UTCTimeZone());
  };
  context.out << "from " << when(report.start_time()) << " to " << when(report.end_time()) << '\n';
  table.Render(context.out);
  context.out << absl::StrFormat("total: %.4f device-h, %.4f USD\n", report.device_hours(),
                                 report.cost_usd());
  return absl::OkStatus();
}

}  // namespace

void AddCostCommands(std::vector<Command>* commands) {
  commands->push_back(
      {{"costs"},
       "Show device-hours and cost of jobs, grouped",
       "Sums every job attempt's devices x its time from placement to its end (running attempts "
       "up to now) and its pool's price, split at UTC midnights. Default range: this calendar "
       "month (UTC) up to now. Tenants see their own costs; admins any --tenant, or * for all.\n"
       "  gantry costs --by tenant,pool --from 2026-11-01",
       {},
       {{"by", "GROUPS", "comma-separated: tenant, pool, model, day (any subset)", true},
        {"from", "DATE", "start, YYYY-MM-DD (UTC) or RFC 3339; default: the month's start"},
        {"to", "DATE", "end (exclusive), YYYY-MM-DD (UTC) or RFC 3339; default: now"},
        {"tenant", "TENANT", "another tenant (admins), or * for every tenant"},
        {"pool", "POOL", "only usage in this pool"}},
       Costs});
}

}  // namespace gantry::cli
