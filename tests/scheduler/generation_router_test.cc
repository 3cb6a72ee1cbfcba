// Unit tests of the GenerationRouter's policy (server/generation_router.h): pure logic, fed with
// worker-protocol messages as the job coordinator would, with an injected clock.
#include "scheduler/generation_router.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gantry::scheduler {
namespace {

namespace v1 = ::gantry::v1;

const std::string kSha(64, 'a');
const std::string kOther(64, 'b');
const absl::Time kNow = absl::FromUnixSeconds(1000000);

v1::RegisterRequest Reg(const std::string& name, const std::string& endpoint) {
  v1::RegisterRequest r;
  r.set_name(name);
  r.set_generation_endpoint(endpoint);
  r.set_generation_secret("secret-of-" + name);
  return r;
}

v1::Heartbeat Beat(std::vector<std::string> loaded, int active = 0, int64_t queued = 0) {
  v1::Heartbeat hb;
  for (const std::string& s : loaded) hb.add_loaded_models()->set_checkpoint_sha256(s);
  hb.set_generation_active_requests(active);
  hb.set_generation_queued_showers(queued);
  return hb;
}

std::vector<std::string> Names(const std::vector<GenerationRouter::Candidate>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.name);
  return out;
}

// Three connected serving workers a, b, c.
void AddThree(GenerationRouter& router) {
  for (const char* n : {"a", "b", "c"}) {
    router.OnRegister(std::string("id-") + n, Reg(n, std::string(n) + ":1"));
    router.OnConnect(std::string("id-") + n);
  }
}

TEST(GenerationRouterTest, OnlyConnectedWorkersWithAnEndpointServe) {
  GenerationRouter router;
  EXPECT_TRUE(router.Candidates(kSha, kNow).empty());
  router.OnRegister("id-a", Reg("a", "a:1"));
  EXPECT_TRUE(router.Candidates(kSha, kNow).empty()) << "registered but not connected";
  router.OnConnect("id-a");
  router.OnRegister("id-b", Reg("b", ""));
  router.OnConnect("id-b");
  std::vector<GenerationRouter::Candidate> cs = router.Candidates(kSha, kNow);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].name, "a");
  EXPECT_EQ(cs[0].endpoint, "a:1");
  EXPECT_EQ(cs[0].secret, "secret-of-a");
  EXPECT_EQ(router.ServingWorkers(), 1);
  router.OnDisconnect("id-a");
  EXPECT_TRUE(router.Candidates(kSha, kNow).empty());
  EXPECT_EQ(router.ServingWorkers(), 0);
}

TEST(GenerationRouterTest, WorkersWithTheModelLoadedComeFirst) {
  GenerationRouter router;
  AddThree(router);
  router.OnHeartbeat("id-c", Beat({kSha}));
  router.OnHeartbeat("id-b", Beat({kOther}));
  std::vector<GenerationRouter::Candidate> cs = router.Candidates(kSha, kNow);
  EXPECT_EQ(Names(cs), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_TRUE(cs[0].has_model);
  EXPECT_FALSE(cs[1].has_model);
  // A heartbeat replaces the loaded set (the model was unloaded).
  router.OnHeartbeat("id-c", Beat({}));
  EXPECT_EQ(Names(router.Candidates(kSha, kNow)), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(GenerationRouterTest, LeastBusyFirstByWhatTheServerDispatched) {
  GenerationRouter router;
  AddThree(router);
  for (const char* id : {"id-a", "id-b", "id-c"}) router.OnHeartbeat(id, Beat({kSha}));
  router.Begin("id-a", kSha, 1000);
  router.Begin("id-b", kSha, 10);
  EXPECT_EQ(Names(router.Candidates(kSha, kNow)), (std::vector<std::string>{"c", "b", "a"}));
  // Showers received back make a worker less busy; the call's end releases the rest.
  router.Received("id-a", 995);
  EXPECT_EQ(Names(router.Candidates(kSha, kNow)), (std::vector<std::string>{"c", "a", "b"}));
  router.End("id-b", 10);
  router.End("id-a", 5);
  router.Begin("id-c", kSha, 1);
  EXPECT_EQ(Names(router.Candidates(kSha, kNow)), (std::vector<std::string>{"a", "b", "c"}));
  // With equal dispatched load the heartbeat's queue breaks the tie.
  router.End("id-c", 1);
  router.OnHeartbeat("id-a", Beat({kSha}, 1, 500));
  EXPECT_EQ(Names(router.Candidates(kSha, kNow)), (std::vector<std::string>{"b", "c", "a"}));
}

TEST(GenerationRouterTest, ADispatchCountsAsLoadedUntilTheNextHeartbeat) {
  GenerationRouter router;
  AddThree(router);
  router.Begin("id-b", kSha, 1);
  router.End("id-b", 0);
  EXPECT_EQ(Names(router.Candidates(kSha, kNow))[0], "b");
  router.OnHeartbeat("id-b", Beat({}));
  EXPECT_EQ(Names(router.Candidates(kSha, kNow))[0], "a");
}

TEST(GenerationRouterTest, AnUnreachableWorkerGoesLastForAWhile) {
  GenerationRouter router;
  AddThree(router);
  router.OnHeartbeat("id-a", Beat({kSha}));
  router.MarkUnreachable("id-a", kNow);
  EXPECT_EQ(Names(router.Candidates(kSha, kNow + absl::Seconds(1))),
            (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(Names(router.Candidates(kSha, kNow + GenerationRouter::kUnreachablePenalty)),
            (std::vector<std::string>{"a", "b", "c"}));
  router.MarkUnreachable("id-a", kNow);
  router.MarkReachable("id-a");
  EXPECT_EQ(Names(router.Candidates(kSha, kNow))[0], "a");
}

TEST(GenerationRouterTest, ReRegisteringIsANewProcessThatHasNothingLoaded) {
  GenerationRouter router;
  AddThree(router);
  router.OnHeartbeat("id-c", Beat({kSha}));
  router.OnRegister("id-c", Reg("c", "c:2"));
  std::vector<GenerationRouter::Candidate> cs = router.Candidates(kSha, kNow);
  EXPECT_EQ(Names(cs), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(cs[2].endpoint, "c:2");
  // Accounting for unknown workers is ignored, not a crash.
  router.Begin("nobody", kSha, 5);
  router.Received("nobody", 5);
  router.End("nobody", 0);
  router.OnHeartbeat("nobody", Beat({kSha}));
  EXPECT_EQ(router.Snapshot().size(), 3u);
}

}  // namespace
}  // namespace gantry::scheduler
