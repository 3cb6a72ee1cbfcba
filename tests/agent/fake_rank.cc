// fake_rank: a stand-in for `gantry-worker rank` in the agent tests. It parses the rank command
// line, records its argv and the credential it got in its work dir, writes control frames and
// then exits, crashes or hangs as the assignment's spec labels say:
//   fake.frames=N        progress frames after RANK_RUNNING (default 3)
//   fake.exit=N          exit code (default 0)
//   fake.mode=exit|crash|sleep|ignore-term|ignore-usr1|error-log
//   fake.log_lines=N     lines printed to stderr before exiting (default 0)
//   fake.frame_delay_ms=N pause before each progress and log frame (default 0)
//   fake.log_frames=N    LogLine frames "log frame I" after the progress frames (default 0)
//   fake.metrics=N       RankMetrics frames after the progress frames (default 0)
//   fake.bad_metrics=1   one more RankMetrics frame with a negative step time
// In the sleeping modes, SIGUSR1 (checkpoint-and-stop) makes it write usr1.txt in its work dir,
// send an INFO log "checkpointed on SIGUSR1" and exit with 200 (kExitPreempted).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "gantry/v1/worker.pb.h"
#include "workers/agent/control_pipe.h"

namespace {

std::string Label(const gantry::v1::Assignment& a, const std::string& key,
                  const std::string& fallback) {
  auto it = a.spec().labels().find(key);
  return it == a.spec().labels().end() ? fallback : it->second;
}

void Send(int fd, const gantry::v1::WorkerMessage& m) {
  if (!gantry::agent::WriteControlMessage(fd, m).ok()) _exit(90);
}

std::atomic<bool> g_usr1{false};
void OnUsr1(int) { g_usr1.store(true); }

}  // namespace

int main(int argc, char** argv) {
  // Whether any fd other than 0..3 leaked into the rank (counted before this program opens any).
  int leaked = 0;
  for (int f = 4; f < 1024; ++f) leaked += fcntl(f, F_GETFD) != -1 ? 1 : 0;
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
    }
  }
  if (argc < 2 || std::string(argv[1]) != "rank") return 80;
  gantry::v1::Assignment a;
  {
    std::ifstream in(flags["assignment"], std::ios::binary);
    if (!in || !a.ParseFromIstream(&in)) return 81;
  }
  if (Label(a, "fake.mode", "exit") == "ignore-usr1") {
    signal(SIGUSR1, SIG_IGN);  // a rank that cannot checkpoint: only SIGTERM ends it
  } else {
    signal(SIGUSR1, OnUsr1);
  }
  const int fd = std::atoi(flags["control-fd"].c_str());
  const std::string work_dir = flags["work-dir"];
  {
    std::ofstream args(work_dir + "/args.txt");
    for (int i = 0; i < argc; ++i) args << argv[i] << "\n";
    const char* env_token = std::getenv("GANTRY_JOIN_TOKEN");
    std::ofstream(work_dir + "/pid.txt") << getpid();
    std::ofstream(work_dir + "/env_token.txt") << (env_token == nullptr ? "<unset>" : env_token);
    std::ifstream credential(flags["credential-file"]);
    std::stringstream secret;
    secret << credential.rdbuf();
    std::ofstream(work_dir + "/token.txt") << (credential ? secret.str() : "<no file>");
    struct stat st {};
    const bool stated = stat(flags["credential-file"].c_str(), &st) == 0;
    std::ofstream(work_dir + "/credential_mode.txt")
        << (stated ? std::to_string(st.st_mode & 0777) : "-") << " "
        << (stat(work_dir.c_str(), &st) == 0 ? std::to_string(st.st_mode & 0777) : "-");
    std::ofstream(work_dir + "/leaked_fds.txt") << leaked;
  }
  std::cout << "fake rank " << a.rank() << " of " << a.job_id() << " starting" << std::endl;

  const std::string mode = Label(a, "fake.mode", "exit");
  if (mode == "ignore-term") {
    signal(SIGTERM, SIG_IGN);
    if (fork() == 0) {  // a grandchild in the same process group, also deaf to SIGTERM
      std::ofstream(work_dir + "/grandchild.pid") << getpid();
      while (true) pause();
    }
  }

  gantry::v1::WorkerMessage running;
  running.mutable_rank_status()->set_rank(a.rank());
  running.mutable_rank_status()->set_phase(gantry::v1::RANK_PHASE_RUNNING);
  Send(fd, running);
  const int frames = std::atoi(Label(a, "fake.frames", "3").c_str());
  const int delay_ms = std::atoi(Label(a, "fake.frame_delay_ms", "0").c_str());
  for (int i = 1; i <= frames; ++i) {
    if (delay_ms > 0) usleep(delay_ms * 1000);
    gantry::v1::WorkerMessage p;
    p.mutable_progress()->set_step(i);
    p.mutable_progress()->set_epochs(a.rank());
    Send(fd, p);
  }
  // RankMetrics frames (the daemon keeps them for /metrics): each 2 steps of 0.1 s and 0.2 s, 16
  // samples, one cache hit; fake.bad_metrics=1 adds one with a negative step time.
  const int metric_frames = std::atoi(Label(a, "fake.metrics", "0").c_str());
  for (int i = 1; i <= metric_frames; ++i) {
    gantry::v1::WorkerMessage m;
    gantry::v1::RankMetrics* r = m.mutable_rank_metrics();
    r->set_steps(2);
    r->set_step_seconds(0.3);
    r->add_step_seconds_each(0.1);
    r->add_step_seconds_each(0.2);
    r->set_samples(16);
    r->set_samples_per_second(80);
    r->set_data_stall_fraction(0.25);
    r->set_cache_hits(1);
    Send(fd, m);
  }
  if (Label(a, "fake.bad_metrics", "0") == "1") {
    gantry::v1::WorkerMessage m;
    m.mutable_rank_metrics()->set_steps(1000);
    m.mutable_rank_metrics()->add_step_seconds_each(-1);
    Send(fd, m);
  }
  const int log_frames = std::atoi(Label(a, "fake.log_frames", "0").c_str());
  for (int i = 1; i <= log_frames; ++i) {
    if (delay_ms > 0) usleep(delay_ms * 1000);
    gantry::v1::WorkerMessage log;
    log.mutable_log()->set_rank(a.rank());
    log.mutable_log()->set_level("INFO");
    log.mutable_log()->set_text("log frame " + std::to_string(i));
    Send(fd, log);
  }
  if (mode == "error-log") {
    gantry::v1::WorkerMessage log;
    log.mutable_log()->set_rank(a.rank());
    log.mutable_log()->set_level("ERROR");
    log.mutable_log()->set_text("dataset toymc: out of memory in rank " + std::to_string(a.rank()));
    Send(fd, log);
  }
  gantry::v1::WorkerMessage result;
  result.mutable_result()->set_success(true);
  result.mutable_result()->set_message("fake result of rank " + std::to_string(a.rank()));
  Send(fd, result);

  const int log_lines = std::atoi(Label(a, "fake.log_lines", "0").c_str());
  for (int i = 1; i <= log_lines; ++i) std::cerr << "stderr line " << i << "\n";
  std::cerr << std::flush;

  if (mode == "crash") {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
  if (mode == "ignore-usr1") {
    while (true) pause();
  }
  if (mode == "sleep" || mode == "ignore-term") {
    while (!g_usr1.load()) usleep(5000);
    std::ofstream(work_dir + "/usr1.txt") << "SIGUSR1";
    gantry::v1::WorkerMessage log;
    log.mutable_log()->set_rank(a.rank());
    log.mutable_log()->set_level("INFO");
    log.mutable_log()->set_text("checkpointed on SIGUSR1");
    Send(fd, log);
    return 200;
  }
  return std::atoi(Label(a, "fake.exit", "0").c_str());
}
