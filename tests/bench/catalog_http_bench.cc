// The web catalog's list route (GET /api/v1/models) against 1,000 model versions, next to the gRPC
// CatalogService.ListModels of the same page in the same run: a real gantry-server with
// --http-listen on a fresh database of the PostgreSQL in GANTRY_TEST_DSN, versions seeded through
// storage::ModelRepository. Prints median, p95 and max per case. Figures:
// docs/studies/2026-11-27-web-catalog-http-list.md.
//
//   GANTRY_TEST_DSN=... build/tests/bench/catalog_http_bench [--versions=1000] [--runs=30]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "storage/database.h"
#include "storage/model_repository.h"
#include "tests/server/server_process.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_database.h"

namespace {

namespace v1 = ::gantry::v1;
using Clock = std::chrono::steady_clock;

// The server, stopped by Die too (std::exit runs no destructors of main's locals).
std::unique_ptr<gantry::testing::ServerProcess> server;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "catalog_http_bench: %s\n", what.c_str());
  server.reset();
  std::exit(1);
}

// One seeded version: realistic metrics, tags, lineage and 20 histograms of 25 bins.
v1::ModelVersion SeedVersion(int i) {
  v1::ModelVersion m;
  m.set_owner("bench");
  m.set_name(absl::StrCat("calo-", i % 100));
  m.set_description("a 3DGAN generator of electron showers");
  m.mutable_lineage()->set_job_id(absl::StrCat("job-", i));
  m.mutable_lineage()->set_dataset("toymc:electrons?events=10000");
  m.mutable_lineage()->set_model_preset(i % 2 == 0 ? "3dgan-25" : "tiny");
  for (int h = 0; h < 10; ++h) {
    (*m.mutable_lineage()->mutable_hyper_parameters())[absl::StrCat("param_", h)] =
        absl::StrCat(0.001 * (h + 1));
  }
  m.set_checkpoint_sha256(std::string(64, 'a' + i % 6));
  m.set_checkpoint_size_bytes(12345678);
  m.set_particle(v1::PARTICLE_ELECTRON);
  m.mutable_energy_range_gev()->set_min(10);
  m.mutable_energy_range_gev()->set_max(500);
  const double x = (i * 7919 % 1000) / 1000.0;
  (*m.mutable_metrics())["fom"] = 0.1 + x;
  (*m.mutable_metrics())["mre_sampling_fraction"] = 0.01 + 0.1 * x;
  (*m.mutable_metrics())["eprof"] = 0.2 * x;
  (*m.mutable_metrics())["pos"] = 0.3 * x;
  (*m.mutable_metrics())["ang"] = 0.05 * x;
  (*m.mutable_tags())["campaign"] = i % 3 == 0 ? "2025" : "2024";
  for (int h = 0; h < 20; ++h) {
    v1::Histogram* histogram = m.add_histograms();
    histogram->set_name(absl::StrCat("profile_", h));
    for (int b = 0; b < 25; ++b) {
      histogram->add_reference(b * 0.5);
      histogram->add_generated(b * 0.49);
    }
  }
  return m;
}

struct Figures {
  double median_ms, p95_ms, max_ms;
  int items;
};

Figures Time(int runs, const std::function<int()>& call) {
  for (int i = 0; i < 5; ++i) call();  // warm caches, prepared statements, connections
  std::vector<double> ms;
  int items = 0;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    items = call();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 95 / 100)], ms.back(), items};
}

}  // namespace

int main(int argc, char** argv) {
  int versions = 1000;
  int runs = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--versions=", 0) == 0 && absl::SimpleAtoi(arg.substr(11), &versions)) continue;
    if (arg.rfind("--runs=", 0) == 0 && absl::SimpleAtoi(arg.substr(7), &runs)) continue;
    Die("usage: catalog_http_bench [--versions=N] [--runs=N]");
  }
  gantry::testing::TestDatabase db;
  gantry::testing::TempDir dir;
  const std::string admin_token = "catalog-bench-admin-token-0123456789";
  gantry::testing::WriteSecretFile(dir.File("admin.token"), admin_token + "\n");
  const int port = 47900 + static_cast<int>(getpid() % 100);
  std::string error;
  server = gantry::testing::ServerProcess::Start(
      {"--db=" + db.dsn(), "--data-dir=" + dir.File("data"),
       "--admin-token-file=" + dir.File("admin.token"),
       absl::StrCat("--http-listen=127.0.0.1:", port), "--log-level=WARNING"},
      dir.File("server.stderr"), &error);
  if (server == nullptr) Die(error);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto admin = v1::AdminService::NewStub(channel);
  auto catalog = v1::CatalogService::NewStub(channel);
  const auto context = [](const std::string& token) {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + token);
    return c;
  };
  v1::CreateTenantRequest tenant;
  tenant.set_name("bench");
  v1::Tenant created;
  if (!admin->CreateTenant(context(admin_token).get(), tenant, &created).ok()) Die("tenant");
  v1::CreateTokenRequest token_request;
  token_request.set_tenant("bench");
  v1::CreateTokenResponse token;
  if (!admin->CreateToken(context(admin_token).get(), token_request, &token).ok()) Die("token");

  gantry::storage::DatabaseOptions database_options;
  database_options.pool_size = 2;
  auto database = gantry::storage::Database::Create(db.dsn(), database_options);
  if (!database.ok()) Die(database.status().ToString());
  gantry::storage::ModelRepository models(**database);
  const auto seed_start = Clock::now();
  for (int i = 0; i < versions; ++i) {
    if (auto r = models.Register(SeedVersion(i)); !r.ok()) Die(r.status().ToString());
  }
  std::printf("seeded %d versions in %.1f s\n", versions,
              std::chrono::duration<double>(Clock::now() - seed_start).count());

  httplib::Client http("127.0.0.1", port);
  http.set_keep_alive(true);  // one connection, as a browser keeps it
  auto login =
      http.Post("/api/v1/session", "{\"token\":\"" + token.token() + "\"}", "application/json");
  if (!login || login->status != 200) Die("login failed");
  const std::string set_cookie = login->get_header_value("Set-Cookie");
  const httplib::Headers cookie = {{"Cookie", set_cookie.substr(0, set_cookie.find(';'))}};

  struct Case {
    std::string name, query;
    v1::ListModelsRequest grpc;
  };
  std::vector<Case> cases(3);
  cases[0] = {"whole catalog (pageSize=1000)", "pageSize=1000", {}};
  cases[0].grpc.mutable_page()->set_page_size(1000);
  cases[1] = {"first page (default 50)", "", {}};
  cases[2] = {"mre_sampling_fraction<0.05, by fom, pageSize=1000",
              "metricFilters=mre_sampling_fraction%3C0.05&orderBy=metric:fom&pageSize=1000",
              {}};
  cases[2].grpc.mutable_page()->set_page_size(1000);
  cases[2].grpc.set_order_by("metric:fom");
  v1::MetricFilter* filter = cases[2].grpc.add_metric_filters();
  filter->set_metric("mre_sampling_fraction");
  filter->set_max(0.05);

  std::printf("%-52s %-6s %6s %10s %10s %10s %10s\n", "case", "api", "items", "median_ms", "p95_ms",
              "max_ms", "bytes");
  for (const Case& c : cases) {
    size_t bytes = 0;
    const Figures h = Time(runs, [&] {
      auto r =
          http.Get(("/api/v1/models" + (c.query.empty() ? "" : "?" + c.query)).c_str(), cookie);
      if (!r || r->status != 200) Die("HTTP list failed");
      bytes = r->body.size();
      int items = 0;
      for (size_t at = 0; (at = r->body.find("\"checkpointSha256\"", at)) != std::string::npos;
           ++at) {
        ++items;
      }
      return items;
    });
    std::printf("%-52s %-6s %6d %10.1f %10.1f %10.1f %10zu\n", c.name.c_str(), "HTTP", h.items,
                h.median_ms, h.p95_ms, h.max_ms, bytes);
    size_t grpc_bytes = 0;
    const Figures g = Time(runs, [&] {
      v1::ListModelsResponse response;
      if (!catalog->ListModels(context(token.token()).get(), c.grpc, &response).ok()) {
        Die("gRPC list failed");
      }
      grpc_bytes = response.ByteSizeLong();
      return response.models_size();
    });
    std::printf("%-52s %-6s %6d %10.1f %10.1f %10.1f %10zu\n", c.name.c_str(), "gRPC", g.items,
                g.median_ms, g.p95_ms, g.max_ms, grpc_bytes);
  }
  server->Terminate();
  return 0;
}
