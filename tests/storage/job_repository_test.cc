#include "storage/job_repository.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using gantry::v1::Job;
using gantry::v1::JobSpec;
using gantry::v1::JobState;

JobSpec Spec(const std::string& name, std::map<std::string, std::string> labels = {}) {
  JobSpec spec;
  spec.set_display_name(name);
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:events=100");
  spec.set_world_size(2);
  spec.set_priority(5);
  spec.mutable_hyper_parameters()->set_epochs(3);
  for (const auto& [k, v] : labels) (*spec.mutable_labels())[k] = v;
  return spec;
}

using JobRepositoryTest = StorageFixture;

TEST_F(JobRepositoryTest, CreateStoresQueuedJobWithFirstEvent) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("first"), "");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id().rfind("job-", 0), 0u);
  EXPECT_EQ(job->id().size(), 4u + 36u);
  EXPECT_EQ(job->owner(), "alice");
  EXPECT_EQ(job->state(), gantry::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job->reason(), "Submitted");
  EXPECT_EQ(job->message(), "waiting for 2 free slots");
  EXPECT_EQ(job->spec().display_name(), "first");
  EXPECT_EQ(job->spec().hyper_parameters().epochs(), 3);
  EXPECT_GT(job->created_at().seconds(), 1600000000);
  EXPECT_FALSE(job->has_started_at());

  auto got = jobs.Get("alice", job->id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->SerializeAsString(), job->SerializeAsString());
  auto events = jobs.ListEvents(job->id(), 0, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].sequence(), 1);
  EXPECT_EQ((*events)[0].state_change().to(), gantry::v1::JOB_STATE_QUEUED);
  EXPECT_EQ((*events)[0].state_change().reason(), "Submitted");
}

TEST_F(JobRepositoryTest, CountByOwnerAndStateFeedsTheMetrics) {
  JobRepository jobs(*db_);
  auto empty = jobs.CountByOwnerAndState();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->jobs.empty());
  EXPECT_EQ(empty->oldest_queued_seconds, 0);
  auto a1 = jobs.Create("alice", Spec("a1"), "");
  auto a2 = jobs.Create("alice", Spec("a2"), "");
  auto b1 = jobs.Create("bob", Spec("b1"), "");
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  ASSERT_TRUE(jobs.Transition(a2->id(), {gantry::v1::JOB_STATE_QUEUED},
                              gantry::v1::JOB_STATE_CANCELLED, "Cancelled", "by test")
                  .ok());
  auto counts = jobs.CountByOwnerAndState();
  ASSERT_TRUE(counts.ok()) << counts.status();
  using Key = std::pair<std::string, gantry::v1::JobState>;
  const std::map<Key, int64_t> expected = {{{"alice", gantry::v1::JOB_STATE_QUEUED}, 1},
                                           {{"alice", gantry::v1::JOB_STATE_CANCELLED}, 1},
                                           {{"bob", gantry::v1::JOB_STATE_QUEUED}, 1}};
  EXPECT_EQ(counts->jobs, expected);
  EXPECT_GE(counts->oldest_queued_seconds, 0);
  EXPECT_LT(counts->oldest_queued_seconds, 60);
}

TEST_F(JobRepositoryTest, SetQueuedMessageExplainsOnlyQueuedJobsWithoutAnEvent) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("waits"), "");
  ASSERT_TRUE(job.ok()) << job.status();
  auto changed =
      jobs.SetQueuedMessage(job->id(), "waiting for 2 free slots matching pool=a (1 free)");
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_FALSE(
      *jobs.SetQueuedMessage(job->id(), "waiting for 2 free slots matching pool=a (1 free)"))
      << "the same message again changes nothing";
  auto got = jobs.Get("alice", job->id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->message(), "waiting for 2 free slots matching pool=a (1 free)");
  EXPECT_EQ(got->reason(), "Submitted");
  EXPECT_EQ(jobs.ListEvents(job->id(), 0, 0)->size(), 1u) << "no event for an explanation";

  ASSERT_TRUE(jobs.Transition(job->id(), {gantry::v1::JOB_STATE_QUEUED},
                              gantry::v1::JOB_STATE_PLACING, "Placed", "on w1")
                  .ok());
  EXPECT_FALSE(*jobs.SetQueuedMessage(job->id(), "stale")) << "only QUEUED jobs are explained";
  EXPECT_EQ(jobs.Get("alice", job->id())->message(), "on w1");
  EXPECT_FALSE(*jobs.SetQueuedMessage("job-00000000-0000-0000-0000-000000000000", "x"));
}

TEST_F(JobRepositoryTest, TenantIsolationIsNotFound) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("a"), "");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(jobs.Get("bob", job->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(jobs.Get("", job->id()).ok());  // admin view
  EXPECT_EQ(jobs.Get("alice", "job-nonexistent").status().code(), absl::StatusCode::kNotFound);
  auto bob_list = jobs.List("bob", {}, {}, 0, "");
  ASSERT_TRUE(bob_list.ok());
  EXPECT_TRUE(bob_list->items.empty());
  // Unknown owner (no such tenant) is refused.
  EXPECT_EQ(jobs.Create("mallory", Spec("x"), "").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobRepositoryTest, IdempotentSubmit) {
  JobRepository jobs(*db_);
  auto a = jobs.Create("alice", Spec("a"), "req-1");
  auto b = jobs.Create("alice", Spec("different"), "req-1");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->id(), b->id());
  EXPECT_EQ(b->spec().display_name(), "a");
  // Another owner may use the same key.
  auto c = jobs.Create("bob", Spec("c"), "req-1");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->id(), a->id());
  // No key: always new.
  auto d = jobs.Create("alice", Spec("a"), "");
  auto e = jobs.Create("alice", Spec("a"), "");
  ASSERT_TRUE(d.ok() && e.ok());
  EXPECT_NE(d->id(), e->id());
  EXPECT_EQ(test_db_.Query("SELECT count(*) FROM jobs"), "4\n");
  // Only one first event for the deduplicated job.
  EXPECT_EQ(jobs.ListEvents(a->id(), 0, 0)->size(), 1u);

  // Concurrent retries with one key create one job.
  std::vector<std::string> ids(6);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      auto j = jobs.Create("alice", Spec("race"), "req-race");
      if (j.ok()) ids[i] = j->id();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& id : ids) EXPECT_EQ(id, ids[0]);
  EXPECT_FALSE(ids[0].empty());
}

TEST_F(JobRepositoryTest, ListFiltersAndPaginates) {
  JobRepository jobs(*db_);
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    auto j =
        jobs.Create("alice", Spec("j" + std::to_string(i), {{"team", i % 2 ? "odd" : "even"}}), "");
    ASSERT_TRUE(j.ok());
    ids.push_back(j->id());
  }
  ASSERT_TRUE(jobs.Create("bob", Spec("b", {{"team", "odd"}}), "").ok());
  ASSERT_TRUE(jobs.Transition(ids[0], {gantry::v1::JOB_STATE_QUEUED},
                              gantry::v1::JOB_STATE_CANCELLED, "Cancelled", "")
                  .ok());

  // Newest first, pages of 3: 6 5 4 | 3 2 1 | 0.
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = jobs.List("alice", {}, {}, 3, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const Job& j : page->items) seen.push_back(j.id());
    token = page->next_page_token;
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  std::vector<std::string> expected(ids.rbegin(), ids.rend());
  EXPECT_EQ(seen, expected);

  auto odd = jobs.List("alice", {}, {{"team", "odd"}}, 0, "");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->items.size(), 3u);
  for (const Job& j : odd->items) EXPECT_EQ(j.spec().labels().at("team"), "odd");
  auto none = jobs.List("alice", {}, {{"team", "odd"}, {"x", "y"}}, 0, "");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->items.empty());

  auto cancelled = jobs.List("alice", {gantry::v1::JOB_STATE_CANCELLED}, {}, 0, "");
  ASSERT_TRUE(cancelled.ok());
  ASSERT_EQ(cancelled->items.size(), 1u);
  EXPECT_EQ(cancelled->items[0].id(), ids[0]);
  auto queued_or_cancelled = jobs.List(
      "alice", {gantry::v1::JOB_STATE_QUEUED, gantry::v1::JOB_STATE_CANCELLED}, {}, 0, "");
  EXPECT_EQ(queued_or_cancelled->items.size(), 7u);

  auto all = jobs.List("", {}, {{"team", "odd"}}, 0, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->items.size(), 4u);

  EXPECT_EQ(jobs.List("alice", {}, {}, 0, "bm90LWEtdG9rZW4").status().code(),
            absl::StatusCode::kInvalidArgument);
  // A token of another listing kind is refused too.
  TenantRepository tenants(*db_);
  auto tp = tenants.ListTenants(1, "");
  ASSERT_FALSE(tp->next_page_token.empty());
  EXPECT_EQ(jobs.List("alice", {}, {}, 0, tp->next_page_token).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(JobRepositoryTest, TransitionsAllowedAndRefused) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("t"), "");
  ASSERT_TRUE(job.ok());
  const std::string id = job->id();

  auto refused = jobs.Transition(id, {gantry::v1::JOB_STATE_RUNNING},
                                 gantry::v1::JOB_STATE_SUCCEEDED, "Done", "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("is JOB_STATE_QUEUED"), absl::string_view::npos)
      << refused.status();

  auto placing = jobs.Transition(id, {gantry::v1::JOB_STATE_QUEUED}, gantry::v1::JOB_STATE_PLACING,
                                 "Placed", "2 slots");
  ASSERT_TRUE(placing.ok()) << placing.status();
  EXPECT_EQ(placing->state(), gantry::v1::JOB_STATE_PLACING);
  EXPECT_EQ(placing->reason(), "Placed");
  EXPECT_EQ(placing->message(), "2 slots");
  auto running = jobs.Transition(id, {gantry::v1::JOB_STATE_PLACING}, gantry::v1::JOB_STATE_RUNNING,
                                 "Started", "");
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->has_started_at());
  auto restarting = jobs.Transition(id, {gantry::v1::JOB_STATE_RUNNING},
                                    gantry::v1::JOB_STATE_RESTARTING, "RankFailed", "rank 1");
  ASSERT_TRUE(restarting.ok());
  EXPECT_EQ(restarting->restarts(), 1);
  auto running2 = jobs.Transition(id, {gantry::v1::JOB_STATE_RESTARTING},
                                  gantry::v1::JOB_STATE_RUNNING, "Resumed", "");
  ASSERT_TRUE(running2.ok());
  EXPECT_EQ(running2->started_at().SerializeAsString(), running->started_at().SerializeAsString());
  EXPECT_FALSE(running2->has_finished_at());
  auto done = jobs.Transition(id, {gantry::v1::JOB_STATE_RUNNING}, gantry::v1::JOB_STATE_SUCCEEDED,
                              "Succeeded", "ok");
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->has_finished_at());
  EXPECT_EQ(jobs.Transition(id, {gantry::v1::JOB_STATE_QUEUED, gantry::v1::JOB_STATE_RUNNING},
                            gantry::v1::JOB_STATE_CANCELLED, "Cancelled", "")
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(jobs.Transition("job-none", {gantry::v1::JOB_STATE_QUEUED},
                            gantry::v1::JOB_STATE_CANCELLED, "", "")
                .status()
                .code(),
            absl::StatusCode::kNotFound);

  // Every transition left a state_change event, in order.
  auto events = jobs.ListEvents(id, 0, 0);
  ASSERT_TRUE(events.ok());
  std::vector<JobState> to;
  for (const auto& e : *events) to.push_back(e.state_change().to());
  EXPECT_EQ(
      to, (std::vector<JobState>{gantry::v1::JOB_STATE_QUEUED, gantry::v1::JOB_STATE_PLACING,
                                 gantry::v1::JOB_STATE_RUNNING, gantry::v1::JOB_STATE_RESTARTING,
                                 gantry::v1::JOB_STATE_RUNNING, gantry::v1::JOB_STATE_SUCCEEDED}));
  EXPECT_EQ((*events)[3].state_change().from(), gantry::v1::JOB_STATE_RUNNING);
  EXPECT_EQ((*events)[3].state_change().message(), "rank 1");
}

TEST_F(JobRepositoryTest, ConcurrentTransitionsOnlyOneWins) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("race"), "");
  ASSERT_TRUE(job.ok());
  std::atomic<int> wins{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      auto r = jobs.Transition(job->id(), {gantry::v1::JOB_STATE_QUEUED},
                               gantry::v1::JOB_STATE_CANCELLED, "Cancelled", "");
      if (r.ok()) ++wins;
      if (r.status().code() == absl::StatusCode::kFailedPrecondition) ++refused;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(refused.load(), 3);
}

TEST_F(JobRepositoryTest, EventsAreOrderedAndPaged) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("ev"), "");
  ASSERT_TRUE(job.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        gantry::v1::JobEvent e;
        e.mutable_log()->set_rank(t);
        e.mutable_log()->set_text("line " + std::to_string(i));
        e.set_sequence(999);  // ignored
        ASSERT_TRUE(jobs.AppendEvent(job->id(), e).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto all = jobs.ListEvents(job->id(), 0, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 41u);
  for (size_t i = 0; i < all->size(); ++i)
    EXPECT_EQ((*all)[i].sequence(), static_cast<int64_t>(i + 1));
  // Per rank, lines keep their order.
  std::map<int, int> next;
  for (size_t i = 1; i < all->size(); ++i) {
    const auto& log = (*all)[i].log();
    EXPECT_EQ(log.text(), "line " + std::to_string(next[log.rank()]++));
  }
  auto tail = jobs.ListEvents(job->id(), 38, 0);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 3u);
  EXPECT_EQ((*tail)[0].sequence(), 39);
  auto limited = jobs.ListEvents(job->id(), 0, 5);
  EXPECT_EQ(limited->size(), 5u);
  EXPECT_EQ(jobs.ListEvents("job-none", 0, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs.AppendEvent("job-none", gantry::v1::JobEvent()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobRepositoryTest, ProgressModelRefAndListByState) {
  JobRepository jobs(*db_);
  auto a = jobs.Create("alice", Spec("a"), "");
  auto b = jobs.Create("bob", Spec("b"), "");
  ASSERT_TRUE(a.ok() && b.ok());
  gantry::v1::Progress p;
  p.set_epoch(2);
  p.set_step(1234);
  (*p.mutable_losses())["d_loss"] = 0.5;
  ASSERT_TRUE(jobs.UpdateProgress(a->id(), p).ok());
  ASSERT_TRUE(jobs.SetModelRef(a->id(), "tiny:1").ok());
  auto got = jobs.Get("alice", a->id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->progress().step(), 1234);
  EXPECT_EQ(got->progress().losses().at("d_loss"), 0.5);
  EXPECT_EQ(got->model_ref(), "tiny:1");
  EXPECT_EQ(jobs.UpdateProgress("job-none", p).code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(jobs.Transition(b->id(), {gantry::v1::JOB_STATE_QUEUED},
                              gantry::v1::JOB_STATE_PLACING, "Placed", "")
                  .ok());
  auto queued = jobs.ListByState({gantry::v1::JOB_STATE_QUEUED});
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 1u);
  EXPECT_EQ((*queued)[0].id(), a->id());
  auto both = jobs.ListByState({gantry::v1::JOB_STATE_QUEUED, gantry::v1::JOB_STATE_PLACING});
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].id(), a->id());  // oldest first
}

}  // namespace

TEST_F(JobRepositoryTest, RestartsCountAttemptsAndCheckpointsAreKeptAndExpired) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("restarts"), "");
  ASSERT_TRUE(job.ok());
  const std::string id = job->id();
  ASSERT_TRUE(jobs.Transition(id, {gantry::v1::JOB_STATE_QUEUED}, gantry::v1::JOB_STATE_PLACING,
                              "Placed", "")
                  .ok());
  ASSERT_TRUE(jobs.Transition(id, {gantry::v1::JOB_STATE_PLACING}, gantry::v1::JOB_STATE_RUNNING,
                              "Running", "")
                  .ok());

  auto saved = [](const std::string& sha, int64_t step) {
    gantry::v1::CheckpointSaved c;
    c.set_sha256(sha);
    c.set_step(step);
    c.set_epoch(static_cast<int>(step / 10));
    c.set_size_bytes(100);
    return c;
  };
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  auto newest = jobs.RecordCheckpoint(id, 0, saved(a, 10));
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_TRUE(*newest);
  EXPECT_TRUE(*jobs.RecordCheckpoint(id, 0, saved(b, 20)));
  EXPECT_FALSE(*jobs.RecordCheckpoint(id, 0, saved(c, 15)))
      << "behind the latest: kept, not latest";
  EXPECT_EQ(jobs.Get("", id)->latest_checkpoint().sha256(), b);

  // A preemption (not counted), then a counted failure: attempt counts both, restarts one.
  gantry::v1::Restart preempted;
  preempted.set_reason("Preempted");
  preempted.set_counted(false);
  auto r1 = jobs.BeginRestart(id, {gantry::v1::JOB_STATE_RUNNING}, preempted);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->state(), gantry::v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(r1->attempt(), 1);
  EXPECT_EQ(r1->restarts(), 0);
  EXPECT_EQ(r1->reason(), "Preempted");
  gantry::v1::Restart lost;
  lost.set_reason("WorkerLost");
  lost.set_counted(true);
  auto r2 = jobs.BeginRestart(id, {gantry::v1::JOB_STATE_RESTARTING}, lost);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->attempt(), 2);
  EXPECT_EQ(r2->restarts(), 1);
  EXPECT_EQ(jobs.BeginRestart(id, {gantry::v1::JOB_STATE_RUNNING}, lost).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto events = jobs.ListEvents(id, 0, 0);
  ASSERT_TRUE(events.ok());
  int restart_events = 0;
  for (const auto& e : *events) {
    if (e.has_restart()) {
      ++restart_events;
      EXPECT_EQ(e.restart().attempt(), restart_events) << "the attempt that starts";
    }
  }
  EXPECT_EQ(restart_events, 2);

  // Uploads of an earlier attempt are refused.
  EXPECT_EQ(jobs.RecordCheckpoint(id, 1, saved(std::string(64, 'e'), 30)).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // Retention keeps the newest two; of the expired, a blob another job also uses stays.
  auto other = jobs.Create("alice", Spec("other"), "");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(jobs.RecordCheckpoint(other->id(), 0, saved(a, 10)).ok());
  auto expired = jobs.ExpireCheckpoints(id, 2);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_TRUE(expired->empty())
      << "a (step 10) expires, but the other job's checkpoint is the same "
         "blob; b (20) and c (15) are the newest two";
  auto none = jobs.ExpireCheckpoints(id, 2);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty()) << "already expired";
  auto last = jobs.ExpireCheckpoints(id, 1);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, std::vector<std::string>{c}) << "c goes; b, the latest, stays";
}

TEST_F(JobRepositoryTest, KeepBestKeepsTheLowestFomCheckpointBeyondKeepLast) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec("best"), "");
  ASSERT_TRUE(job.ok());
  const std::string id = job->id();
  auto saved = [](char c, int64_t step, std::optional<double> fom) {
    gantry::v1::CheckpointSaved s;
    s.set_sha256(std::string(64, c));
    s.set_step(step);
    s.set_epoch(static_cast<int>(step / 10));
    s.set_size_bytes(100);
    if (fom.has_value()) s.set_fom(*fom);
    return s;
  };
  // fom (lower is better): a 0.9, b 0.2 (the best), c 0.5, d without a fom.
  ASSERT_TRUE(jobs.RecordCheckpoint(id, 0, saved('a', 10, 0.9)).ok());
  ASSERT_TRUE(jobs.RecordCheckpoint(id, 0, saved('b', 20, 0.2)).ok());
  auto expired = jobs.ExpireCheckpoints(id, 1, /*keep_best=*/true);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(*expired, std::vector<std::string>{std::string(64, 'a')})
      << "b is both the newest and the best";
  ASSERT_TRUE(jobs.RecordCheckpoint(id, 0, saved('c', 30, 0.5)).ok());
  expired = jobs.ExpireCheckpoints(id, 1, true);
  ASSERT_TRUE(expired.ok());
  EXPECT_TRUE(expired->empty()) << "c is the newest, b the best: both stay";
  ASSERT_TRUE(jobs.RecordCheckpoint(id, 0, saved('d', 40, std::nullopt)).ok());
  expired = jobs.ExpireCheckpoints(id, 1, true);
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(*expired, std::vector<std::string>{std::string(64, 'c')})
      << "c, newer but worse than b, goes; d (the newest, no fom) and b (the best) stay";
  // The latest checkpoint and the events carry the fom.
  EXPECT_FALSE(jobs.Get("", id)->latest_checkpoint().has_fom()) << "d has none";
  auto events = jobs.ListEvents(id, 0, 0);
  ASSERT_TRUE(events.ok());
  std::vector<double> foms;
  for (const auto& e : *events) {
    if (e.has_checkpoint_saved() && e.checkpoint_saved().has_fom()) {
      foms.push_back(e.checkpoint_saved().fom());
    }
  }
  EXPECT_EQ(foms, (std::vector<double>{0.9, 0.2, 0.5}));
  // The best of the live ones, and any one as recorded (c is expired, still recorded).
  auto best = jobs.BestCheckpoint(id);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ((*best)->sha256(), std::string(64, 'b'));
  EXPECT_EQ((*best)->step(), 20);
  EXPECT_EQ((*best)->epoch(), 2);
  EXPECT_EQ((*best)->size_bytes(), 100);
  EXPECT_DOUBLE_EQ((*best)->fom(), 0.2);
  auto found = jobs.FindCheckpoint(id, std::string(64, 'c'));
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->step(), 30);
  EXPECT_DOUBLE_EQ((*found)->fom(), 0.5);
  found = jobs.FindCheckpoint(id, std::string(64, 'd'));
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_FALSE((*found)->has_fom());
  found = jobs.FindCheckpoint(id, std::string(64, 'e'));
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  // Another job's checkpoints are not this one's.
  auto other = jobs.Create("alice", Spec("other"), "");
  ASSERT_TRUE(other.ok());
  found = jobs.FindCheckpoint(other->id(), std::string(64, 'b'));
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  best = jobs.BestCheckpoint(other->id());
  ASSERT_TRUE(best.ok());
  EXPECT_FALSE(best->has_value());
  // A tie goes to the newest step, as retention keeps it.
  ASSERT_TRUE(jobs.RecordCheckpoint(id, 0, saved('f', 50, 0.2)).ok());
  best = jobs.BestCheckpoint(id);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->sha256(), std::string(64, 'f'));
  // Without keep_best the best one is just older than the newest keep_last.
  expired = jobs.ExpireCheckpoints(id, 1, /*keep_best=*/false);
  ASSERT_TRUE(expired.ok());
  std::sort(expired->begin(), expired->end());
  EXPECT_EQ(*expired, (std::vector<std::string>{std::string(64, 'b'), std::string(64, 'd')}));
  best = jobs.BestCheckpoint(id);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->sha256(), std::string(64, 'f')) << "expired ones are never the best";
}

}  // namespace gantry::storage
