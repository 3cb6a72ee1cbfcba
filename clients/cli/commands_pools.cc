// `gantry admin pools ...`: pools of workers, their provisioners and what the autoscaler observes
// (admin tokens only).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "clients/cli/arg_parser.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/format.h"
#include "clients/cli/json_output.h"
#include "clients/cli/table.h"
#include "gantry/v1/admin.grpc.pb.h"
#include "google/protobuf/util/json_util.h"

namespace gantry::cli {
namespace {

using v1::AdminService;

std::string ProvisionerName(const v1::ProvisionerSpec& p) {
  switch (p.kind_case()) {
    case v1::ProvisionerSpec::kCommand:
      return "command";
    case v1::ProvisionerSpec::kSlurm:
      return "slurm";
    default:
      return "static";
  }
}

void PrintPoolsTable(const std::vector<const v1::Pool*>& pools, std::ostream& out) {
  Table table({"POOL", "DEVICE", "PRICE/H", "PREEMPTIBLE", "MIN", "MAX", "SLOTS", "PROVISIONER",
               "WORKERS", "BUSY", "PENDING", "WAITING", "LAST ERROR"});
  for (const v1::Pool* p : pools) {
    const v1::PoolSpec& s = p->spec();
    const v1::PoolStatus& st = p->status();
    table.AddRow({p->name(), DeviceName(s.device()), absl::StrCat(s.price_per_device_hour()),
                  s.preemptible() ? "yes" : "no", absl::StrCat(s.min_workers()),
                  absl::StrCat(s.max_workers()), absl::StrCat(std::max(1, s.slots_per_worker())),
                  ProvisionerName(s.provisioner()), absl::StrCat(st.workers()),
                  absl::StrCat(st.busy_workers()), absl::StrCat(st.pending_workers()),
                  absl::StrCat(st.waiting_jobs()),
                  st.last_error().empty() ? "-" : st.last_error()});
  }
  table.Render(out);
}

absl::Status PrintPool(CommandContext& context, const v1::Pool& pool) {
  if (context.json) return PrintJson(context.out, pool);
  PrintPoolsTable({&pool}, context.out);
  if (!pool.status().last_action().empty()) {
    context.out << "last action: " << pool.status().last_action() << '\n';
  }
  if (pool.status().has_backoff_until()) {
    context.out << "no scale-up before " << FormatTimestamp(pool.status().backoff_until()) << '\n';
  }
  return absl::OkStatus();
}

// The spec from --spec FILE (PoolSpec JSON), then the flags given on top.
absl::StatusOr<v1::PoolSpec> BuildPoolSpec(CommandContext& context, v1::PoolSpec spec) {
  const ParsedArgs& args = context.args;
  if (std::optional<std::string> path = args.Get("spec"); path.has_value()) {
    absl::StatusOr<std::string> contents = ReadWholeFile(*path);
    if (!contents.ok()) return UsageError(absl::StrCat("--spec: ", contents.status().message()));
    spec.Clear();
    auto status = google::protobuf::util::JsonStringToMessage(*contents, &spec);
    if (!status.ok()) {
      return UsageError(absl::StrCat(
          "--spec ", *path, ": not a valid PoolSpec JSON: ", std::string(status.message())));
    }
  }
  if (std::optional<std::string> v = args.Get("device")) {
    if (*v == "cpu") {
      spec.set_device(v1::DEVICE_KIND_CPU);
    } else if (*v == "gpu") {
      spec.set_device(v1::DEVICE_KIND_GPU);
    } else {
      return UsageError("--device: use cpu or gpu");
    }
  }
  if (std::optional<std::string> v = args.Get("price")) {
    ASSIGN_OR_RETURN(double price, ParseDoubleFlag("price", *v));
    spec.set_price_per_device_hour(price);
  }
  if (args.Has("preemptible")) spec.set_preemptible(true);
  if (args.Has("not-preemptible")) spec.set_preemptible(false);
  if (std::optional<std::string> v = args.Get("min")) {
    ASSIGN_OR_RETURN(int n, ParseIntFlag("min", *v));
    spec.set_min_workers(n);
  }
  if (std::optional<std::string> v = args.Get("max")) {
    ASSIGN_OR_RETURN(int n, ParseIntFlag("max", *v));
    spec.set_max_workers(n);
  }
  if (std::optional<std::string> v = args.Get("slots")) {
    ASSIGN_OR_RETURN(int n, ParseIntFlag("slots", *v));
    spec.set_slots_per_worker(n);
  }
  for (const std::string& text : args.GetAll("label")) {
    ASSIGN_OR_RETURN(auto pair, ParseKeyValueFlag("label", text));
    (*spec.mutable_labels())[pair.first] = pair.second;
  }
  if (args.Has("scale-up") || args.Has("scale-down") || args.Has("command-timeout")) {
    v1::CommandProvisioner* c = spec.mutable_provisioner()->mutable_command();
    if (std::optional<std::string> v = args.Get("scale-up")) {
      c->clear_scale_up();
      for (absl::string_view a : absl::StrSplit(*v, ',')) c->add_scale_up(std::string(a));
    }
    if (std::optional<std::string> v = args.Get("scale-down")) {
      c->clear_scale_down();
      for (absl::string_view a : absl::StrSplit(*v, ',')) c->add_scale_down(std::string(a));
    }
    if (std::optional<std::string> v = args.Get("command-timeout")) {
      ASSIGN_OR_RETURN(int n, ParseIntFlag("command-timeout", *v));
      c->set_timeout_seconds(n);
    }
  }
  if (args.Has("static")) spec.mutable_provisioner()->mutable_static_();
  return spec;
}

absl::Status PoolsCreate(CommandContext& context) {
  v1::CreatePoolRequest request;
  request.set_name(context.args.Positional(0));
  ASSIGN_OR_RETURN(*request.mutable_spec(), BuildPoolSpec(context, v1::PoolSpec()));
  v1::Pool pool;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::CreatePool, request, &pool));
  return PrintPool(context, pool);
}

// Changes only what is given: the stored spec is read first.
absl::Status PoolsUpdate(CommandContext& context) {
  v1::GetPoolRequest get;
  get.set_name(context.args.Positional(0));
  v1::Pool current;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::GetPool, get, &current));
  v1::UpdatePoolRequest request;
  request.set_name(get.name());
  ASSIGN_OR_RETURN(*request.mutable_spec(), BuildPoolSpec(context, current.spec()));
  v1::Pool pool;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::UpdatePool, request, &pool));
  return PrintPool(context, pool);
}

absl::Status PoolsDelete(CommandContext& context) {
  v1::DeletePoolRequest request;
  request.set_name(context.args.Positional(0));
  v1::DeletePoolResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::DeletePool, request, &response));
  if (context.json) return PrintJson(context.out, response);
  context.out << "deleted pool " << request.name() << '\n';
  return absl::OkStatus();
}

absl::Status PoolsList(CommandContext& context) {
  v1::ListPoolsRequest request;
  v1::ListPoolsResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::ListPools, request, &response));
  if (context.json) return PrintJsonArray(context.out, response.pools());
  if (response.pools().empty()) {
    context.out << "No pools (every worker takes any job its labels match).\n";
    return absl::OkStatus();
  }
  std::vector<const v1::Pool*> pointers;
  for (const v1::Pool& p : response.pools()) pointers.push_back(&p);
  PrintPoolsTable(pointers, context.out);
  return absl::OkStatus();
}

absl::Status PoolsGet(CommandContext& context) {
  v1::GetPoolRequest request;
  request.set_name(context.args.Positional(0));
  v1::Pool pool;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::GetPool, request, &pool));
  if (context.json) return PrintJson(context.out, pool);
  RETURN_IF_ERROR(PrintPool(context, pool));
  std::string spec;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(pool.spec(), &spec, options);
  context.out << "spec:\n" << spec;
  return absl::OkStatus();
}

std::vector<FlagSpec> SpecFlags() {
  return {
      {"spec", "FILE", "the whole PoolSpec as JSON (docs/POOLS.md); flags given override it"},
      {"device", "KIND", "cpu or gpu"},
      {"price", "X", "price per device-hour (>= 0)"},
      {"preemptible", "", "the pool's workers may be reclaimed"},
      {"not-preemptible", "", "(update) clear the preemptible flag"},
      {"min", "N", "workers kept even when idle"},
      {"max", "N", "workers at most (elastic pools: 1..10000)"},
      {"slots", "N", "ranks per provisioned worker (1..256)"},
      {"label", "K=V", "label the pool's workers carry besides pool=NAME", true},
      {"scale-up", "PATH[,ARG...]", "command provisioner: the scale-up argv (no shell)"},
      {"scale-down", "PATH[,ARG...]", "command provisioner: the scale-down argv"},
      {"command-timeout", "SECONDS", "command provisioner: per run (default 60)"},
      {"static", "", "static provisioner (workers started by hand)"},
  };
}

}  // namespace

void AddPoolCommands(std::vector<Command>* commands) {
  const std::string details =
      "A worker belongs to pool NAME when it carries the label pool=NAME. Elastic pools (command "
      "or slurm provisioner; a slurm one needs --spec) are grown for waiting jobs, never by half "
      "a gang, and shrunk to --min when idle. See docs/POOLS.md.";
  commands->push_back({{"admin", "pools", "create"},
                       "Create a pool of workers",
                       details,
                       {{"NAME", "[a-z][a-z0-9-]{0,62}"}},
                       SpecFlags(),
                       PoolsCreate});
  commands->push_back({{"admin", "pools", "update"},
                       "Change a pool (only what is given)",
                       details,
                       {{"NAME", "pool name"}},
                       SpecFlags(),
                       PoolsUpdate});
  commands->push_back({{"admin", "pools", "delete"},
                       "Delete a pool (its workers stay; nothing scales them any more)",
                       "",
                       {{"NAME", "pool name"}},
                       {},
                       PoolsDelete});
  commands->push_back({{"admin", "pools", "list"},
                       "List pools with their workers, pending provisions and last error",
                       "",
                       {},
                       {},
                       PoolsList});
  commands->push_back({{"admin", "pools", "get"},
                       "Show a pool: spec and status",
                       "",
                       {{"NAME", "pool name"}},
                       {},
                       PoolsGet});
}

}  // namespace gantry::cli
