// OutboundQueue: numbering, keeping messages until acknowledged, re-sending after a reconnect, and
// the bound (progress dropped first, then logs; rank status and results never).
#include "workers/agent/outbound_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gantry::agent {
namespace {

namespace v1 = ::gantry::v1;

v1::WorkerMessage Progress(int step) {
  v1::WorkerMessage m;
  m.set_job_id("job-p");
  m.mutable_progress()->set_step(step);
  return m;
}

v1::WorkerMessage LogLine(const std::string& text) {
  v1::WorkerMessage m;
  m.set_job_id("job-l");
  m.mutable_log()->set_text(text);
  return m;
}

v1::WorkerMessage Exited(int rank) {
  v1::WorkerMessage m;
  m.set_job_id("job-s");
  m.mutable_rank_status()->set_rank(rank);
  m.mutable_rank_status()->set_phase(v1::RANK_PHASE_EXITED);
  return m;
}

v1::WorkerMessage Result() {
  v1::WorkerMessage m;
  m.set_job_id("job-r");
  m.mutable_result()->set_success(true);
  return m;
}

// Takes every unsent message, marking each sent; returns their seqs.
std::vector<uint64_t> SendAll(OutboundQueue& q) {
  std::vector<uint64_t> seqs;
  while (const v1::WorkerMessage* m = q.NextUnsent()) {
    seqs.push_back(m->seq());
    q.MarkSent(m->seq());
  }
  return seqs;
}

TEST(OutboundQueueTest, NumbersMessagesFromOneAndReplacesAnyGivenSeq) {
  OutboundQueue q;
  v1::WorkerMessage m = Progress(1);
  m.set_seq(777);
  EXPECT_EQ(q.Push(m).seq, 1u);
  EXPECT_EQ(q.Push(LogLine("a")).seq, 2u);
  EXPECT_EQ(q.Push(Result()).seq, 3u);
  ASSERT_NE(q.NextUnsent(), nullptr);
  EXPECT_EQ(q.NextUnsent()->seq(), 1u);
  EXPECT_EQ(q.NextUnsent()->progress().step(), 1);
}

TEST(OutboundQueueTest, KeepsSentMessagesUntilAcknowledged) {
  OutboundQueue q;
  for (int i = 1; i <= 4; ++i) q.Push(Progress(i));
  EXPECT_EQ(SendAll(q), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(q.NextUnsent(), nullptr);
  EXPECT_EQ(q.size(), 4u);  // written is not stored
  EXPECT_EQ(q.Ack(2), 2u);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.acked_seq(), 2u);
  EXPECT_EQ(q.Ack(1), 0u);  // an older ack changes nothing
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.Ack(4), 2u);
  EXPECT_TRUE(q.empty());
}

TEST(OutboundQueueTest, ResendsEveryUnacknowledgedMessageInOrderAfterAReconnect) {
  OutboundQueue q;
  q.Push(Exited(0));
  q.Push(Progress(1));
  q.Push(Result());
  EXPECT_EQ(SendAll(q).size(), 3u);
  q.Ack(1);
  // The stream broke; a message queued meanwhile comes after the re-sent ones.
  q.Push(LogLine("late"));
  q.RewindUnacked();
  EXPECT_EQ(SendAll(q), (std::vector<uint64_t>{2, 3, 4}));
  // A second reconnect before any ack: the same again.
  q.RewindUnacked();
  EXPECT_EQ(SendAll(q), (std::vector<uint64_t>{2, 3, 4}));
  q.Ack(4);
  q.RewindUnacked();
  EXPECT_EQ(SendAll(q), std::vector<uint64_t>{});
}

TEST(OutboundQueueTest, AnAckBeyondWhatWasNumberedAcknowledgesWhatExists) {
  OutboundQueue q;
  q.Push(Progress(1));
  q.Push(Progress(2));
  EXPECT_EQ(q.Ack(~uint64_t{0}), 2u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.acked_seq(), 2u);
  // Later messages are still numbered on and still sent.
  EXPECT_EQ(q.Push(Result()).seq, 3u);
  EXPECT_EQ(SendAll(q), std::vector<uint64_t>{3});
}

TEST(OutboundQueueTest, WhenFullDropsOldestProgressThenLogsNeverStatusOrResults) {
  OutboundQueue q(4);
  q.Push(Exited(0));                               // 1
  q.Push(Progress(1));                             // 2
  q.Push(LogLine("one"));                          // 3
  q.Push(Progress(2));                             // 4
  OutboundQueue::PushResult r = q.Push(Result());  // 5: drops progress 1
  EXPECT_EQ(r.dropped, v1::WorkerMessage::kProgress);
  r = q.Push(Result());  // 6: drops progress 2
  EXPECT_EQ(r.dropped, v1::WorkerMessage::kProgress);
  r = q.Push(Exited(1));  // 7: no progress left: drops the log
  EXPECT_EQ(r.dropped, v1::WorkerMessage::kLog);
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.dropped(), 3);
  // Only status and results left: the queue grows past its bound instead.
  r = q.Push(Result());
  EXPECT_EQ(r.dropped, v1::WorkerMessage::KIND_NOT_SET);
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.dropped(), 3);
  std::vector<v1::WorkerMessage::KindCase> kinds;
  std::vector<uint64_t> seqs;
  while (const v1::WorkerMessage* m = q.NextUnsent()) {
    kinds.push_back(m->kind_case());
    seqs.push_back(m->seq());
    q.MarkSent(m->seq());
  }
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 5, 6, 7, 8}));
  EXPECT_EQ(kinds, (std::vector<v1::WorkerMessage::KindCase>{
                       v1::WorkerMessage::kRankStatus, v1::WorkerMessage::kResult,
                       v1::WorkerMessage::kResult, v1::WorkerMessage::kRankStatus,
                       v1::WorkerMessage::kResult}));
}

TEST(OutboundQueueTest, DroppingASentMessageKeepsTheSendPosition) {
  OutboundQueue q(3);
  q.Push(Progress(1));
  q.Push(Progress(2));
  q.Push(Result());
  EXPECT_EQ(SendAll(q).size(), 3u);
  q.Push(LogLine("x"));  // drops progress 1 (sent, not acknowledged)
  EXPECT_EQ(SendAll(q), std::vector<uint64_t>{4});
  q.RewindUnacked();
  EXPECT_EQ(SendAll(q), (std::vector<uint64_t>{2, 3, 4}));
}

TEST(OutboundQueueTest, ListsTheJobsOfHeldMessages) {
  OutboundQueue q;
  q.Push(Progress(1));
  q.Push(Result());
  q.Push(Progress(2));
  EXPECT_EQ(q.jobs(), (std::set<std::string>{"job-p", "job-r"}));
  q.Ack(2);
  EXPECT_EQ(q.jobs(), (std::set<std::string>{"job-p"}));
}

}  // namespace
}  // namespace gantry::agent
