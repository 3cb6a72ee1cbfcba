#include "storage/worker_identity_repository.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/sha256.h"
#include "storage/job_repository.h"
#include "storage/token_repository.h"
#include "storage/worker_repository.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using WorkerIdentityRepositoryTest = StorageFixture;

gantry::v1::RegisterRequest Registration(const std::string& name) {
  gantry::v1::RegisterRequest r;
  r.set_name(name);
  r.set_slots(1);
  r.set_advertise_host("10.0.0.1");
  return r;
}

TEST_F(WorkerIdentityRepositoryTest, CredentialsAreStoredHashedAndRevokedWithTheirJoinToken) {
  TokenRepository tokens(*db_);
  WorkerRepository workers(*db_);
  WorkerIdentityRepository identities(*db_);
  auto join_a = tokens.CreateJoinToken("rack a");
  auto join_b = tokens.CreateJoinToken("rack b");
  ASSERT_TRUE(join_a.ok() && join_b.ok());
  auto id_a = identities.AuthenticateJoinToken(join_a->secret);
  ASSERT_TRUE(id_a.ok()) << id_a.status();
  EXPECT_EQ(*id_a, join_a->token_id);
  EXPECT_TRUE(absl::IsUnauthenticated(identities.AuthenticateJoinToken("gjt_nope").status()));

  auto w1 = workers.Upsert(Registration("w1"));
  auto w2 = workers.Upsert(Registration("w2"));
  ASSERT_TRUE(w1.ok() && w2.ok());
  ASSERT_TRUE(identities.SetCredential(*w1, Sha256Hex("gwc_one"), join_a->token_id).ok());
  ASSERT_TRUE(identities.SetCredential(*w2, Sha256Hex("gwc_two"), join_b->token_id).ok());
  EXPECT_TRUE(absl::IsNotFound(identities.SetCredential("wrk-x", "h", join_a->token_id)));
  EXPECT_EQ(*identities.AuthenticateWorker("gwc_one"), *w1);
  EXPECT_EQ(*identities.AuthenticateWorker("gwc_two"), *w2);
  EXPECT_TRUE(absl::IsUnauthenticated(identities.AuthenticateWorker("gwc_three").status()));
  auto found = identities.FindByName("w1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->worker_id, *w1);
  EXPECT_EQ((*found)->credential_sha256, Sha256Hex("gwc_one")) << "only the hash is stored";
  EXPECT_FALSE(identities.FindByName("nobody")->has_value());

  auto listed = identities.ListJoinTokens();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].workers(), 1);
  EXPECT_FALSE((*listed)[0].has_revoked_at());

  auto revoked = identities.RevokeJoinToken(join_a->token_id);
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(*revoked, std::vector<std::string>{*w1});
  EXPECT_TRUE(absl::IsUnauthenticated(identities.AuthenticateWorker("gwc_one").status()));
  EXPECT_TRUE(identities.AuthenticateWorker("gwc_two").ok()) << "another token's worker stays";
  EXPECT_TRUE(absl::IsUnauthenticated(identities.AuthenticateJoinToken(join_a->secret).status()));
  EXPECT_TRUE(identities.RevokeJoinToken(join_a->token_id)->empty()) << "twice is OK";
  EXPECT_TRUE(absl::IsNotFound(identities.RevokeJoinToken("jtk-unknown").status()));
  listed = identities.ListJoinTokens();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE((*listed)[0].has_revoked_at());
  EXPECT_EQ((*listed)[0].workers(), 0);
}

TEST_F(WorkerIdentityRepositoryTest, Placements) {
  JobRepository jobs(*db_);
  WorkerIdentityRepository identities(*db_);
  TokenRepository tokens(*db_);
  WorkerRepository workers(*db_);
  auto join = tokens.CreateJoinToken("rack");
  ASSERT_TRUE(join.ok());
  // Workers with standing credentials (a rank credential lives only as long as its worker's).
  std::map<std::string, std::string> id;
  for (const char* name : {"a", "b", "c"}) {
    auto w = workers.Upsert(Registration(name));
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(
        identities.SetCredential(*w, Sha256Hex(std::string("gwc_") + name), join->token_id).ok());
    id[name] = *w;
  }
  gantry::v1::JobSpec spec;
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:layout=25,events=10");
  spec.set_world_size(2);
  auto job = jobs.Create("alice", spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(identities.RecordPlacement(job->id(), 0, {id["a"], id["b"]}).ok());
  ASSERT_TRUE(identities.RecordPlacement(job->id(), 1, {id["c"], id["c"]}).ok());
  auto placed = identities.PlacementOf(job->id());
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->size(), 4u);
  EXPECT_EQ(placed->at({0, 1}), id["b"]);
  EXPECT_EQ(placed->at({1, 0}), id["c"]);
  // A live attempt: the job's current one (0), placing or running; a worker of that attempt.
  EXPECT_FALSE(*identities.HoldsLiveAttempt(job->id(), 0, id["a"])) << "queued";
  test_db_.Query("UPDATE jobs SET state = 'JOB_STATE_RUNNING'");
  EXPECT_TRUE(*identities.HoldsLiveAttempt(job->id(), 0, id["a"]));
  EXPECT_TRUE(*identities.HoldsLiveAttempt(job->id(), 0, ""));
  EXPECT_FALSE(*identities.HoldsLiveAttempt(job->id(), 0, id["c"])) << "attempt 1's worker";
  EXPECT_FALSE(*identities.HoldsLiveAttempt(job->id(), 1, id["c"])) << "not the current attempt";
  test_db_.Query("UPDATE jobs SET attempt = 1, state = 'JOB_STATE_RESTARTING'");
  EXPECT_TRUE(*identities.HoldsLiveAttempt(job->id(), 1, id["c"]));
  EXPECT_FALSE(*identities.HoldsLiveAttempt(job->id(), 0, id["a"]));
  // A rank credential's check: the live attempt and its worker's standing credential, which a
  // revocation (with the join token) takes away in the database and a new registration restores.
  auto held = identities.CheckRankAttempt(job->id(), 1, id["c"]);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(held->live && held->worker_standing);
  EXPECT_FALSE(identities.CheckRankAttempt(job->id(), 0, id["a"])->live) << "an earlier attempt";
  EXPECT_TRUE(identities.CheckRankAttempt(job->id(), 0, id["a"])->worker_standing);
  ASSERT_TRUE(identities.RevokeJoinToken(join->token_id).ok());
  held = identities.CheckRankAttempt(job->id(), 1, id["c"]);
  EXPECT_TRUE(held->live);
  EXPECT_FALSE(held->worker_standing) << "revoked";
  EXPECT_FALSE(identities.CheckRankAttempt(job->id(), 1, "wrk-none")->worker_standing);
  ASSERT_TRUE(identities.SetCredential(id["c"], Sha256Hex("gwc_c2"), join->token_id).ok());
  EXPECT_TRUE(identities.CheckRankAttempt(job->id(), 1, id["c"])->worker_standing);
  test_db_.Query("UPDATE jobs SET state = 'JOB_STATE_SUCCEEDED'");
  EXPECT_FALSE(*identities.HoldsLiveAttempt(job->id(), 1, id["c"])) << "ended";
  EXPECT_TRUE(identities.PlacementOf("job-none")->empty());
}

}  // namespace
}  // namespace gantry::storage
