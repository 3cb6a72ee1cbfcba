// WorkerInbox without a server: messages are stored in order, kept and retried while the handler
// reports the database unavailable, deduplicated per incarnation, dropped (and acknowledged) on a
// permanent error, and bounded.
#include "server/coordinator/worker_inbox.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

v1::WorkerMessage Log(const std::string& text, uint64_t seq) {
  v1::WorkerMessage m;
  m.set_job_id("job-1");
  m.set_seq(seq);
  m.mutable_log()->set_text(text);
  return m;
}

// A handler that stores texts, or answers `next` (then OK again once `failures` ran out).
struct FakeStore {
  std::vector<std::string> stored;
  absl::Status fail_with;
  int failures = 0;

  WorkerInbox::Handler Handler() {
    return [this](const v1::WorkerMessage& m) {
      if (failures > 0) {
        --failures;
        return fail_with;
      }
      stored.push_back(m.log().text());
      return absl::OkStatus();
    };
  }
};

TEST(WorkerInboxTest, StoresInOrderAndAcknowledgesWhatWasStored) {
  FakeStore store;
  std::vector<std::string> logs;
  WorkerInbox inbox(std::make_shared<WorkerRegistry::Delivery>(), 7, store.Handler(),
                    [&](const std::string& l) { logs.push_back(l); });
  EXPECT_EQ(inbox.acked_seq(), 0u);
  ASSERT_TRUE(inbox.Receive(Log("a", 1)).ok());
  EXPECT_TRUE(inbox.TakeAckDue());
  EXPECT_FALSE(inbox.TakeAckDue());
  ASSERT_TRUE(inbox.Receive(Log("b", 2)).ok());
  EXPECT_EQ(inbox.acked_seq(), 2u);
  EXPECT_EQ(store.stored, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(logs.empty());
}

TEST(WorkerInboxTest, KeepsMessagesInOrderWhileTheDatabaseIsUnavailable) {
  FakeStore store;
  store.fail_with = absl::UnavailableError("database unavailable: no socket");
  store.failures = 3;
  std::vector<std::string> logs;
  WorkerInbox inbox(std::make_shared<WorkerRegistry::Delivery>(), 7, store.Handler(),
                    [&](const std::string& l) { logs.push_back(l); });
  ASSERT_TRUE(inbox.Receive(Log("a", 1)).ok());  // failure 1
  ASSERT_TRUE(inbox.Receive(Log("b", 2)).ok());  // waits behind "a" without a new attempt
  EXPECT_EQ(inbox.pending(), 2u);
  EXPECT_EQ(inbox.acked_seq(), 0u);
  EXPECT_FALSE(inbox.TakeAckDue());
  inbox.Retry();  // failure 2
  inbox.Retry();  // failure 3
  EXPECT_EQ(inbox.pending(), 2u);
  EXPECT_TRUE(store.stored.empty());
  inbox.Retry();
  EXPECT_EQ(inbox.pending(), 0u);
  EXPECT_EQ(store.stored, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(inbox.acked_seq(), 2u);
  EXPECT_TRUE(inbox.TakeAckDue());
  // The outage is logged once when it starts and once when it ends.
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_NE(logs[0].find("unavailable"), std::string::npos) << logs[0];
  EXPECT_NE(logs[1].find("back"), std::string::npos) << logs[1];
}

TEST(WorkerInboxTest, APermanentErrorDropsTheMessageWithALogLineAndGoesOn) {
  FakeStore store;
  store.fail_with = absl::FailedPreconditionError("job job-1 has no ranks on worker w");
  store.failures = 1;
  std::vector<std::string> logs;
  WorkerInbox inbox(std::make_shared<WorkerRegistry::Delivery>(), 7, store.Handler(),
                    [&](const std::string& l) { logs.push_back(l); });
  ASSERT_TRUE(inbox.Receive(Log("a", 1)).ok());
  ASSERT_TRUE(inbox.Receive(Log("b", 2)).ok());
  EXPECT_EQ(store.stored, std::vector<std::string>{"b"});
  EXPECT_EQ(inbox.acked_seq(), 2u);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("no ranks on worker"), std::string::npos) << logs[0];
}

TEST(WorkerInboxTest, DeduplicatesAcrossStreamsOfOneIncarnationOnly) {
  FakeStore store;
  auto delivery = std::make_shared<WorkerRegistry::Delivery>();
  auto quiet = [](const std::string&) {};
  {
    WorkerInbox first(delivery, 7, store.Handler(), quiet);
    ASSERT_TRUE(first.Receive(Log("a", 1)).ok());
    ASSERT_TRUE(first.Receive(Log("b", 2)).ok());
  }
  {
    // The same daemon after a reconnect: 1 and 2 again are acknowledged, not applied.
    WorkerInbox again(delivery, 7, store.Handler(), quiet);
    EXPECT_EQ(again.acked_seq(), 2u);
    ASSERT_TRUE(again.Receive(Log("a", 1)).ok());
    EXPECT_TRUE(again.TakeAckDue());
    ASSERT_TRUE(again.Receive(Log("b", 2)).ok());
    ASSERT_TRUE(again.Receive(Log("c", 3)).ok());
    // Hostile seqs: backwards is a duplicate, 0 is untracked, huge is taken as it is.
    ASSERT_TRUE(again.Receive(Log("back", 1)).ok());
    ASSERT_TRUE(again.Receive(Log("zero", 0)).ok());
    ASSERT_TRUE(again.Receive(Log("huge", UINT64_MAX)).ok());
    ASSERT_TRUE(again.Receive(Log("after huge", 4)).ok());
    EXPECT_EQ(again.acked_seq(), UINT64_MAX);
  }
  EXPECT_EQ(store.stored, (std::vector<std::string>{"a", "b", "c", "zero", "huge"}));
  // A restarted daemon (new incarnation) starts again from 1.
  WorkerInbox restarted(delivery, 8, store.Handler(), quiet);
  EXPECT_EQ(restarted.acked_seq(), 0u);
  ASSERT_TRUE(restarted.Receive(Log("new a", 1)).ok());
  EXPECT_EQ(restarted.acked_seq(), 1u);
  // Without an incarnation nothing is deduplicated.
  WorkerInbox unknown(delivery, 0, store.Handler(), quiet);
  ASSERT_TRUE(unknown.Receive(Log("x", 1)).ok());
  ASSERT_TRUE(unknown.Receive(Log("x again", 1)).ok());
  EXPECT_EQ(unknown.acked_seq(), 1u);
  EXPECT_EQ(store.stored.back(), "x again");
}

TEST(WorkerInboxTest, IsBoundedWhileTheDatabaseIsUnavailable) {
  FakeStore store;
  store.fail_with = absl::UnavailableError("down");
  store.failures = 1000;
  WorkerInbox inbox(
      std::make_shared<WorkerRegistry::Delivery>(), 7, store.Handler(), [](const std::string&) {},
      /*max_pending=*/3, /*max_pending_bytes=*/1 << 20);
  for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(inbox.Receive(Log("m", seq)).ok());
  const absl::Status full = inbox.Receive(Log("m", 4));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(inbox.pending(), 3u);

  WorkerInbox small(
      std::make_shared<WorkerRegistry::Delivery>(), 7, store.Handler(), [](const std::string&) {},
      /*max_pending=*/100, /*max_pending_bytes=*/100);
  ASSERT_TRUE(small.Receive(Log(std::string(80, 'x'), 1)).ok());  // alone it always fits
  EXPECT_EQ(small.Receive(Log(std::string(80, 'y'), 2)).code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gantry::server
