#include "workers/app/worker_flags.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/http/listen_address.h"
#include "base/status_macros.h"

namespace {
const gantry::agent::AgentFlags kDaemon;  // the daemon flags' defaults
}  // namespace

// Shared by several subcommands.
ABSL_FLAG(std::string, server, "", "daemon, rank: HOST:PORT of gantry-server");
ABSL_FLAG(std::string, cache_dir, "",
          "daemon, rank: dataset cache directory (daemon default ./gantry-cache)");
ABSL_FLAG(std::string, cache_max_bytes, "",
          "daemon, rank: dataset cache size limit, N[K|M|G|T] (daemon default 10G; rank: bytes, "
          "0 = no limit)");
ABSL_FLAG(std::string, file_roots, "",
          "daemon: comma-separated directories file:// datasets may be read from (default none: "
          "file:// is refused); rank: the same, from the daemon");
ABSL_FLAG(std::string, work_dir, "",
          "daemon: per-rank scratch root (default <cache-dir>/work); rank: its scratch directory");
ABSL_FLAG(std::optional<int>, threads, std::nullopt,
          "daemon: intra-op threads per rank (default 1); local-train, local-generate: intra-op "
          "threads (default 2)");
ABSL_FLAG(std::string, out, "",
          "local-train: checkpoint; local-generate, toymc: HDF5 file written");
ABSL_FLAG(uint64_t, seed, 1, "local-train, local-generate: random seed");
ABSL_FLAG(std::optional<int64_t>, batch, std::nullopt,
          "local-train: batch size (default 0 = the preset's); local-generate: showers per batch "
          "(default 128)");

// daemon
ABSL_FLAG(std::string, join_token, "", "daemon: the worker join token");
ABSL_FLAG(std::string, join_token_file, "", "daemon: file holding the worker join token");
ABSL_FLAG(std::string, name, "", "daemon: unique worker name (default: the host name)");
ABSL_FLAG(std::string, ca_cert, "",
          "daemon, rank: PEM CA bundle of gantry-server's certificate (TLS when given)");
ABSL_FLAG(std::string, tls_cert, "",
          "daemon, rank: PEM certificate of this worker (mutual TLS; generation endpoint)");
ABSL_FLAG(std::string, tls_key, "", "daemon, rank: PEM private key of --tls-cert");
ABSL_FLAG(int, slots, kDaemon.slots, "daemon: ranks hosted at once");
ABSL_FLAG(
    std::string, device, kDaemon.device,
    "daemon: cpu | gpu:ID[,ID...] (gpu: CUDA builds); rank: cpu | cuda:N (set by the daemon)");
ABSL_FLAG(std::string, labels, "", "daemon: labels jobs can select on, k=v,k=v");
ABSL_FLAG(std::string, advertise_host, kDaemon.advertise_host,
          "daemon: address other ranks reach this worker at");
ABSL_FLAG(std::string, rendezvous_ports, kDaemon.rendezvous_ports,
          "daemon: ports MIN-MAX for c10d rendezvous when hosting rank 0");
ABSL_FLAG(std::string, ranks_die_with_daemon, kDaemon.ranks_die_with_daemon,
          "daemon: true|false, kill ranks if the daemon itself dies");
ABSL_FLAG(int, serve_port, kDaemon.serve_port,
          "daemon: generation serving port on --advertise-host (0 = ephemeral, -1 = off)");
ABSL_FLAG(bool, serve_plaintext, kDaemon.serve_plaintext,
          "daemon: serve generation without TLS on a non-loopback --advertise-host (private "
          "networks only)");
ABSL_FLAG(int, max_batch_size, kDaemon.max_batch_size, "daemon: showers per generator batch");
ABSL_FLAG(double, max_queue_delay_ms, kDaemon.max_queue_delay_ms,
          "daemon: longest wait for a generation batch to fill");
ABSL_FLAG(int, max_queued_requests, kDaemon.max_queued_requests,
          "daemon: generation requests queued per model before RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, model_cache_bytes, kDaemon.model_cache_bytes,
          "daemon: memory for loaded generators, N[K|M|G|T]");
ABSL_FLAG(int, serve_threads, kDaemon.serve_threads,
          "daemon: intra-op threads for generation (0 = all cores)");
ABSL_FLAG(std::string, metrics_listen, "",
          "daemon: HOST:PORT of the Prometheus /metrics endpoint (default empty: off)");
ABSL_FLAG(std::string, rank_binary, "", "daemon (tests): program run for each rank");
ABSL_FLAG(int, kill_grace_ms, kDaemon.kill_grace_ms,
          "daemon (tests): grace between SIGTERM and SIGKILL of a rank");
ABSL_FLAG(int, preemption_grace_ms, kDaemon.preemption_grace_ms,
          "daemon: on SIGTERM, how long ranks may take to checkpoint and exit (0 = stop at once)");
ABSL_FLAG(std::string, idle_exit_after, kDaemon.idle_exit_after,
          "daemon: exit after this long without a running rank, e.g. 300s (pilot jobs); "
          "empty or 0 = never");
ABSL_FLAG(int, collective_timeout_ms, kDaemon.collective_timeout_ms,
          "daemon: Gloo collective and rendezvous timeout for jobs that do not set one");

// rank
ABSL_FLAG(std::string, assignment, "", "rank: binary gantry.v1.Assignment file");
ABSL_FLAG(std::string, credential_file, "",
          "daemon: file (mode 0600) keeping the worker's credential between runs (default "
          "<cache-dir>/worker-<name>.credential); rank: file (mode 0600) holding the rank's "
          "credential, written by the daemon");
ABSL_FLAG(int, control_fd, -1, "rank: pipe to the daemon");
ABSL_FLAG(std::string, bind_host, "", "rank: this worker's advertise host");
ABSL_FLAG(int64_t, max_steps_per_epoch, 0, "rank (tests): steps per epoch at most");

// local-train
ABSL_FLAG(std::string, preset, "tiny",
          "local-train: 3dgan-25 | 3dgan-51 | tiny | tiny-template | tiny-spots | tiny-smeared");
ABSL_FLAG(std::string, data, "", "local-train: toymc:... spec or HDF5 file");
ABSL_FLAG(std::string, resume, "", "local-train: checkpoint to continue from");
ABSL_FLAG(int64_t, epochs, 1, "local-train: epochs");
ABSL_FLAG(double, lr, 0, "local-train: learning rate (0 = the preset's)");
ABSL_FLAG(double, label_flip, -1, "local-train: label flip probability (< 0 = the preset's)");
ABSL_FLAG(int64_t, steps_per_epoch, 0, "local-train: steps per epoch (0 = the whole data set)");
ABSL_FLAG(double, lr_decay_to, 1.0,
          "local-train: cosine decay of the learning rate to this fraction over the run (1 = "
          "constant)");
ABSL_FLAG(std::string, model_set, "",
          "local-train: model config overrides \"key=value;key=value\" (keys as stored in the "
          "checkpoint's config, e.g. latent=64;loss_weights=2,0.1,1)");

// local-generate
ABSL_FLAG(std::string, checkpoint, "", "local-generate, export: checkpoint");
ABSL_FLAG(std::string, energies, "", "local-generate: energies e1,e2,... in GeV");
ABSL_FLAG(std::string, energy_range, "", "local-generate: min:max GeV, with --count");
ABSL_FLAG(int64_t, count, 0, "local-generate: showers drawn from --energy-range");
ABSL_FLAG(std::string, theta_range, "", "local-generate: min:max degrees (variable-angle models)");

// export
ABSL_FLAG(std::string, format, "", "export: onnx | pytorch | torchscript");
ABSL_FLAG(std::string, profile, "gantry",
          "export: gantry | par04 | ddml (whose input conventions)");
ABSL_FLAG(bool, force, false, "export: replace --out if it exists");

// toymc
ABSL_FLAG(std::string, spec, "toymc:", "toymc: toymc:layout=25,events=1000,seed=1");
// verify-checkpoint (hidden; run sandboxed by the daemon and ranks)
ABSL_FLAG(int, fd, 3, "verify-checkpoint: the descriptor of the checkpoint to read");

namespace gantry::app {
namespace {

// The flags of this file each subcommand takes (Abseil names, with underscores).
const std::map<std::string, std::set<std::string>>& FlagsOf() {
  static const auto* flags = new std::map<std::string, std::set<std::string>>{
      {"daemon",
       {"server",
        "cache_dir",
        "cache_max_bytes",
        "work_dir",
        "file_roots",
        "threads",
        "join_token",
        "join_token_file",
        "credential_file",
        "name",
        "ca_cert",
        "tls_cert",
        "tls_key",
        "slots",
        "device",
        "labels",
        "advertise_host",
        "rendezvous_ports",
        "ranks_die_with_daemon",
        "serve_port",
        "serve_plaintext",
        "max_batch_size",
        "max_queue_delay_ms",
        "max_queued_requests",
        "model_cache_bytes",
        "serve_threads",
        "metrics_listen",
        "rank_binary",
        "kill_grace_ms",
        "preemption_grace_ms",
        "collective_timeout_ms",
        "idle_exit_after"}},
      {"rank",
       {"server", "cache_dir", "cache_max_bytes", "work_dir", "file_roots", "assignment",
        "control_fd", "bind_host", "max_steps_per_epoch", "ca_cert", "tls_cert", "tls_key",
        "credential_file", "device"}},
      {"local-train",
       {"preset", "data", "out", "resume", "epochs", "batch", "lr", "label_flip", "steps_per_epoch",
        "model_set", "lr_decay_to", "seed", "threads"}},
      {"local-generate",
       {"checkpoint", "out", "energies", "energy_range", "count", "theta_range", "seed", "batch",
        "threads"}},
      {"export", {"checkpoint", "format", "profile", "out", "force"}},
      {"toymc", {"spec", "out"}},
      {"checkpoint-diff", {}},
      {"verify-checkpoint", {"fd"}},
  };
  return *flags;
}

// "min:max" (or one value for both) into *lo and *hi.
absl::Status ParseRange(const std::string& flag, const std::string& value, double* lo, double* hi) {
  if (value.empty()) return absl::OkStatus();
  std::vector<std::string> parts = absl::StrSplit(value, ':');
  if (parts.size() == 1) parts.push_back(parts[0]);
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], lo) || !absl::SimpleAtod(parts[1], hi)) {
    return absl::InvalidArgumentError("--" + flag + " wants min:max");
  }
  return absl::OkStatus();
}

absl::Status ParseFloats(const std::string& flag, const std::string& value,
                         std::vector<float>* out) {
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    float v;
    if (!absl::SimpleAtof(part, &v)) return absl::InvalidArgumentError("bad number in --" + flag);
    out->push_back(v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFlagsApplyTo(const std::string& command) {
  const auto allowed = FlagsOf().find(command);
  if (allowed == FlagsOf().end()) return absl::OkStatus();
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename() != __FILE__ || allowed->second.count(std::string(name)) > 0) continue;
    if (flag->CurrentValue() != flag->DefaultValue()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --",
                                                     absl::StrReplaceAll(name, {{"_", "-"}}),
                                                     " (not a flag of ", command, ")"));
    }
  }
  return absl::OkStatus();
}

agent::AgentFlags DaemonFlags() {
  agent::AgentFlags f;
  f.server = absl::GetFlag(FLAGS_server);
  f.join_token = absl::GetFlag(FLAGS_join_token);
  f.join_token_file = absl::GetFlag(FLAGS_join_token_file);
  f.credential_file = absl::GetFlag(FLAGS_credential_file);
  f.name = absl::GetFlag(FLAGS_name);
  f.ca_cert = absl::GetFlag(FLAGS_ca_cert);
  f.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  f.tls_key = absl::GetFlag(FLAGS_tls_key);
  f.slots = absl::GetFlag(FLAGS_slots);
  f.device = absl::GetFlag(FLAGS_device);
  f.threads = absl::GetFlag(FLAGS_threads).value_or(f.threads);
  f.labels = absl::GetFlag(FLAGS_labels);
  if (const std::string dir = absl::GetFlag(FLAGS_cache_dir); !dir.empty()) f.cache_dir = dir;
  if (const std::string bytes = absl::GetFlag(FLAGS_cache_max_bytes); !bytes.empty()) {
    f.cache_max_bytes = bytes;
  }
  f.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  f.rendezvous_ports = absl::GetFlag(FLAGS_rendezvous_ports);
  f.work_dir = absl::GetFlag(FLAGS_work_dir);
  f.file_roots = absl::GetFlag(FLAGS_file_roots);
  f.ranks_die_with_daemon = absl::GetFlag(FLAGS_ranks_die_with_daemon);
  f.serve_port = absl::GetFlag(FLAGS_serve_port);
  f.serve_plaintext = absl::GetFlag(FLAGS_serve_plaintext);
  f.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  f.max_queue_delay_ms = absl::GetFlag(FLAGS_max_queue_delay_ms);
  f.max_queued_requests = absl::GetFlag(FLAGS_max_queued_requests);
  f.model_cache_bytes = absl::GetFlag(FLAGS_model_cache_bytes);
  f.serve_threads = absl::GetFlag(FLAGS_serve_threads);
  f.rank_binary = absl::GetFlag(FLAGS_rank_binary);
  f.kill_grace_ms = absl::GetFlag(FLAGS_kill_grace_ms);
  f.preemption_grace_ms = absl::GetFlag(FLAGS_preemption_grace_ms);
  f.idle_exit_after = absl::GetFlag(FLAGS_idle_exit_after);
  f.collective_timeout_ms = absl::GetFlag(FLAGS_collective_timeout_ms);
  return f;
}

absl::StatusOr<std::string> DaemonMetricsListenFromFlags() {
  std::string listen = absl::GetFlag(FLAGS_metrics_listen);
  if (listen.empty()) return listen;
  absl::StatusOr<::gantry::HostPort> parsed =
      ::gantry::ParseListenAddress(listen, "--metrics-listen");
  if (!parsed.ok()) return parsed.status();
  return listen;
}

absl::StatusOr<agent::AgentOptions> DaemonOptionsFromFlags() {
  ASSIGN_OR_RETURN(agent::AgentOptions options, agent::BuildAgentOptions(DaemonFlags()));
  RETURN_IF_ERROR(agent::ResolveAgentOptions(&options));
  return options;
}

absl::StatusOr<RankCommandOptions> RankOptionsFromFlags() {
  RankCommandOptions o;
  o.assignment = absl::GetFlag(FLAGS_assignment);
  o.control_fd = absl::GetFlag(FLAGS_control_fd);
  o.server = absl::GetFlag(FLAGS_server);
  o.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  if (const std::string bytes = absl::GetFlag(FLAGS_cache_max_bytes);
      !bytes.empty() && !absl::SimpleAtoi(bytes, &o.cache_max_bytes)) {
    return absl::InvalidArgumentError("bad number for --cache-max-bytes");
  }
  o.work_dir = absl::GetFlag(FLAGS_work_dir);
  o.file_roots = absl::GetFlag(FLAGS_file_roots);
  o.bind_host = absl::GetFlag(FLAGS_bind_host);
  o.max_steps_per_epoch = absl::GetFlag(FLAGS_max_steps_per_epoch);
  o.device = absl::GetFlag(FLAGS_device);
  o.tls_files.ca_cert = absl::GetFlag(FLAGS_ca_cert);
  o.tls_files.cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_files.key = absl::GetFlag(FLAGS_tls_key);
  o.credential_file = absl::GetFlag(FLAGS_credential_file);
  return o;
}

absl::StatusOr<LocalTrainOptions> LocalTrainOptionsFromFlags() {
  LocalTrainOptions o;
  o.preset = absl::GetFlag(FLAGS_preset);
  o.data = absl::GetFlag(FLAGS_data);
  o.out = absl::GetFlag(FLAGS_out);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.batch = absl::GetFlag(FLAGS_batch).value_or(o.batch);
  o.learning_rate = absl::GetFlag(FLAGS_lr);
  o.label_flip = absl::GetFlag(FLAGS_label_flip);
  o.steps_per_epoch = absl::GetFlag(FLAGS_steps_per_epoch);
  o.model_set = absl::GetFlag(FLAGS_model_set);
  o.lr_decay_to = absl::GetFlag(FLAGS_lr_decay_to);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.threads = absl::GetFlag(FLAGS_threads).value_or(o.threads);
  return o;
}

absl::StatusOr<ExportOptions> ExportOptionsFromFlags() {
  ExportOptions o;
  o.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  o.format = absl::GetFlag(FLAGS_format);
  o.profile = absl::GetFlag(FLAGS_profile);
  o.out = absl::GetFlag(FLAGS_out);
  o.force = absl::GetFlag(FLAGS_force);
  if (o.checkpoint.empty()) return absl::InvalidArgumentError("export needs --checkpoint=FILE");
  if (o.format != "onnx" && o.format != "pytorch" && o.format != "torchscript") {
    return absl::InvalidArgumentError(
        "export needs --format=onnx, --format=pytorch or --format=torchscript");
  }
  if (o.out.empty()) return absl::InvalidArgumentError("export needs --out=FILE");
  return o;
}

absl::StatusOr<LocalGenerateOptions> LocalGenerateOptionsFromFlags() {
  LocalGenerateOptions o;
  o.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  o.out = absl::GetFlag(FLAGS_out);
  RETURN_IF_ERROR(ParseFloats("energies", absl::GetFlag(FLAGS_energies), &o.energies));
  RETURN_IF_ERROR(
      ParseRange("energy-range", absl::GetFlag(FLAGS_energy_range), &o.energy_min, &o.energy_max));
  o.count = absl::GetFlag(FLAGS_count);
  RETURN_IF_ERROR(ParseRange("theta-range", absl::GetFlag(FLAGS_theta_range), &o.theta_min_deg,
                             &o.theta_max_deg));
  o.seed = absl::GetFlag(FLAGS_seed);
  o.batch = absl::GetFlag(FLAGS_batch).value_or(o.batch);
  o.threads = absl::GetFlag(FLAGS_threads).value_or(o.threads);
  return o;
}

int VerifyCheckpointFdFromFlags() { return absl::GetFlag(FLAGS_fd); }

ToyMcOptions ToyMcOptionsFromFlags() {
  ToyMcOptions o;
  o.spec = absl::GetFlag(FLAGS_spec);
  o.out = absl::GetFlag(FLAGS_out);
  return o;
}

}  // namespace gantry::app
