// WatchJob against the real gantry-server and PostgreSQL: driven by notifications from the
// server's own writes (not by each stream polling the database), and ended with UNAUTHENTICATED
// when its token is revoked.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gantry/v1/admin.grpc.pb.h"
#include "storage/database.h"
#include "storage/transaction.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerWatchTest : public ServerFixture {
 protected:
  struct Watch {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  Watch OpenWatch(const std::string& token, const std::string& job_id) {
    Watch w;
    w.ctx = Ctx(token, 60000);
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    w.reader = training_->WatchJob(w.ctx.get(), request);
    return w;
  }

  // How many server sessions wait on a lock of job_events while the test holds it exclusively
  // for `hold`: each is a watcher reading the database during that time.
  int ReadersDuring(absl::Duration hold) {
    auto db = storage::Database::Create(db_.dsn(), 1);
    EXPECT_TRUE(db.ok()) << db.status();
    int waiting = -1;
    absl::Status s = (*db)->Transact([&](storage::Transaction& tx) {
      tx.work().exec("LOCK TABLE job_events IN ACCESS EXCLUSIVE MODE");
      absl::SleepFor(hold);
      waiting = tx.work()
                    .exec(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted AND "
                        "relation = 'job_events'::regclass")[0][0]
                    .as<int>();
      return absl::AbortedError("rolled back on purpose");
    });
    EXPECT_TRUE(absl::IsAborted(s)) << s;
    return waiting;
  }
};

TEST_F(ServerWatchTest, WatchersWakeOnChangesAndDoNotPollTheDatabase) {
  StopServer();
  StartServer({"--watch-poll-interval-ms=20000"});
  const std::string token = NewTenant("physics");
  const v1::Job job = SubmitJob(token, GoodSpec());  // stays QUEUED: no worker
  constexpr int kWatchers = 10;
  std::vector<Watch> watches;
  for (int i = 0; i < kWatchers; ++i) {
    watches.push_back(OpenWatch(token, job.id()));
    v1::JobEvent first;
    ASSERT_TRUE(watches.back().reader->Read(&first));
    EXPECT_EQ(first.state_change().to(), v1::JOB_STATE_QUEUED);
  }
  // Between changes, no watcher reads the database (old behaviour: every stream, every 200 ms).
  EXPECT_EQ(ReadersDuring(absl::Milliseconds(1500)), 0);

  // A change made through this server reaches every watcher at once, not after the 20 s fallback.
  const auto start = std::chrono::steady_clock::now();
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  v1::Job cancelled;
  ASSERT_TRUE(training_->CancelJob(Ctx(token).get(), cancel, &cancelled).ok());
  for (Watch& w : watches) {
    v1::JobEvent event;
    bool saw_end = false;
    while (w.reader->Read(&event)) {
      if (event.has_state_change() && (event.state_change().to() == v1::JOB_STATE_CANCELLED))
        saw_end = true;
    }
    EXPECT_TRUE(w.reader->Finish().ok());
    EXPECT_TRUE(saw_end);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(ServerWatchTest, ThePollingFallbackStillSeesChangesMadeElsewhere) {
  StopServer();
  StartServer({"--watch-poll-interval-ms=300"});
  const std::string token = NewTenant("physics");
  const v1::Job job = SubmitJob(token, GoodSpec());
  Watch w = OpenWatch(token, job.id());
  v1::JobEvent event;
  ASSERT_TRUE(w.reader->Read(&event));
  // With a short fallback interval the watchers do read between changes: the check above can fail.
  EXPECT_GT(ReadersDuring(absl::Milliseconds(1000)), 0);
  w.ctx->TryCancel();
}

TEST_F(ServerWatchTest, ARevokedTokenEndsItsWatchWithUnauthenticated) {
  StopServer();
  StartServer({"--stream-token-recheck-ms=300"});
  NewTenant("physics");
  v1::CreateTokenRequest create;
  create.set_tenant("physics");
  v1::CreateTokenResponse issued;
  ASSERT_TRUE(admin_->CreateToken(Ctx(admin_token_).get(), create, &issued).ok());
  const v1::Job job = SubmitJob(issued.token(), GoodSpec());
  Watch w = OpenWatch(issued.token(), job.id());
  v1::JobEvent event;
  ASSERT_TRUE(w.reader->Read(&event));

  v1::RevokeTokenRequest revoke;
  revoke.set_token_id(issued.token_id());
  v1::RevokeTokenResponse revoked;
  ASSERT_TRUE(admin_->RevokeToken(Ctx(admin_token_).get(), revoke, &revoked).ok());
  const auto start = std::chrono::steady_clock::now();
  while (w.reader->Read(&event)) {
  }
  const grpc::Status s = w.reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("revoked"), std::string::npos) << s.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(HealthStatus(), 1);
}

}  // namespace
}  // namespace gantry::testing
