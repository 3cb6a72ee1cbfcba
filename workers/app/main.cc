// gantry-worker: the worker binary. Today it has the local subcommands (no service needed):
//   gantry-worker local-train    --preset=tiny --data=toymc:events=2000 --epochs=5 --out=m.ckpt
//   gantry-worker local-generate --checkpoint=m.ckpt --energies=50,100 --out=showers.h5
//   gantry-worker toymc          --spec=toymc:layout=25,events=1000 --out=toy.h5
// and the service modes: `daemon` (the worker daemon, workers/agent) and `rank` (one rank of a
// training job, started by the daemon).
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "workers/agent/daemon_main.h"
#include "workers/app/local_commands.h"
#include "workers/app/rank_command.h"
#include "workers/serving/checkpoint_model_loader.h"
#include "workers/serving/serving_extension.h"

namespace {

constexpr char kUsage[] =
    "usage: gantry-worker <command> [--flag=value ...]\n"
    "commands:\n"
    "  local-train     --preset=3dgan-25|3dgan-51|tiny --data=toymc:...|file.h5 --out=ckpt\n"
    "                  [--epochs=1 --batch=0 --lr=0 --label-flip=-1 --steps-per-epoch=0\n"
    "                   --seed=1 --threads=2 --resume=ckpt]\n"
    "  local-generate  --checkpoint=ckpt --out=file.h5 (--energies=50,100 |\n"
    "                  --energy-range=10:500 --count=N) [--theta-range=60:120 (degrees)\n"
    "                   --seed=1 --batch=128 --threads=2]\n"
    "  toymc           --spec=toymc:layout=25,events=1000,seed=1 --out=file.h5\n"
    "  rank            --assignment=file --control-fd=N --server=host:port --cache-dir=dir\n"
    "                  --work-dir=dir [--bind-host=addr] (env GANTRY_JOIN_TOKEN; started by the\n"
    "                  daemon: one rank of a training job; exit 0 ok, 2 bad assignment, 143\n"
    "                  cancelled, 1 failed)\n"
    "  daemon          --server=host:port (--join-token=T | --join-token-file=F) [--name --slots\n"
    "                  --device --threads --labels --cache-dir --cache-max-bytes --advertise-host\n"
    "                  --rendezvous-ports --work-dir --serve-port --max-batch-size\n"
    "                  --max-queue-delay-ms --max-queued-requests --model-cache-bytes\n"
    "                  --serve-threads] (the worker daemon; `daemon --help`)\n";

// --key=value or --key value flags into a map; INVALID_ARGUMENT for anything else.
absl::Status ParseFlags(int argc, char** argv, std::map<std::string, std::string>* flags) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return absl::InvalidArgumentError("unexpected argument " + arg);
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      (*flags)[arg.substr(0, eq)] = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      (*flags)[arg] = argv[++i];
    } else {
      return absl::InvalidArgumentError("flag --" + arg + " needs a value");
    }
  }
  return absl::OkStatus();
}

// Takes flags out of the map one by one, so leftovers can be reported as unknown.
class Flags {
 public:
  explicit Flags(std::map<std::string, std::string> flags) : flags_(std::move(flags)) {}
  void Str(const std::string& key, std::string* out) {
    auto it = flags_.find(key);
    if (it == flags_.end()) return;
    *out = it->second;
    flags_.erase(it);
  }
  template <typename T>
  void Num(const std::string& key, T* out) {
    std::string s;
    Str(key, &s);
    if (s.empty()) return;
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      double d;
      ok = absl::SimpleAtod(s, &d);
      *out = static_cast<T>(d);
    } else {
      ok = absl::SimpleAtoi(s, out);
    }
    if (!ok && status_.ok()) status_ = absl::InvalidArgumentError("bad number for --" + key);
  }
  void Range(const std::string& key, double* lo, double* hi) {
    std::string s;
    Str(key, &s);
    if (s.empty()) return;
    std::vector<std::string> parts = absl::StrSplit(s, ':');
    if (parts.size() == 1) parts.push_back(parts[0]);
    if (parts.size() != 2 || !absl::SimpleAtod(parts[0], lo) || !absl::SimpleAtod(parts[1], hi)) {
      if (status_.ok()) status_ = absl::InvalidArgumentError("--" + key + " wants min:max");
    }
  }
  void FloatList(const std::string& key, std::vector<float>* out) {
    std::string s;
    Str(key, &s);
    for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipEmpty())) {
      float v;
      if (!absl::SimpleAtof(part, &v)) {
        if (status_.ok()) status_ = absl::InvalidArgumentError("bad number in --" + key);
        return;
      }
      out->push_back(v);
    }
  }
  absl::Status Finish() {
    if (!status_.ok()) return status_;
    if (!flags_.empty())
      return absl::InvalidArgumentError("unknown flag --" + flags_.begin()->first);
    return absl::OkStatus();
  }

 private:
  std::map<std::string, std::string> flags_;
  absl::Status status_;
};

absl::Status Run(const std::string& command, Flags& f) {
  if (command == "local-train") {
    gantry::app::LocalTrainOptions o;
    f.Str("preset", &o.preset);
    f.Str("data", &o.data);
    f.Str("out", &o.out);
    f.Str("resume", &o.resume);
    f.Num("epochs", &o.epochs);
    f.Num("batch", &o.batch);
    f.Num("lr", &o.learning_rate);
    f.Num("label-flip", &o.label_flip);
    f.Num("steps-per-epoch", &o.steps_per_epoch);
    f.Num("seed", &o.seed);
    f.Num("threads", &o.threads);
    if (absl::Status s = f.Finish(); !s.ok()) return s;
    return gantry::app::RunLocalTrain(o, std::cout);
  }
  if (command == "local-generate") {
    gantry::app::LocalGenerateOptions o;
    f.Str("checkpoint", &o.checkpoint);
    f.Str("out", &o.out);
    f.FloatList("energies", &o.energies);
    f.Range("energy-range", &o.energy_min, &o.energy_max);
    f.Num("count", &o.count);
    f.Range("theta-range", &o.theta_min_deg, &o.theta_max_deg);
    f.Num("seed", &o.seed);
    f.Num("batch", &o.batch);
    f.Num("threads", &o.threads);
    if (absl::Status s = f.Finish(); !s.ok()) return s;
    return gantry::app::RunLocalGenerate(o, std::cout);
  }
  if (command == "toymc") {
    gantry::app::ToyMcOptions o;
    f.Str("spec", &o.spec);
    f.Str("out", &o.out);
    if (absl::Status s = f.Finish(); !s.ok()) return s;
    return gantry::app::RunToyMc(o, std::cout);
  }
  return absl::InvalidArgumentError("unknown command \"" + command + "\"");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "help") {
    std::cerr << kUsage;
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "daemon") {  // its own flags and exit codes (daemon_main.h)
    // The daemon itself serves generation (ranks never do): workers/serving.
    return gantry::agent::DaemonMain(
        std::vector<std::string>(argv + 2, argv + argc),
        {gantry::serving::ServingExtensionFactory(gantry::serving::MakeDaemonModelLoader)});
  }
  std::map<std::string, std::string> raw;
  absl::Status status = ParseFlags(argc, argv, &raw);
  if (status.ok() && std::string(argv[1]) == "rank") {  // exit codes of its own (rank_command.h)
    Flags f(std::move(raw));
    gantry::app::RankCommandOptions o;
    f.Str("assignment", &o.assignment);
    f.Num("control-fd", &o.control_fd);
    f.Str("server", &o.server);
    f.Str("cache-dir", &o.cache_dir);
    f.Num("cache-max-bytes", &o.cache_max_bytes);
    f.Str("work-dir", &o.work_dir);
    f.Str("bind-host", &o.bind_host);
    f.Num("max-steps-per-epoch", &o.max_steps_per_epoch);  // test hook
    if (absl::Status s = f.Finish(); !s.ok()) {
      std::cerr << "gantry-worker rank: " << s << "\n";
      return 2;
    }
    return gantry::app::RunRankCommand(o);
  }
  if (status.ok()) {
    Flags flags(std::move(raw));
    status = Run(argv[1], flags);
  }
  if (!status.ok()) {
    std::cerr << "gantry-worker " << argv[1] << ": " << status << "\n";
    if (status.code() == absl::StatusCode::kInvalidArgument) std::cerr << kUsage;
    return 1;
  }
  return 0;
}
