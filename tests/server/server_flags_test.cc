// BuildServerOptions: the flags' defaults make a valid configuration, every value out of range is
// INVALID_ARGUMENT naming its flag; ResolveServerOptions: the DSN from a private --db-file or
// $GANTRY_DB, and a clear error when there is none or the inspection helper is missing.
#include "server/server_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace gantry::server {
namespace {

TEST(ServerFlagsTest, TheDefaultsAreAValidConfiguration) {
  absl::StatusOr<ServerOptions> o = BuildServerOptions(ServerFlags());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->listen, "127.0.0.1:50051");
  EXPECT_EQ(o->http.session_ttl, absl::Hours(12));
  EXPECT_EQ(o->coordinator.heartbeat_interval_ms, 2000);
  EXPECT_EQ(o->coordinator.lease_timeout_ms, 15000);
  EXPECT_EQ(o->streams.header_timeout, absl::Seconds(10));
  EXPECT_EQ(o->inspector.timeout, absl::Minutes(2));
  // The per-tenant limits default to the safe ones, not unlimited.
  const storage::TenantLimits safe;
  EXPECT_EQ(o->default_limits.max_streams, safe.max_streams);
  EXPECT_EQ(o->default_limits.max_showers_per_request, safe.max_showers_per_request);
  EXPECT_GT(o->default_limits.max_concurrent_jobs, 0);
  // Nothing is read: no DSN yet, the web root and inspection helper still their defaults.
  EXPECT_TRUE(o->db.dsn.empty());
  EXPECT_TRUE(o->http.web_root.empty());
}

TEST(ServerFlagsTest, EveryValueOutOfRangeNamesItsFlag) {
  const std::vector<std::pair<std::function<void(ServerFlags&)>, std::string>> cases = {
      {[](ServerFlags& f) { f.log_sample_rate = 1.5; }, "--log-sample-rate"},
      {[](ServerFlags& f) { f.worker_listen = "no-port"; }, "--worker-listen"},
      {[](ServerFlags& f) { f.metrics_listen = "h:99999"; }, "--metrics-listen"},
      {[](ServerFlags& f) { f.http_listen = "h:"; }, "--http-listen"},
      {[](ServerFlags& f) { f.web_root = "/srv/web"; }, "--web-root needs --http-listen"},
      {[](ServerFlags& f) { f.http_session_hours = 0; }, "--http-session-hours"},
      {[](ServerFlags& f) { f.http_max_event_streams = 13; }, "--http-max-event-streams 1..12"},
      {[](ServerFlags& f) { f.http_max_event_streams_per_tenant = 9; },
       "--http-max-event-streams-per-tenant"},
      {[](ServerFlags& f) { f.http_max_connections_per_ip = 513; },
       "--http-max-connections-per-ip"},
      {[](ServerFlags& f) {
         f.db = "host=x";
         f.db_file = "/run/dsn";
       },
       "give either --db or --db-file, not both"},
      {[](ServerFlags& f) { f.health_check_interval_ms = 10; }, "--health-check-interval-ms"},
      {[](ServerFlags& f) { f.autoscale_interval_ms = 99; }, "--autoscale-interval-ms"},
      {[](ServerFlags& f) { f.pool_backoff_seconds = 0; }, "--pool-backoff-seconds"},
      {[](ServerFlags& f) { f.budget_refresh_ms = 10; }, "--budget-refresh-ms"},
      {[](ServerFlags& f) { f.hang_step_factor = 0.5; }, "--hang-step-factor"},
      {[](ServerFlags& f) { f.collective_timeout_ms = -1; }, "--collective-timeout-ms"},
      {[](ServerFlags& f) { f.db_connect_timeout_ms = 0; }, "--db-connect-timeout-ms"},
      {[](ServerFlags& f) { f.file_dataset_roots = "relative/dir"; }, "file-dataset-roots"},
      {[](ServerFlags& f) { f.file_dataset_tenant_roots = "alice"; }, "file-dataset-tenant-roots"},
      {[](ServerFlags& f) { f.stream_idle_timeout_ms = 99; }, "--stream-idle-timeout-ms"},
      {[](ServerFlags& f) { f.study_interval_ms = -1; }, "--study-interval-ms"},
      {[](ServerFlags& f) { f.stream_token_recheck_ms = 49; }, "--stream-token-recheck-ms"},
      {[](ServerFlags& f) { f.tenant_max_streams = -1; }, "--tenant-max-*"},
      {[](ServerFlags& f) { f.max_threads = 4; },
       "--max-threads must be 0 (no bound) or at least 8"},
      {[](ServerFlags& f) { f.inspect_concurrency = 0; }, "--inspect-concurrency"},
      {[](ServerFlags& f) { f.max_dataset_events = 0; }, "--max-dataset-events"},
      {[](ServerFlags& f) { f.lease_timeout_ms = 3000; }, "--lease-timeout-ms"},
  };
  for (const auto& [change, flag] : cases) {
    ServerFlags f;
    change(f);
    absl::StatusOr<ServerOptions> o = BuildServerOptions(f);
    ASSERT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(o.status().message().find(flag), std::string::npos) << o.status();
  }
}

TEST(ServerFlagsTest, FileDatasetSettingsAndTheHttpApiAreCarriedOver) {
  ServerFlags f;
  f.file_dataset_roots = "/data/shared";
  f.file_dataset_tenants = " alice , bob ";
  f.file_dataset_tenant_roots = "carol=/data/carol";
  f.http_listen = "127.0.0.1:0";
  f.web_root = "/srv/web";
  absl::StatusOr<ServerOptions> o = BuildServerOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->file_datasets.tenants, (std::set<std::string>{"alice", "bob"}));
  EXPECT_FALSE(o->file_datasets.RootsOf("alice").empty());
  EXPECT_TRUE(o->file_datasets.RootsOf("mallory").empty());
  EXPECT_FALSE(o->file_datasets.RootsOf("carol").empty());
  EXPECT_EQ(o->http.web_root, "/srv/web");
}

TEST(ServerFlagsTest, ResolveReadsAPrivateDsnFileOrTheEnvironment) {
  gantry::testing::TempDir dir;
  const std::string inspect = dir.File("inspect");
  gantry::testing::WriteSecretFile(inspect, "#!/bin/sh\n");
  ASSERT_EQ(chmod(inspect.c_str(), 0700), 0);
  const std::string dsn_file = dir.File("dsn");
  gantry::testing::WriteSecretFile(dsn_file, "host=/run/pg dbname=gantry\n");
  ServerFlags f;
  f.db_file = dsn_file;
  f.inspect_binary = inspect;
  absl::StatusOr<ServerOptions> o = BuildServerOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_TRUE(ResolveServerOptions(f, &*o).ok());
  EXPECT_EQ(o->db.dsn, "host=/run/pg dbname=gantry");

  // A DSN file others may read is refused (it may hold a password).
  ASSERT_EQ(chmod(dsn_file.c_str(), 0644), 0);
  o = BuildServerOptions(f);
  absl::Status s = ResolveServerOptions(f, &*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("--db-file"), std::string::npos) << s;

  // No --db, no --db-file: $GANTRY_DB, else a clear error.
  f.db_file.clear();
  ASSERT_EQ(setenv("GANTRY_DB", "host=from-env", 1), 0);
  o = BuildServerOptions(f);
  ASSERT_TRUE(ResolveServerOptions(f, &*o).ok());
  EXPECT_EQ(o->db.dsn, "host=from-env");
  ASSERT_EQ(unsetenv("GANTRY_DB"), 0);
  o = BuildServerOptions(f);
  s = ResolveServerOptions(f, &*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no database: give --db=DSN or set GANTRY_DB"), std::string::npos)
      << s;

  // The inspection helper must be an executable file.
  f.db = "host=x";
  f.inspect_binary = dir.File("missing-inspect");
  o = BuildServerOptions(f);
  s = ResolveServerOptions(f, &*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is not an executable file"), std::string::npos) << s;
}

}  // namespace
}  // namespace gantry::server
