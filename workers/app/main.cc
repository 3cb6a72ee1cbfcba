// gantry-worker: the worker binary. Today it has the local subcommands (no service needed):
//   gantry-worker local-train    --preset=tiny --data=toymc:events=2000 --epochs=5 --out=m.ckpt
//   gantry-worker local-generate --checkpoint=m.ckpt --energies=50,100 --out=showers.h5
//   gantry-worker toymc          --spec=toymc:layout=25,events=1000 --out=toy.h5
// and the service modes: `daemon` (the worker daemon, workers/agent) and `rank` (one rank of a
// training job, started by the daemon). The first positional argument picks the subcommand; the
// flags (workers/app/worker_flags.h) are parsed here only and passed down as options structs.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/private_directory.h"
#include "base/status_macros.h"
#include "workers/agent/agent_flags.h"
#include "workers/agent/daemon_main.h"
#include "workers/agent/metrics_extension.h"
#include "workers/app/local_commands.h"
#include "workers/app/rank_command.h"
#include "workers/app/worker_flags.h"
#include "workers/gan/heap_retention.h"
#include "workers/gan/openmp_wait_policy.h"
#include "workers/serving/checkpoint_model_exporter.h"
#include "workers/serving/checkpoint_model_loader.h"
#include "workers/serving/serving_extension.h"

namespace {

constexpr char kUsage[] =
    "usage: gantry-worker <command> [--flag=value ...]\n"
    "commands:\n"
    "  local-train     --preset=3dgan-25|3dgan-51|tiny --data=toymc:...|file.h5 --out=ckpt\n"
    "                  [--epochs=1 --batch=0 --lr=0 --label-flip=-1 --steps-per-epoch=0\n"
    "                   --lr-decay-to=1 --model-set='latent=64;...' --seed=1 --threads=2\n"
    "                   --resume=ckpt]\n"
    "  local-generate  --checkpoint=ckpt --out=file.h5 (--energies=50,100 |\n"
    "                  --energy-range=10:500 --count=N) [--theta-range=60:120 (degrees)\n"
    "                   --seed=1 --batch=128 --threads=2]\n"
    "  export          --checkpoint=ckpt --format=onnx|pytorch|torchscript\n"
    "                  [--profile=gantry|par04|ddml] --out=FILE [--force]\n"
    "                  the generator as ONNX (opset 13) or a PyTorch state dict (catalog.proto)\n"
    "  toymc           --spec=toymc:layout=25,events=1000,seed=1 --out=file.h5\n"
    "  rank            --assignment=file --control-fd=N --server=host:port --cache-dir=dir\n"
    "                  --work-dir=dir [--bind-host=addr] [--device=cpu|cuda:N]\n"
    "                  (--credential-file=F; started by the\n"
    "                  daemon: one rank of a training job; exit codes in base/failure_policy.h:\n"
    "                  0 ok, 2 bad assignment, 143 cancelled, 200 checkpointed on SIGUSR1, ...)\n"
    "  checkpoint-diff A.ckpt B.ckpt\n"
    "                  per-tensor max abs difference of both networks' parameters and buffers\n"
    "                  (exit 0 identical, 1 different, 2 bad input)\n"
    "  daemon          --server=host:port (--join-token=T | --join-token-file=F) [--name --slots\n"
    "                  --device --threads --labels --cache-dir --cache-max-bytes --advertise-host\n"
    "                  --rendezvous-ports --work-dir --serve-port --max-batch-size\n"
    "                  --max-queue-delay-ms --max-queued-requests --model-cache-bytes\n"
    "                  --serve-threads --metrics-listen] (the worker daemon; `daemon --help`)\n";

// --help (or `help`): the daemon's flag reference on stdout, the commands' on stderr.
int PrintHelp(const std::string& command) {
  if (command == "daemon") {
    std::cout << gantry::agent::kAgentUsage;
  } else {
    std::cerr << kUsage;
  }
  return 0;
}

// A command line `command` cannot run with: the daemon and rank exit 2 (their callers tell flag
// errors apart), the local commands 1.
int BadCommandLine(const std::string& command, const absl::Status& status) {
  if (command == "daemon") {
    std::cerr << "gantry-worker daemon: " << status.message() << "\n" << gantry::agent::kAgentUsage;
    return 2;
  }
  std::cerr << "gantry-worker " << command << ": " << status << "\n";
  if (command == "rank") return 2;
  if (status.code() == absl::StatusCode::kInvalidArgument) std::cerr << kUsage;
  return 1;
}

int Daemon() {
  // What the daemon and its ranks write (cache, checkpoints, logs, credentials) is its user's
  // alone.
  gantry::UsePrivateUmask();
  absl::StatusOr<gantry::agent::AgentOptions> options = gantry::app::DaemonOptionsFromFlags();
  if (!options.ok()) return BadCommandLine("daemon", options.status());
  absl::StatusOr<std::string> metrics_listen = gantry::app::DaemonMetricsListenFromFlags();
  if (!metrics_listen.ok()) return BadCommandLine("daemon", metrics_listen.status());
  options->rank_log_args = gantry::LogFlagsAsArguments();
  // The daemon itself serves generation (ranks never do): workers/serving. The /metrics endpoint
  // starts first, so a port clash stops the daemon before it registers.
  return gantry::agent::DaemonMain(
      *std::move(options),
      {gantry::agent::MetricsExtensionFactory(*std::move(metrics_listen)),
       gantry::serving::ServingExtensionFactory(gantry::serving::MakeDaemonModelLoader,
                                                gantry::serving::MakeDaemonModelExporter)});
}

int Rank() {
  absl::StatusOr<gantry::app::RankCommandOptions> options = gantry::app::RankOptionsFromFlags();
  if (!options.ok()) return BadCommandLine("rank", options.status());
  return gantry::app::RunRankCommand(*options);
}

absl::Status RunLocal(const std::string& command) {
  if (command == "local-train") {
    ASSIGN_OR_RETURN(gantry::app::LocalTrainOptions options,
                     gantry::app::LocalTrainOptionsFromFlags());
    return gantry::app::RunLocalTrain(options, std::cout);
  }
  if (command == "local-generate") {
    ASSIGN_OR_RETURN(gantry::app::LocalGenerateOptions options,
                     gantry::app::LocalGenerateOptionsFromFlags());
    return gantry::app::RunLocalGenerate(options, std::cout);
  }
  if (command == "export") {
    ASSIGN_OR_RETURN(gantry::app::ExportOptions options, gantry::app::ExportOptionsFromFlags());
    return gantry::app::RunExport(options, std::cout);
  }
  if (command == "toymc")
    return gantry::app::RunToyMc(gantry::app::ToyMcOptionsFromFlags(), std::cout);
  return absl::InvalidArgumentError("unknown command \"" + command + "\"");
}

}  // namespace

int main(int argc, char** argv) {
  gantry::gan::PreferPassiveOpenMpWait(argv);  // the worker runs LibTorch (may re-execute)
  gantry::gan::RetainFreedHeapMemory();        // large tensors reuse faulted-in pages
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  bool help = false;
  const absl::StatusOr<std::vector<std::string>> positional = gantry::ParseFlags(argc, argv, &help);
  const std::string command =
      positional.ok() && !positional->empty() ? positional->front() : std::string(argv[1]);
  if (help || command == "help") return PrintHelp(command);
  if (command == "checkpoint-diff") {
    // Positional arguments only; exit 2 on bad input (the comparison's own answer is 0 or 1).
    if (!positional.ok() || positional->size() != 3) {
      std::cerr << "usage: gantry-worker checkpoint-diff A.ckpt B.ckpt\n";
      return 2;
    }
    if (absl::Status status = gantry::app::CheckFlagsApplyTo(command); !status.ok()) {
      std::cerr << "gantry-worker checkpoint-diff: " << status.message() << "\n";
      return 2;
    }
    return gantry::app::RunCheckpointDiff((*positional)[1], (*positional)[2], std::cout, std::cerr);
  }
  if (!positional.ok()) return BadCommandLine(command, positional.status());
  if (positional->size() > 1) {
    return BadCommandLine(
        command, absl::InvalidArgumentError("unexpected argument \"" + (*positional)[1] + "\""));
  }
  if (absl::Status status = gantry::app::CheckFlagsApplyTo(command); !status.ok()) {
    return BadCommandLine(command, status);
  }
  // Log lines (levelled, timestamped; --log-format, --log-level) are not command output: the
  // local commands keep printing their progress and results on stdout.
  absl::StatusOr<gantry::LogOptions> log_options = gantry::LogOptionsFromFlags(
      command == "daemon" || command == "rank" ? "gantry-worker-" + command
                                               : std::string("gantry-worker"));
  if (!log_options.ok()) return BadCommandLine(command, log_options.status());
  gantry::InitLogging(*log_options);
  if (command == "daemon") return Daemon();
  if (command == "rank") return Rank();
  if (command == "verify-checkpoint") {
    return gantry::app::RunVerifyCheckpoint(gantry::app::VerifyCheckpointFdFromFlags(), std::cout);
  }
  if (absl::Status status = RunLocal(command); !status.ok()) {
    return BadCommandLine(command, status);
  }
  return 0;
}
