// Multi-host training and serving without containers: three test hosts made of network namespaces
// on a bridge the test creates (NetnsHosts), one gantry-worker daemon in each with
// --advertise-host set to its host's address, and gantry-server in the root namespace listening
// only on the bridge address (its PostgreSQL is GANTRY_TEST_DSN's, on a unix socket). Everything
// between the processes therefore crosses the bridge: the daemons' control streams, the dataset
// download, the c10d rendezvous (TCPStore) and Gloo between ranks on two hosts, and the generation
// router's calls to a worker's serve port. The test checks that it did (ListWorkers, the ranks'
// rendezvous lines in the job's log, ss inside every namespace and in the root namespace, no
// loopback peer on any host), then black-holes the link of a host running a rank of a second job
// and checks that the job restarts on the other two hosts and succeeds within a bounded time, and
// that the cut daemon rejoins without its stale rank once the link is back.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/e2e/netns_hosts.h"
#include "tests/e2e/worker_pool_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

namespace gantry::testing {
namespace {

// The addresses and ports this test owns (see tests/e2e/CMakeLists.txt).
constexpr char kSubnetPrefix[] = "10.213.0.";
constexpr int kServerPort = 42010;
constexpr int kServePort = 42100;  // each daemon's generation port, inside its namespace
constexpr int kRendezvousMin = 42200, kRendezvousMax = 42220;

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }
int PortOf(const std::string& address) {
  return std::atoi(address.substr(address.rfind(':') + 1).c_str());
}
bool Loopback(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "[::1]");
}

class NetnsE2eTest : public WorkerPoolFixture {
 protected:
  void SetUp() override {
    auto hosts = NetnsHosts::Create(kSubnetPrefix, 3, dir_.path());
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = *std::move(hosts);
    server_listen_ = absl::StrCat(hosts_->bridge_address(), ":", kServerPort);
    WorkerPoolFixture::SetUp();
  }

  void TearDown() override {
    workers_.clear();  // the daemons (their ranks die with them)
    hosts_.reset();    // whatever still runs in the namespaces, then the namespaces and links
    WorkerPoolFixture::TearDown();
  }

  // gantry-worker daemon "hI" inside host i (0-based), advertising the host's address.
  void StartHostWorker(int i) {
    const std::string name = absl::StrCat("h", i + 1);
    std::vector<std::string> argv = hosts_->InHost(
        i, {GANTRY_WORKER_BINARY, "daemon", "--server=" + server_->address(),
            "--join-token-file=" + join_token_file_, "--name=" + name, "--slots=1", "--threads=1",
            "--cache-dir=" + dir_.path() + "/" + name, "--file-roots=/nonexistent",
            "--advertise-host=" + hosts_->host(i).address, "--kill-grace-ms=2000",
            "--preemption-grace-ms=60000", absl::StrCat("--serve-port=", kServePort),
            "--serve-plaintext",
            absl::StrCat("--rendezvous-ports=", kRendezvousMin, "-", kRendezvousMax)});
    auto worker = std::make_unique<ChildProcess>(argv, dir_.path() + "/" + name + ".log");
    ASSERT_GT(worker->pid(), 0);
    workers_[name] = std::move(worker);
  }

  int HostIndexOf(const std::string& address) const {
    for (int i = 0; i < hosts_->size(); ++i) {
      if (hosts_->host(i).address == HostOf(address)) return i;
    }
    return -1;
  }

  // Samples the established TCP connections in every host and in the root namespace.
  void Sample() {
    for (int i = -1; i < hosts_->size(); ++i) {
      auto connections = hosts_->Established(i);
      ASSERT_TRUE(connections.ok()) << connections.status();
      for (const NetnsHosts::Connection& c : *connections) {
        seen_[i].insert(c.local + " -> " + c.peer);
        // The root namespace is the whole machine's; only the hosts must not use loopback.
        if (i >= 0 && Loopback(c.peer))
          loopback_.insert(absl::StrCat("host ", i, ": ", c.local, " -> ", c.peer));
      }
    }
  }

  // WaitForState, sampling connections every 200 ms meanwhile.
  v1::Job WaitSampling(const std::string& id, v1::JobState state, int timeout_s) {
    const auto until = steady_clock::now() + seconds(timeout_s);
    v1::Job job = Get(id);
    while (job.state() != state && job.state() != v1::JOB_STATE_FAILED &&
           job.state() != v1::JOB_STATE_SUCCEEDED && job.state() != v1::JOB_STATE_CANCELLED &&
           steady_clock::now() < until) {
      Sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      job = Get(id);
    }
    return job;
  }

  // rank -> host index of the job's attempt, from the workers' heartbeats (ListWorkers), once all
  // `world_size` ranks are reported (empty after 15 s).
  std::map<int, int> RankHosts(const std::string& job_id, int attempt, int world_size) {
    const auto until = steady_clock::now() + seconds(15);
    std::map<int, int> hosts;
    while (steady_clock::now() < until) {
      hosts.clear();
      v1::ListWorkersResponse listed;
      if (admin_->ListWorkers(Ctx(admin_token_).get(), {}, &listed).ok()) {
        for (const v1::WorkerInfo& w : listed.workers()) {
          for (const v1::WorkerRank& r : w.running_ranks()) {
            if (r.job_id() == job_id && r.attempt() == attempt) {
              hosts[r.rank()] = std::atoi(w.name().substr(1).c_str()) - 1;
            }
          }
        }
      }
      if (static_cast<int>(hosts.size()) == world_size) return hosts;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return {};
  }

  // Connections host i had with another host (from either side), as sampled.
  std::vector<std::string> CrossHost(int i) const {
    std::vector<std::string> out;
    auto it = seen_.find(i);
    if (it == seen_.end()) return out;
    for (const std::string& line : it->second) {
      const std::string peer = line.substr(line.find(" -> ") + 4);
      const int j = HostIndexOf(peer);
      if (j >= 0 && j != i) out.push_back(line);
    }
    return out;
  }

  std::string Seen() const {
    std::string all;
    for (const auto& [i, lines] : seen_) {
      all += absl::StrCat(i < 0 ? std::string("root") : hosts_->host(i).netns, ":\n  ",
                          absl::StrJoin(lines, "\n  "), "\n");
    }
    return all;
  }

  // The job's log lines (every rank, every attempt).
  std::vector<std::string> LogLines(const std::string& id) {
    std::vector<std::string> lines;
    for (const v1::JobEvent& e : Events(id)) {
      if (e.has_log()) lines.push_back(absl::StrCat("rank ", e.log().rank(), ": ", e.log().text()));
    }
    return lines;
  }

  // The tenant uploads a toy Monte Carlo file; returns the dataset id.
  std::string UploadDataset() {
    const std::string h5 = dir_.path() + "/Ele_netns.h5";
    const std::string toymc = std::string(GANTRY_TOYMC_BINARY) +
                              " toymc:layout=25,events=80,seed=5,emin=20,emax=200 " + h5 +
                              " >/dev/null";
    EXPECT_EQ(std::system(toymc.c_str()), 0) << toymc;
    return UploadDatasetFile(token_, "netns-data", h5);
  }

  std::unique_ptr<NetnsHosts> hosts_;
  std::map<int, std::set<std::string>> seen_;  // host index (-1: root) -> "local -> peer"
  std::set<std::string> loopback_;
};

TEST_F(NetnsE2eTest, TrainsAndServesAcrossHostsAndSurvivesABlackHoledHost) {
  const auto start = steady_clock::now();
  // The server listens only on the bridge: nothing reaches it over loopback.
  ASSERT_EQ(HostOf(server_->address()), hosts_->bridge_address());
  for (int i = 0; i < 3; ++i) StartHostWorker(i);
  WaitForFreeWorkers(3);
  {
    v1::ListWorkersResponse listed;
    ASSERT_TRUE(admin_->ListWorkers(Ctx(admin_token_).get(), {}, &listed).ok());
    ASSERT_EQ(listed.workers_size(), 3);
    for (const v1::WorkerInfo& w : listed.workers()) {
      const int i = std::atoi(w.name().substr(1).c_str()) - 1;
      ASSERT_TRUE(i >= 0 && i < 3) << w.name();
      EXPECT_EQ(w.advertise_host(), hosts_->host(i).address) << w.DebugString();
    }
  }
  const std::string dataset = UploadDataset();
  ASSERT_FALSE(dataset.empty());

  // Job 1: world size 2 on two of the hosts, trained, registered, then generated from.
  v1::JobSpec spec = Spec(2);
  spec.mutable_hyper_parameters()->set_epochs(1);
  spec.set_display_name("netns-1");
  spec.set_model_name("netns-tiny");
  spec.set_dataset(dataset);
  v1::Job job = Submit(spec);
  job = WaitSampling(job.id(), v1::JOB_STATE_SUCCEEDED, 240);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  ASSERT_EQ(job.model_ref(), "netns-tiny:1");
  std::cerr << "job 1 succeeded after "
            << std::chrono::duration<double>(steady_clock::now() - start).count() << " s\n";

  // The ranks met at rank 0's advertised address and bound Gloo to their own host's address, and
  // each downloaded the dataset from the server.
  const std::vector<std::string> lines = LogLines(job.id());
  const std::string all_lines = absl::StrJoin(lines, "\n");
  std::string rendezvous;  // rank 0's "HOST:PORT"
  std::map<int, std::string> bind;
  int downloads = 0;
  for (const std::string& line : lines) {
    const size_t at = line.find("joining the process group at ");
    if (at != std::string::npos) {
      std::istringstream words(line.substr(at + 29));
      std::string address, as, rank_word;
      int rank = -1;
      words >> address >> as >> rank_word >> rank;
      const size_t b = line.find("(bind ");
      ASSERT_NE(b, std::string::npos) << line;
      bind[rank] = line.substr(b + 6, line.find(')', b) - b - 6);
      if (rendezvous.empty()) rendezvous = address;
      EXPECT_EQ(address, rendezvous) << all_lines;
    }
    if (absl::StrContains(line, "materialised") && absl::StrContains(line, "downloaded ")) {
      ++downloads;
    }
  }
  ASSERT_EQ(bind.size(), 2u) << all_lines;
  const int rank0_host = HostIndexOf(bind[0] + ":0"), rank1_host = HostIndexOf(bind[1] + ":0");
  ASSERT_GE(rank0_host, 0) << all_lines;
  ASSERT_GE(rank1_host, 0) << all_lines;
  EXPECT_NE(rank0_host, rank1_host);
  EXPECT_EQ(HostOf(rendezvous), hosts_->host(rank0_host).address) << all_lines;
  EXPECT_GE(PortOf(rendezvous), kRendezvousMin);
  EXPECT_LE(PortOf(rendezvous), kRendezvousMax);
  EXPECT_EQ(downloads, 2) << "each rank downloads the dataset from the server\n" << all_lines;

  // ss saw the c10d traffic between the two hosts: rank 1's host connected to rank 0's
  // rendezvous port, and the Gloo pairs ran between the hosts' addresses.
  bool store_seen = false;
  for (const std::string& c : CrossHost(rank1_host)) {
    store_seen = store_seen || absl::EndsWith(c, " -> " + rendezvous);
  }
  EXPECT_TRUE(store_seen) << "no connection from host " << rank1_host + 1 << " to the TCPStore at "
                          << rendezvous << "\n"
                          << Seen();
  // Gloo's pairs: connections between the two hosts on neither end the rendezvous port.
  int gloo_pairs = 0;
  for (const std::string& c : CrossHost(rank0_host)) {
    const size_t arrow = c.find(" -> ");
    gloo_pairs += PortOf(c.substr(0, arrow)) != PortOf(rendezvous) &&
                  PortOf(c.substr(arrow + 4)) != PortOf(rendezvous);
  }
  EXPECT_GT(gloo_pairs, 0) << "no Gloo connection between the ranks' hosts\n" << Seen();
  // The server's peers are the hosts (control streams, dataset download, checkpoint upload) and
  // this test's own stubs, from the bridge address.
  std::set<int> server_peers;
  for (const std::string& c : seen_[-1]) {
    if (!absl::StartsWith(c, server_->address() + " -> ")) continue;
    const std::string peer = c.substr(c.find(" -> ") + 4);
    if (HostOf(peer) == hosts_->bridge_address()) continue;
    server_peers.insert(HostIndexOf(peer));
  }
  EXPECT_EQ(server_peers, (std::set<int>{0, 1, 2})) << Seen();

  // Generation through the server's router, served by a daemon inside a namespace.
  v1::GenerateRequest generate;
  generate.set_model(job.model_ref());
  for (double e : {50.0, 100.0, 150.0}) generate.mutable_list()->add_items()->set_energy_gev(e);
  generate.set_seed(7);
  std::string served_by;
  {
    auto ctx = Ctx(token_, 120000);
    auto reader = generation_->Generate(ctx.get(), generate);
    v1::GenerateChunk chunk;
    int64_t showers = 0;
    while (reader->Read(&chunk)) showers += chunk.shape(0);
    grpc::Status generated = reader->Finish();
    ASSERT_TRUE(generated.ok()) << Describe(generated) << "\n" << Logs();
    EXPECT_EQ(showers, 3);
    auto worker = ctx->GetServerInitialMetadata().find("gantry-worker");
    ASSERT_NE(worker, ctx->GetServerInitialMetadata().end());
    served_by = std::string(worker->second.data(), worker->second.size());
  }
  const int served_host = std::atoi(served_by.substr(1).c_str()) - 1;
  ASSERT_TRUE(served_host >= 0 && served_host < 3) << served_by;
  Sample();
  const std::string serve_endpoint =
      absl::StrCat(hosts_->host(served_host).address, ":", kServePort);
  bool routed = false;
  for (const std::string& c : seen_[-1])
    routed = routed || absl::EndsWith(c, " -> " + serve_endpoint);
  EXPECT_TRUE(routed) << "the server never connected to " << serve_endpoint << "\n" << Seen();
  EXPECT_TRUE(loopback_.empty()) << "loopback connections: " << absl::StrJoin(loopback_, "; ");
  std::cerr << "job 1 and generation done after "
            << std::chrono::duration<double>(steady_clock::now() - start).count() << " s\n";

  // Job 2: mid-job, the link of rank 0's host becomes a silent black hole.
  WaitForFreeWorkers(3);
  spec.set_display_name("netns-2");
  spec.set_model_name("netns-cut");
  spec.mutable_hyper_parameters()->set_epochs(2);
  v1::Job cut_job = Submit(spec);
  cut_job = WaitSampling(cut_job.id(), v1::JOB_STATE_RUNNING, 120);
  ASSERT_EQ(cut_job.state(), v1::JOB_STATE_RUNNING) << cut_job.DebugString() << Logs();
  cut_job = WaitForCheckpoint(cut_job.id(), 120);
  ASSERT_FALSE(cut_job.latest_checkpoint().sha256().empty()) << cut_job.DebugString() << Logs();
  ASSERT_EQ(cut_job.state(), v1::JOB_STATE_RUNNING) << cut_job.DebugString() << Logs();
  const std::map<int, int> first_hosts = RankHosts(cut_job.id(), cut_job.attempt(), 2);
  ASSERT_EQ(first_hosts.size(), 2u) << Logs();
  const int victim_host = first_hosts.at(0);
  const std::string victim = absl::StrCat("h", victim_host + 1);
  const std::vector<pid_t> stale_ranks = ChildrenOf(workers_[victim]->pid());
  ASSERT_EQ(stale_ranks.size(), 1u) << Logs();
  ASSERT_TRUE(hosts_->Cut(victim_host).ok());
  const auto cut = steady_clock::now();
  auto since_cut = [&cut] {
    return std::chrono::duration<double>(steady_clock::now() - cut).count();
  };
  cut_job = WaitForState(cut_job.id(), v1::JOB_STATE_RESTARTING, 60);
  ASSERT_EQ(cut_job.state(), v1::JOB_STATE_RESTARTING) << cut_job.DebugString() << Logs();
  const double to_restarting = since_cut();
  cut_job = WaitForState(cut_job.id(), v1::JOB_STATE_RUNNING, 60);
  ASSERT_EQ(cut_job.state(), v1::JOB_STATE_RUNNING) << cut_job.DebugString() << Logs();
  const double to_running = since_cut();
  const std::map<int, int> second_hosts = RankHosts(cut_job.id(), cut_job.attempt(), 2);
  ASSERT_EQ(second_hosts.size(), 2u) << Logs();
  for (const auto& [rank, host] : second_hosts) EXPECT_NE(host, victim_host) << "rank " << rank;
  cut_job = WaitForState(cut_job.id(), v1::JOB_STATE_SUCCEEDED, 180);
  ASSERT_EQ(cut_job.state(), v1::JOB_STATE_SUCCEEDED) << cut_job.DebugString() << Logs();
  const double to_succeeded = since_cut();
  std::cerr << "black hole on " << hosts_->host(victim_host).netns << ": RESTARTING after "
            << to_restarting << " s, RUNNING again after " << to_running << " s, SUCCEEDED after "
            << to_succeeded << " s\n";
  // Bounded: the lease (8 s) notices the silent host; nothing waits for Gloo's 2-minute timeout.
  EXPECT_LT(to_restarting, 20.0);
  EXPECT_LT(to_running, 40.0);
  EXPECT_EQ(cut_job.restarts(), 1);
  EXPECT_EQ(cut_job.model_ref(), "netns-cut:1");
  std::vector<v1::Restart> restarts = Restarts(cut_job.id());
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].reason(), "WorkerLost") << restarts[0].DebugString();
  EXPECT_FALSE(restarts[0].resumed_from_sha256().empty()) << "resumed from a checkpoint";

  // The link comes back: the cut daemon rejoins, and its rank of the replaced attempt is gone.
  ASSERT_TRUE(hosts_->Restore(victim_host).ok());
  const auto restored = steady_clock::now();
  WaitForFreeWorkers(3, 60);
  const double rejoined = std::chrono::duration<double>(steady_clock::now() - restored).count();
  std::cerr << "the cut daemon idle again " << rejoined << " s after the link came back\n";
  // The daemon's keepalive pings (10 s + 5 s) dropped the dead connection while the link was down,
  // so it rejoins on a fresh one instead of waiting out TCP's retransmission backoff (40 s and
  // more after a minute of black hole).
  EXPECT_LT(rejoined, 20.0);
  // The daemon stops the replaced attempt's rank once the server answers its hello; a rejoin that
  // shows the worker's credential is quick, so the rank may still be exiting here (10 s bound).
  for (pid_t rank : stale_ranks) {
    EXPECT_TRUE(Eventually([rank] { return kill(rank, 0) != 0; }, 10000))
        << "stale rank " << rank << " alive";
  }
  EXPECT_TRUE(Eventually([&] { return ChildrenOf(workers_[victim]->pid()).empty(); }, 10000));
  std::cerr << "total " << std::chrono::duration<double>(steady_clock::now() - start).count()
            << " s\n";
}

// A run killed before its cleanup (kill -9, a ctest timeout) leaves a bridge, namespaces, veths, an
// nftables table named after its pid and its processes: the next run removes them, and never a
// live run's.
TEST(NetnsHostsTest, LeftoversOfADeadRunAreRemovedAndALiveRunsAreKept) {
  TempDir dir;
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string tag = absl::StrCat("gnt", dead);
  auto run = [&dir](const std::vector<std::string>& argv) {
    return ChildProcess::Run(argv, {}, dir.path(), 30);
  };
  const std::string ip = "/usr/sbin/ip", nft = "/usr/sbin/nft";
  // The dead run's bridge with its address, a host namespace with its veth and an nftables table.
  ASSERT_EQ(run({ip, "link", "add", tag + "br", "type", "bridge"}).exit_code, 0);
  ASSERT_EQ(
      run({ip, "addr", "add", std::string(kSubnetPrefix) + "1/24", "dev", tag + "br"}).exit_code,
      0);
  ASSERT_EQ(run({ip, "netns", "add", tag + "-h1"}).exit_code, 0);
  ASSERT_EQ(run({ip, "link", "add", tag + "h1", "type", "veth", "peer", "name", "eth0", "netns",
                 tag + "-h1"})
                .exit_code,
            0);
  ASSERT_EQ(run({nft, "add table netdev " + tag + "h1"}).exit_code, 0);
  // An orphaned daemon inside its namespace, and its orphaned server listening on the bridge
  // address in the root namespace.
  ChildProcess orphan({ip, "netns", "exec", tag + "-h1", "/bin/sleep", "300"},
                      dir.path() + "/orphan.log");
  ChildProcess server(
      {"/usr/bin/python3", "-c",
       absl::StrCat("import socket, time\ns = socket.socket()\ns.bind(('", kSubnetPrefix, "1', ",
                    kServerPort + 1, "))\ns.listen()\ntime.sleep(300)\n")},
      dir.path() + "/server.log");
  ASSERT_TRUE(Eventually([&] { return !run({ip, "netns", "pids", tag + "-h1"}).out.empty(); }));
  ASSERT_TRUE(Eventually(
      [&] {
        return absl::StrContains(run({"/usr/bin/ss", "-Htln"}).out,
                                 absl::StrCat(kSubnetPrefix, "1:", kServerPort + 1));
      },
      10000))
      << server.Log();

  // The next run sweeps all of it and builds its hosts on the same subnet.
  auto live = NetnsHosts::Create(kSubnetPrefix, 1, dir.path());
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(orphan.Wait(10000), 128 + SIGKILL) << "the orphan in the dead run's namespace";
  EXPECT_EQ(server.Wait(10000), 128 + SIGKILL) << "the dead run's listener on the subnet";
  EXPECT_EQ(run({ip, "link", "show", tag + "br"}).exit_code, 1);
  EXPECT_EQ(run({ip, "link", "show", tag + "h1"}).exit_code, 1);
  EXPECT_EQ(run({nft, "list table netdev " + tag + "h1"}).exit_code, 1);
  EXPECT_EQ(run({ip, "netns", "list"}).out.find(tag + "-h1"), std::string::npos);

  // A live run (this process) is never swept; its destructor removes its hosts.
  NetnsHosts::SweepDeadRuns(dir.path());
  EXPECT_EQ(run({ip, "link", "show", (*live)->bridge()}).exit_code, 0) << "the live run's bridge";
  EXPECT_EQ(run({ip, "link", "show", (*live)->host(0).veth}).exit_code, 0);
  const std::string bridge = (*live)->bridge(), netns = (*live)->host(0).netns;
  live->reset();
  EXPECT_EQ(run({ip, "link", "show", bridge}).exit_code, 1);
  EXPECT_EQ(run({ip, "netns", "list"}).out.find(netns), std::string::npos);
}

}  // namespace
}  // namespace gantry::testing
