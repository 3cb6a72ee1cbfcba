// The HTTP API (server/http) of a real gantry-server on a real PostgreSQL, driven with
// cpp-httplib's client over loopback: sessions and their cookie, CSRF, tenant isolation, the
// catalog and job routes, Server-Sent Events, the HDF5 download read back with showers/, static
// files (and path traversal), and the request log.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "httplib.h"
#include "showers/shower_file_reader.h"
#include "tests/server/generation_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

// A port of the range these tests may use (47000-47999) that nothing listens on right now.
int FreePortInRange() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = 47000 + static_cast<int>((getpid() * 7 + attempt * 13) % 1000);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

// The cookie pair "gantry_session=..." of a Set-Cookie header.
std::string CookiePair(const std::string& set_cookie) {
  return set_cookie.substr(0, set_cookie.find(';'));
}

// A value of a flat JSON object's string field (enough for the answers checked here).
std::string JsonField(const std::string& json, const std::string& field) {
  const std::string key = "\"" + field + "\":\"";
  const size_t at = json.find(key);
  if (at == std::string::npos) return "";
  const size_t end = json.find('"', at + key.size());
  return json.substr(at + key.size(), end - at - key.size());
}

template <typename Message>
Message FromJson(const std::string& json) {
  Message m;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &m);
  EXPECT_TRUE(status.ok()) << status.message() << " in " << json.substr(0, 300);
  return m;
}

class ServerHttpTest : public GenerationFixture {
 protected:
  void SetUp() override {
    GenerationFixture::SetUp();
    // A web app: index.html and an asset, a secret beside the root and a link out of it.
    web_ = dir_.File("web");
    std::filesystem::create_directories(web_ + "/assets");
    std::ofstream(web_ + "/index.html") << "<!doctype html><title>gantry</title>";
    std::ofstream(web_ + "/assets/app-1234.js") << "console.log('app');";
    std::ofstream(dir_.File("secret.txt")) << "do not serve";
    std::filesystem::create_symlink(dir_.File("secret.txt"), web_ + "/assets/leak.txt");
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = FreePortInRange();
      ASSERT_GT(port_, 0);
      std::vector<std::string> args = WorkerProtocolArgs(join_);
      args.insert(args.end(), {"--max-showers-per-request", "100000", "--http-listen",
                               absl::StrCat("127.0.0.1:", port_), "--web-root", web_,
                               "--http-max-generate-showers", "50"});
      StopServer();
      std::string error;
      server_ = ServerProcess::Start(
          [&] {
            std::vector<std::string> all = StandardArgs();
            all.insert(all.end(), args.begin(), args.end());
            return all;
          }(),
          dir_.File("server.stderr"), &error);
      if (server_ != nullptr) break;
    }
    ASSERT_NE(server_, nullptr);
    StartStubs();
    http_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    http_->set_read_timeout(20, 0);
  }

  // Reconnects the fixture's stubs to the restarted server.
  void StartStubs() {
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    training_ = v1::TrainingService::NewStub(channel_);
    generation_ = v1::GenerationService::NewStub(channel_);
    catalog_ = v1::CatalogService::NewStub(channel_);
    worker_ = v1::WorkerService::NewStub(channel_);
    admin_ = v1::AdminService::NewStub(channel_);
  }

  // A logged-in browser: its cookie and CSRF token.
  struct Browser {
    std::string cookie;
    std::string csrf;
    httplib::Headers Reads() const { return {{"Cookie", cookie}}; }
    httplib::Headers Writes() const { return {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}; }
  };
  Browser Login(const std::string& token) {
    auto r = http_->Post("/api/v1/session", absl::StrCat("{\"token\":\"", token, "\"}"),
                         "application/json");
    EXPECT_TRUE(r) << "no answer";
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    Browser b;
    b.cookie = CookiePair(r->get_header_value("Set-Cookie"));
    b.csrf = JsonField(r->body, "csrfToken");
    return b;
  }

  std::string web_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> http_;
};

TEST_F(ServerHttpTest, SessionsLogInCarryACsrfTokenAndEndWithLogoutOrRevocation) {
  // No session: 401 JSON.
  auto r = http_->Get("/api/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(JsonField(r->body, "status"), "UNAUTHENTICATED");
  // An API token in the cookie is not a session.
  r = http_->Get("/api/v1/models", {{"Cookie", absl::StrCat("gantry_session=", token_)}});
  EXPECT_EQ(r->status, 401);
  // Bad logins.
  r = http_->Post("/api/v1/session", "{\"token\":\"gnt_nope\"}", "application/json");
  EXPECT_EQ(r->status, 401);
  r = http_->Post("/api/v1/session", absl::StrCat("token=", token_),
                  "application/x-www-form-urlencoded");
  EXPECT_EQ(r->status, 415);
  r = http_->Post("/api/v1/session", "{\"token\":1}", "application/json");
  EXPECT_EQ(r->status, 400);

  r = http_->Post("/api/v1/session", absl::StrCat("{\"token\":\"", token_, "\"}"),
                  "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string set_cookie = r->get_header_value("Set-Cookie");
  EXPECT_TRUE(absl::StartsWith(set_cookie, "gantry_session=gws_")) << set_cookie;
  EXPECT_TRUE(absl::StrContains(set_cookie, "; HttpOnly")) << set_cookie;
  EXPECT_TRUE(absl::StrContains(set_cookie, "; SameSite=Strict")) << set_cookie;
  EXPECT_TRUE(absl::StrContains(set_cookie, "; Path=/")) << set_cookie;
  EXPECT_FALSE(absl::StrContains(set_cookie, token_));
  EXPECT_FALSE(absl::StrContains(r->body, token_));
  EXPECT_EQ(JsonField(r->body, "tenant"), "physics");
  Browser b{CookiePair(set_cookie), JsonField(r->body, "csrfToken")};
  ASSERT_EQ(b.csrf.size(), 64u);
  // The session id carries at least 128 random bits.
  EXPECT_GE(b.cookie.size(), std::string("gantry_session=gws_").size() + 32);

  r = http_->Get("/api/v1/session", b.Reads());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(JsonField(r->body, "tenant"), "physics");
  EXPECT_EQ(JsonField(r->body, "csrfToken"), b.csrf);
  // A session secret is no bearer token over gRPC.
  v1::ListModelsResponse listed;
  grpc::Status s = catalog_->ListModels(Ctx(b.cookie.substr(b.cookie.find('=') + 1)).get(),
                                        v1::ListModelsRequest(), &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);

  // Writes need the CSRF header.
  r = http_->Delete("/api/v1/session", b.Reads());
  EXPECT_EQ(r->status, 403);
  httplib::Headers wrong = {{"Cookie", b.cookie}, {"X-CSRF-Token", std::string(64, '0')}};
  r = http_->Delete("/api/v1/session", wrong);
  EXPECT_EQ(r->status, 403);
  r = http_->Delete("/api/v1/session", b.Writes());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(absl::StrContains(r->get_header_value("Set-Cookie"), "Max-Age=0"));
  r = http_->Get("/api/v1/session", b.Reads());
  EXPECT_EQ(r->status, 401);
  r = http_->Get("/api/v1/models", b.Reads());
  EXPECT_EQ(r->status, 401);

  // Revoking the token ends the sessions opened with it.
  v1::CreateTokenRequest create;
  create.set_tenant("physics");
  v1::CreateTokenResponse second;
  s = admin_->CreateToken(Ctx(admin_token_).get(), create, &second);
  ASSERT_TRUE(s.ok()) << Describe(s);
  Browser c = Login(second.token());
  EXPECT_EQ(http_->Get("/api/v1/models", c.Reads())->status, 200);
  v1::RevokeTokenRequest revoke;
  revoke.set_token_id(second.token_id());
  v1::RevokeTokenResponse revoked;
  s = admin_->RevokeToken(Ctx(admin_token_).get(), revoke, &revoked);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(http_->Get("/api/v1/models", c.Reads())->status, 401);
  r = http_->Post("/api/v1/session", absl::StrCat("{\"token\":\"", second.token(), "\"}"),
                  "application/json");
  EXPECT_EQ(r->status, 401);
}

TEST_F(ServerHttpTest, CatalogRoutesListGetAliasTagAndArchiveWithinTheTenant) {
  Browser b = Login(token_);
  auto r = http_->Get("/api/v1/models", b.Reads());
  ASSERT_EQ(r->status, 200) << r->body;
  v1::ListModelsResponse list = FromJson<v1::ListModelsResponse>(r->body);
  ASSERT_EQ(list.models_size(), 1);
  EXPECT_EQ(list.models(0).name(), "calo");
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  // Filters and search.
  EXPECT_EQ(FromJson<v1::ListModelsResponse>(
                http_->Get("/api/v1/models?q=AL&particle=PARTICLE_ELECTRON", b.Reads())->body)
                .models_size(),
            1);
  EXPECT_EQ(FromJson<v1::ListModelsResponse>(http_->Get("/api/v1/models?q=zzz", b.Reads())->body)
                .models_size(),
            0);
  EXPECT_EQ(FromJson<v1::ListModelsResponse>(
                http_->Get("/api/v1/models?alias=prod&owner=physics", b.Reads())->body)
                .models_size(),
            1);
  EXPECT_EQ(
      FromJson<v1::ListModelsResponse>(http_->Get("/api/v1/models?name=other", b.Reads())->body)
          .models_size(),
      0);
  EXPECT_EQ(
      FromJson<v1::ListModelsResponse>(http_->Get("/api/v1/models/calo/versions", b.Reads())->body)
          .models_size(),
      1);
  // Bad input: 400 with a message that says what to change.
  r = http_->Get("/api/v1/models?metricFilters=fom~1", b.Reads());
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(absl::StrContains(r->body, "metricFilters")) << r->body;
  r = http_->Get("/api/v1/models?colour=red", b.Reads());
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(absl::StrContains(r->body, "colour")) << r->body;
  r = http_->Get("/api/v1/models?orderBy=size", b.Reads());
  EXPECT_EQ(r->status, 400);
  r = http_->Get("/api/v1/models/calo:zero", b.Reads());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(JsonField(r->body, "status"), "INVALID_ARGUMENT");

  // GetModel by version and by alias (URL-encoded @).
  r = http_->Get("/api/v1/models/calo:1", b.Reads());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(FromJson<v1::ModelVersion>(r->body).checkpoint_sha256(), sha_);
  r = http_->Get("/api/v1/models/calo%40prod", b.Reads());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(FromJson<v1::ModelVersion>(r->body).version(), 1);
  r = http_->Get("/api/v1/models/calo:1/validation", b.Reads());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(FromJson<v1::ModelVersion>(r->body).name(), "calo");

  // Another tenant sees nothing of it: 404, as in gRPC.
  Browser other = Login(NewTenant("rival"));
  EXPECT_EQ(http_->Get("/api/v1/models/calo:1", other.Reads())->status, 404);
  EXPECT_EQ(http_->Get("/api/v1/models/calo:1/validation", other.Reads())->status, 404);
  EXPECT_EQ(FromJson<v1::ListModelsResponse>(http_->Get("/api/v1/models", other.Reads())->body)
                .models_size(),
            0);
  r = http_->Post("/api/v1/models/calo/aliases", other.Writes(),
                  "{\"alias\":\"stolen\",\"version\":1}", "application/json");
  EXPECT_EQ(r->status, 404) << r->body;

  // Writes: CSRF first, then the service's own checks.
  r = http_->Post("/api/v1/models/calo/aliases", b.Reads(), "{\"alias\":\"best\",\"version\":1}",
                  "application/json");
  EXPECT_EQ(r->status, 403);
  r = http_->Post("/api/v1/models/calo/aliases", b.Writes(), "{\"alias\":\"best\",\"version\":1}",
                  "text/plain");
  EXPECT_EQ(r->status, 415);
  r = http_->Post("/api/v1/models/calo/aliases", b.Writes(), "{\"alias\":\"Bad Alias\"}",
                  "application/json");
  EXPECT_EQ(r->status, 400);
  r = http_->Post("/api/v1/models/calo/aliases", b.Writes(), "{\"alias\":\"best\",\"nope\":1}",
                  "application/json");
  EXPECT_EQ(r->status, 400);
  r = http_->Post("/api/v1/models/calo/aliases", b.Writes(), "{\"alias\":\"best\",\"version\":1}",
                  "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  v1::ModelVersion aliased = FromJson<v1::ModelVersion>(r->body);
  EXPECT_NE(std::find(aliased.aliases().begin(), aliased.aliases().end(), "best"),
            aliased.aliases().end());
  EXPECT_EQ(http_->Get("/api/v1/models/calo%40best", b.Reads())->status, 200);
  r = http_->Delete("/api/v1/models/calo/aliases/best", b.Writes());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(http_->Get("/api/v1/models/calo%40best", b.Reads())->status, 404);

  r = http_->Post("/api/v1/models/calo:1:setTags", b.Writes(), "{\"set\":{\"campaign\":\"2025\"}}",
                  "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(FromJson<v1::ModelVersion>(r->body).tags().at("campaign"), "2025");
  EXPECT_EQ(FromJson<v1::ListModelsResponse>(
                http_->Get("/api/v1/models?tags=campaign:2025", b.Reads())->body)
                .models_size(),
            1);
  r = http_->Post("/api/v1/models/calo:1:archive", b.Writes(), "", "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(FromJson<v1::ModelVersion>(r->body).status(), v1::MODEL_STATUS_ARCHIVED);
  EXPECT_EQ(
      FromJson<v1::ListModelsResponse>(http_->Get("/api/v1/models", b.Reads())->body).models_size(),
      0);
  EXPECT_EQ(FromJson<v1::ListModelsResponse>(
                http_->Get("/api/v1/models?includeArchived=true", b.Reads())->body)
                .models_size(),
            1);
  // Unknown routes are JSON 404s.
  r = http_->Get("/api/v1/nothing", b.Reads());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(JsonField(r->body, "status"), "NOT_FOUND");
}

TEST_F(ServerHttpTest, JobRoutesStreamEventsAndServeTheLossCurve) {
  Browser b = Login(token_);
  // A job that runs on a driven worker and reports progress twice.
  DriverWorker trainer(channel_, join_, "trainer-http", 1);
  ASSERT_TRUE(trainer.status().ok()) << Describe(trainer.status());
  v1::JobSpec spec = GoodSpec();
  spec.set_world_size(1);
  spec.set_model_name("streamed");
  v1::Job job = SubmitJob(token_, spec);
  std::optional<v1::ServerMessage> m = trainer.Next();
  ASSERT_TRUE(m && m->has_assignment());
  trainer.set_free_slots(0);
  trainer.RankStatus(job.id(), 0, v1::RANK_PHASE_RUNNING);
  ASSERT_EQ(WaitForJob(token_, job.id(), v1::JOB_STATE_RUNNING, 10000).state(),
            v1::JOB_STATE_RUNNING);

  // The event stream, read while the job runs.
  std::mutex mu;
  std::string stream;
  int stream_status = 0;
  std::string content_type;
  std::thread reader([&] {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(30, 0);
    auto result = client.Get(
        absl::StrCat("/api/v1/jobs/", job.id(), "/events").c_str(), b.Reads(),
        [&](const httplib::Response& response) {
          std::lock_guard<std::mutex> lock(mu);
          stream_status = response.status;
          content_type = response.get_header_value("Content-Type");
          return true;
        },
        [&](const char* data, size_t length) {
          std::lock_guard<std::mutex> lock(mu);
          stream.append(data, length);
          return true;
        });
    (void)result;
  });
  // Joined on every way out of the test (an ASSERT returns early).
  struct JoinOnExit {
    std::thread& thread;
    ~JoinOnExit() {
      if (thread.joinable()) thread.join();
    }
  } join_reader{reader};
  for (int step : {10, 20}) {
    v1::WorkerMessage progress;
    progress.mutable_progress()->set_epoch(1);
    progress.mutable_progress()->set_epochs(2);
    progress.mutable_progress()->set_step(step);
    progress.mutable_progress()->set_samples_per_second(100 + step);
    (*progress.mutable_progress()->mutable_losses())["d_loss"] = 1.0 / step;
    trainer.Send(job.id(), progress);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // one event per second
  }
  EXPECT_TRUE(Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return absl::StrContains(stream, "\"step\":\"20\"");
      },
      10000));
  // The loss curve so far.
  auto r = http_->Get(absl::StrCat("/api/v1/jobs/", job.id(), "/metrics"), b.Reads());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(absl::StrContains(r->body, "\"d_loss\":0.1")) << r->body;
  EXPECT_TRUE(absl::StrContains(r->body, "\"d_loss\":0.05")) << r->body;
  EXPECT_TRUE(absl::StrContains(r->body, "\"samplesPerSecond\":120")) << r->body;
  EXPECT_EQ(
      http_->Get(absl::StrCat("/api/v1/jobs/", job.id(), "/metrics?bogus=1"), b.Reads())->status,
      400);

  // Cancelling ends the job, and with it the stream.
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  v1::Job cancelled;
  grpc::Status s = training_->CancelJob(Ctx(token_).get(), cancel, &cancelled);
  ASSERT_TRUE(s.ok()) << Describe(s);
  trainer.RankStatus(job.id(), 0, v1::RANK_PHASE_EXITED);
  reader.join();  // the stream ends with the job
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(stream_status, 200);
    EXPECT_TRUE(absl::StartsWith(content_type, "text/event-stream")) << content_type;
    EXPECT_TRUE(absl::StrContains(stream, "data: {\"sequence\":\"1\"")) << stream;
    EXPECT_TRUE(absl::StrContains(stream, "JOB_STATE_CANCELLED")) << stream;
    EXPECT_TRUE(absl::StrContains(stream, "event: end")) << stream;
  }

  // Jobs list, one job, logs; another tenant's job is 404 on every route.
  r = http_->Get("/api/v1/jobs?state=JOB_STATE_CANCELLED", b.Reads());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(FromJson<v1::ListJobsResponse>(r->body).jobs_size(), 1);
  EXPECT_EQ(http_->Get("/api/v1/jobs?state=BOGUS", b.Reads())->status, 400);
  r = http_->Get(absl::StrCat("/api/v1/jobs/", job.id()), b.Reads());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(FromJson<v1::Job>(r->body).progress().step(), 20);
  EXPECT_EQ(http_->Get(absl::StrCat("/api/v1/jobs/", job.id(), "/logs?tail=10"), b.Reads())->status,
            200);
  Browser other = Login(NewTenant("rival"));
  for (const char* route : {"", "/events", "/metrics", "/logs"}) {
    EXPECT_EQ(http_->Get(absl::StrCat("/api/v1/jobs/", job.id(), route), other.Reads())->status,
              404)
        << route;
  }
}

TEST_F(ServerHttpTest, LoggingOutEndsAnOpenEventStream) {
  Browser b = Login(token_);
  v1::JobSpec spec = GoodSpec();
  spec.set_world_size(1);
  v1::Job job = SubmitJob(token_, spec);  // no worker takes it: it stays QUEUED
  std::mutex mu;
  std::string stream;
  std::thread reader([&] {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(30, 0);
    client.Get(absl::StrCat("/api/v1/jobs/", job.id(), "/events").c_str(), b.Reads(),
               [&](const char* data, size_t length) {
                 std::lock_guard<std::mutex> lock(mu);
                 stream.append(data, length);
                 return true;
               });
  });
  struct JoinOnExit {
    std::thread& thread;
    ~JoinOnExit() {
      if (thread.joinable()) thread.join();
    }
  } join_reader{reader};
  ASSERT_TRUE(Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return absl::StrContains(stream, "JOB_STATE_QUEUED");
      },
      10000));
  const auto logout = std::chrono::steady_clock::now();
  ASSERT_EQ(http_->Delete("/api/v1/session", b.Writes())->status, 200);
  reader.join();  // the stream ends: the WatchJob behind it re-checks its session every second
  EXPECT_LT(std::chrono::steady_clock::now() - logout, std::chrono::seconds(8));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(absl::StrContains(stream, "event: error")) << stream;
  EXPECT_TRUE(absl::StrContains(stream, "UNAUTHENTICATED")) << stream;
  EXPECT_FALSE(absl::StrContains(stream, "event: end")) << stream;
}

TEST_F(ServerHttpTest, EventStreamCapsOutsideTheirRangeAreUsageErrors) {
  for (const char* bad :
       {"--http-max-event-streams=0", "--http-max-event-streams=13",
        "--http-max-event-streams-per-tenant=0", "--http-max-event-streams-per-tenant=9"}) {
    std::vector<std::string> args = StandardArgs();
    args.push_back(bad);
    std::string output;
    EXPECT_EQ(ServerProcess::RunToExit(args, &output), 2) << bad << ": " << output;
    EXPECT_NE(output.find("--http-max-event-streams"), std::string::npos) << output;
  }
}

TEST_F(ServerHttpTest, ConnectionLimitsOutsideTheirRangeAreUsageErrors) {
  for (const char* bad : {"--http-max-connections=0", "--http-max-connections=65537",
                          "--http-max-connections-per-ip=0", "--http-max-connections-per-ip=513"}) {
    std::vector<std::string> args = StandardArgs();
    args.push_back(bad);
    std::string output;
    EXPECT_EQ(ServerProcess::RunToExit(args, &output), 2) << bad << ": " << output;
    EXPECT_NE(output.find("--http-max-connections"), std::string::npos) << output;
  }
}

// An open job event stream read on a thread of its own until the server ends it.
class EventStreamReader {
 public:
  EventStreamReader(int port, const httplib::Headers& headers, const std::string& job_id)
      : thread_([this, port, headers, job_id] {
          httplib::Client client("127.0.0.1", port);
          client.set_read_timeout(30, 0);
          client.Get(absl::StrCat("/api/v1/jobs/", job_id, "/events").c_str(), headers,
                     [this](const char* data, size_t length) {
                       std::lock_guard<std::mutex> lock(mu_);
                       text_.append(data, length);
                       return true;
                     });
        }) {}
  ~EventStreamReader() { thread_.join(); }
  bool Saw(const std::string& fragment) {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::StrContains(text_, fragment);
  }

 private:
  std::mutex mu_;
  std::string text_;
  std::thread thread_;
};

// Event streams hold handler threads: a tenant may hold two (the default), the server eight, so one
// tenant's tabs cannot take them from the others; a stream that ends gives its place back.
TEST_F(ServerHttpTest, OneTenantCannotTakeEveryEventStream) {
  Browser alice = Login(token_);
  v1::JobSpec spec = GoodSpec();
  spec.set_world_size(1);
  const v1::Job job = SubmitJob(token_, spec);  // no worker takes it: it stays QUEUED
  const std::string rival_token = NewTenant("rival");
  Browser rival = Login(rival_token);
  const v1::Job rival_job = SubmitJob(rival_token, spec);
  {
    EventStreamReader first(port_, alice.Reads(), job.id());
    EventStreamReader second(port_, alice.Reads(), job.id());
    ASSERT_TRUE(Eventually([&] { return first.Saw("JOB_STATE_QUEUED"); }, 10000));
    ASSERT_TRUE(Eventually([&] { return second.Saw("JOB_STATE_QUEUED"); }, 10000));
    auto r = http_->Get(absl::StrCat("/api/v1/jobs/", job.id(), "/events"), alice.Reads());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << r->body;
    EXPECT_EQ(JsonField(r->body, "status"), "RESOURCE_EXHAUSTED") << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "--http-max-event-streams-per-tenant")) << r->body;
    // Another tenant still gets one.
    EventStreamReader theirs(port_, rival.Reads(), rival_job.id());
    EXPECT_TRUE(Eventually([&] { return theirs.Saw("JOB_STATE_QUEUED"); }, 10000));
    // Logging out ends every stream of a session (the readers join as they leave this scope).
    ASSERT_EQ(http_->Delete("/api/v1/session", alice.Writes())->status, 200);
    ASSERT_EQ(http_->Delete("/api/v1/session", rival.Writes())->status, 200);
  }
  // The places are given back: alice streams again in a new session.
  alice = Login(token_);
  EventStreamReader again(port_, alice.Reads(), job.id());
  EXPECT_TRUE(Eventually([&] { return again.Saw("JOB_STATE_QUEUED"); }, 10000));
  ASSERT_EQ(http_->Delete("/api/v1/session", alice.Writes())->status, 200);
}

TEST_F(ServerHttpTest, GenerateStreamsAnHdf5FileTheShowerReaderReads) {
  GenWorker w = AddWorker("gen-http", {sha_});
  w.fake->set_cells(25);  // the 3DGAN fixed-angle grid
  LetHeartbeatsLand();
  Browser b = Login(token_);
  const std::string body =
      "{\"model\":\"calo@prod\",\"list\":{\"items\":[{\"energyGev\":20},{\"energyGev\":40},"
      "{\"energyGev\":60}]},\"seed\":\"7\"}";
  auto r = http_->Post("/api/v1/generate", b.Reads(), body, "application/json");
  EXPECT_EQ(r->status, 403);
  r = http_->Post("/api/v1/generate", b.Writes(), body, "application/json");
  ASSERT_EQ(r->status, 200) << r->body.substr(0, 300);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-hdf5");
  EXPECT_TRUE(absl::StrContains(r->get_header_value("Content-Disposition"), "attachment"));
  const std::string path = dir_.File("download.h5");
  std::ofstream(path, std::ios::binary) << r->body;
  auto file = showers::ShowerFileReader::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->events(), 3);
  auto events = (*file)->ReadEvents({0, 1, 2});
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_FLOAT_EQ(events->energy_gev[1], 40);

  // Bounded: above --http-max-generate-showers is refused before any generation.
  r = http_->Post("/api/v1/generate", b.Writes(),
                  "{\"model\":\"calo@prod\",\"range\":{\"energyGev\":{\"min\":20,\"max\":40},"
                  "\"count\":\"51\"}}",
                  "application/json");
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(absl::StrContains(r->body, "http-max-generate-showers")) << r->body;
  r = http_->Post("/api/v1/generate", b.Writes(), "{\"model\":\"nope@prod\",\"list\":{}}",
                  "application/json");
  EXPECT_EQ(r->status, 404) << r->body;
  r = http_->Post("/api/v1/generate", b.Writes(), "not json", "application/json");
  EXPECT_EQ(r->status, 400);
  // Nothing is left in the download folder.
  EXPECT_TRUE(std::filesystem::is_empty(dir_.File("data") + "/http-downloads"));
}

TEST_F(ServerHttpTest, StaticFilesServeTheAppAndNothingOutsideIt) {
  auto r = http_->Get("/");
  ASSERT_EQ(r->status, 200);
  EXPECT_TRUE(absl::StrContains(r->body, "<title>gantry</title>"));
  const std::string csp = r->get_header_value("Content-Security-Policy");
  EXPECT_TRUE(absl::StrContains(csp, "default-src 'self'")) << csp;
  EXPECT_TRUE(absl::StrContains(csp, "script-src 'self'")) << csp;
  EXPECT_FALSE(absl::StrContains(csp, "unsafe")) << csp;
  EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
  // App routes get index.html; assets their type.
  r = http_->Get("/models/calo:1");
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(absl::StrContains(r->body, "<title>gantry</title>"));
  r = http_->Get("/assets/app-1234.js");
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(absl::StartsWith(r->get_header_value("Content-Type"), "text/javascript"));
  // Traversal, encoded traversal, hidden files and links out of the root: 404.
  for (const char* path : {"/../secret.txt", "/%2e%2e/secret.txt", "/assets/..%2f..%2fsecret.txt",
                           "/assets/%2e%2e/%2e%2e/secret.txt", "/assets/leak.txt", "/.hidden.txt",
                           "/assets/..%5c..%5csecret.txt"}) {
    r = http_->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_FALSE(absl::StrContains(r->body, "do not serve")) << path;
  }
}

TEST_F(ServerHttpTest, TheRequestLogNamesRoutesButNeverTokensOrSessions) {
  Browser b = Login(token_);
  http_->Get("/api/v1/models?q=calo", b.Reads());
  http_->Post("/api/v1/session", absl::StrCat("{\"token\":\"", token_, "x\"}"), "application/json");
  http_->Delete("/api/v1/session", b.Writes());
  const std::string log = server_->Stderr();
  EXPECT_TRUE(absl::StrContains(log, "http POST /api/v1/session 200")) << log;
  EXPECT_TRUE(absl::StrContains(log, "http GET /api/v1/models 200")) << log;
  EXPECT_FALSE(absl::StrContains(log, token_));
  EXPECT_FALSE(absl::StrContains(log, b.cookie.substr(b.cookie.find('=') + 1)));
  EXPECT_FALSE(absl::StrContains(log, b.csrf));
}

}  // namespace
}  // namespace gantry::testing
