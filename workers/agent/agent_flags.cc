#include "workers/agent/agent_flags.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/field_checks.h"
#include "base/file_roots.h"
#include "base/gpu_ids.h"
#include "base/log.h"
#include "base/loopback.h"
#include "base/private_directory.h"
#include "base/safe_text.h"
#include "base/secret_file.h"
#include "base/status_macros.h"
#include "workers/agent/credential_file.h"

namespace gantry::agent {

const char kAgentUsage[] =
    "usage: gantry-worker daemon --server=HOST:PORT (--join-token=T | --join-token-file=F) "
    "[flags]\n"
    "  --name=NAME                 unique worker name (default: the host name)\n"
    "  --credential-file=FILE      where this worker keeps its credential between runs (mode\n"
    "                              0600; default <cache-dir>/worker-<name>.credential); a\n"
    "                              restarted worker needs it to register under its name again\n"
    "  --slots=N                   ranks hosted at once (default: 1 on cpu, one per GPU on gpu)\n"
    "  --device=cpu|gpu:0,1        device kind (default cpu); gpu: the GPU ids this worker\n"
    "                              offers, one per rank (needs a CUDA build)\n"
    "  --threads=N                 intra-op threads per rank (default 1)\n"
    "  --labels=k=v,k=v            labels jobs can select on (e.g. pool=onprem,zone=a)\n"
    "  --cache-dir=DIR             dataset cache (default ./gantry-cache)\n"
    "  --cache-max-bytes=N[K|M|G|T] cache size limit (default 10G)\n"
    "  --advertise-host=HOST       address other ranks reach this worker at (default 127.0.0.1)\n"
    "  --rendezvous-ports=MIN-MAX  ports for c10d rendezvous when hosting rank 0 (29400-29499)\n"
    "  --work-dir=DIR              per-rank scratch (default <cache-dir>/work)\n"
    "  --file-roots=DIR,DIR        the only directories file:// datasets may be read from\n"
    "                              (default none: jobs with file:// datasets fail here)\n"
    "  --ranks-die-with-daemon=true|false  kill ranks if the daemon itself dies (default true)\n"
    "  --preemption-grace-ms=MS    on SIGTERM (a preemption notice) ranks checkpoint and exit\n"
    "                              within this before they are stopped (default 25000; 0 = stop\n"
    "                              at once); SIGINT always stops at once\n"
    "  --collective-timeout-ms=MS  Gloo collective and rendezvous timeout of ranks whose job\n"
    "                              does not set one (default 120000)\n"
    "  --idle-exit-after=DURATION  exit (code 0) after this long without a running rank, e.g.\n"
    "                              300s or 5m (pilot jobs; default: never)\n"
    "TLS (the daemon, its ranks and its generation endpoint):\n"
    "  --ca-cert=FILE              PEM CA bundle that signed gantry-server's certificate; TLS to\n"
    "                              the server is on when given\n"
    "  --tls-cert=FILE --tls-key=FILE  this worker's certificate and key: the client certificate\n"
    "                              when the server requires mutual TLS (--tls-client-ca), and the\n"
    "                              certificate of the generation endpoint, which then serves TLS\n"
    "                              (its SAN must name --advertise-host); needs --ca-cert\n"
    "generation serving (the daemon runs WorkerGenerationService for gantry-server's router):\n"
    "  --serve-port=N              port on --advertise-host (default 0 = ephemeral; -1 = off);\n"
    "                              off this host it needs --tls-cert or --serve-plaintext\n"
    "  --serve-plaintext           serve without TLS on a non-loopback --advertise-host (a\n"
    "                              private network only: the router's secret travels in clear)\n"
    "  --max-batch-size=N          showers per generator batch (default 128)\n"
    "  --max-queue-delay-ms=MS     longest wait for a batch to fill (default 2; fractions ok)\n"
    "  --max-queued-requests=N     requests queued per model before RESOURCE_EXHAUSTED (1024)\n"
    "  --model-cache-bytes=N[K|M|G|T] memory for loaded generators, LRU unloaded (default 1G)\n"
    "  --serve-threads=N           intra-op threads for generation (default 0 = all cores)\n"
    "metrics:\n"
    "  --metrics-listen=HOST:PORT  serve Prometheus metrics on http://HOST:PORT/metrics (ranks,\n"
    "                              dataset cache, generation; default empty: off)\n"
    "logs on stderr (the daemon passes both to its ranks):\n"
    "  --log-format=text|json      timestamped text lines or JSON lines (default text)\n"
    "  --log-level=LEVEL           debug, info, warning or error (default info)\n";

namespace {

absl::Status Bad(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

absl::Status ParseBytes(const std::string& flag, std::string value, int64_t* out) {
  int64_t scale = 1;
  if (!value.empty()) {
    switch (absl::ascii_toupper(value.back())) {
      case 'K':
        scale = int64_t{1} << 10;
        break;
      case 'M':
        scale = int64_t{1} << 20;
        break;
      case 'G':
        scale = int64_t{1} << 30;
        break;
      case 'T':
        scale = int64_t{1} << 40;
        break;
      default:
        break;
    }
    if (scale != 1) value.pop_back();
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v <= 0 || v > std::numeric_limits<int64_t>::max() / scale) {
    return Bad(flag, "wants a positive byte count, optionally with K, M, G or T");
  }
  *out = v * scale;
  return absl::OkStatus();
}

bool NameChars(absl::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

absl::Status CheckInt(const std::string& flag, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return Bad(flag, absl::StrCat("\"", value, "\" is not an integer in ", lo, "..", hi));
  }
  return absl::OkStatus();
}

// This build's answer to "can a rank run on a GPU here".
constexpr bool kCudaBuild =
#ifdef GANTRY_WITH_CUDA
    true;
#else
    false;
#endif

absl::Status ParseDevice(const std::string& value, bool cuda_build, AgentOptions* o) {
  o->device_ids.clear();
  if (value == "cpu") {
    o->device = gantry::v1::DEVICE_KIND_CPU;
    return absl::OkStatus();
  }
  if (value != "gpu" && value.rfind("gpu:", 0) != 0) {
    return Bad("device", absl::StrCat("\"", value, "\" is neither cpu nor gpu:ID[,ID...]"));
  }
  if (!cuda_build) {
    return Bad("device",
               "gpu needs a gantry-worker built with GANTRY_WITH_CUDA=ON against a CUDA LibTorch; "
               "this build is CPU-only (use --device=cpu)");
  }
  if (value == "gpu") return Bad("device", "name the GPU ids, e.g. gpu:0,1");
  o->device = gantry::v1::DEVICE_KIND_GPU;
  std::set<int> seen;
  for (absl::string_view id : absl::StrSplit(value.substr(4), ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(id, &v) || v < 0 || v > kMaxGpuId) {
      return Bad("device", absl::StrCat("\"", id, "\" is not a GPU id (0..", kMaxGpuId, ")"));
    }
    if (!seen.insert(v).second) {
      return Bad("device", absl::StrCat("GPU ", v, " is listed twice; list each GPU once"));
    }
    o->device_ids.push_back(v);
  }
  return absl::OkStatus();
}

// --slots after --device: 0 = one rank per device (1 on a CPU worker, one per GPU). A GPU rank
// holds one GPU for its lifetime, so a GPU worker hosts at most as many ranks as it lists GPUs.
absl::Status ParseSlots(int slots, AgentOptions* o) {
  RETURN_IF_ERROR(CheckInt("slots", slots, 0, 1024));
  if (o->device != gantry::v1::DEVICE_KIND_GPU) {
    o->slots = slots == 0 ? 1 : slots;
    return absl::OkStatus();
  }
  const int gpus = static_cast<int>(o->device_ids.size());
  if (slots > gpus) {
    return Bad("slots",
               absl::StrCat("is ", slots, " but --device lists ", gpus,
                            " GPU(s); each rank runs on a GPU of its own, so give at most ", gpus,
                            " slots (or leave --slots out: one per GPU)"));
  }
  o->slots = slots == 0 ? gpus : slots;
  return absl::OkStatus();
}

absl::Status ParseLabels(const std::string& value, AgentOptions* o) {
  o->labels.clear();
  for (absl::string_view pair : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    // The server's rules: keys 1-63 of [A-Za-z0-9._/-], values up to 256 characters.
    const bool key_ok =
        kv.size() == 2 && !kv[0].empty() && kv[0].size() <= 63 &&
        std::all_of(kv[0].begin(), kv[0].end(), [](char c) {
          return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '/' || c == '-';
        });
    if (!key_ok || kv[1].size() > 256) {
      return Bad("labels", absl::StrCat("\"", pair,
                                        "\" is not key=value (key 1-63 of [A-Za-z0-9._/-], value "
                                        "up to 256 characters)"));
    }
    if (!o->labels.emplace(kv[0], kv[1]).second) {
      return Bad("labels", absl::StrCat("key \"", kv[0], "\" appears twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParsePorts(const std::string& value, AgentOptions* o) {
  std::vector<std::string> parts = absl::StrSplit(value, '-');
  int lo = 0, hi = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) || !absl::SimpleAtoi(parts[1], &hi) ||
      lo < 1 || hi > 65535 || lo > hi) {
    return Bad("rendezvous-ports",
               absl::StrCat("\"", value, "\" is not MIN-MAX with 1 <= MIN <= MAX <= 65535"));
  }
  o->rendezvous_port_min = lo;
  o->rendezvous_port_max = hi;
  return absl::OkStatus();
}

absl::Status ParseServer(const std::string& value, AgentOptions* o) {
  if (value.empty()) return Bad("server", "is required (HOST:PORT of gantry-server)");
  const size_t colon = value.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return Bad("server", absl::StrCat("\"", value, "\" is not HOST:PORT"));
  }
  o->server = value;
  return absl::OkStatus();
}

absl::Status ParseIdentity(const AgentFlags& f, AgentOptions* o) {
  RETURN_IF_ERROR(ParseServer(f.server, o));
  if (f.join_token.empty() && f.join_token_file.empty()) {
    return Bad("join-token", "is required (or --join-token-file)");
  }
  if (!f.join_token.empty() && !f.join_token_file.empty()) {
    return Bad("join-token-file", "give either --join-token or --join-token-file, not both");
  }
  o->join_token = f.join_token;
  o->join_token_file = f.join_token_file;
  if (!f.name.empty() && (f.name.size() > 128 || !NameChars(f.name))) {
    return Bad("name", "must be 1-128 characters [A-Za-z0-9._-]");
  }
  o->name = f.name;
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    return Bad("tls-cert", "--tls-cert and --tls-key must be given together");
  }
  if (!f.tls_cert.empty() && f.ca_cert.empty()) {
    return Bad("tls-cert",
               "needs --ca-cert (the CA that signed gantry-server's certificate): a worker with a "
               "certificate talks TLS to the server");
  }
  o->tls_files.ca_cert = f.ca_cert;
  o->tls_files.cert = f.tls_cert;
  o->tls_files.key = f.tls_key;
  return absl::OkStatus();
}

absl::Status ParseResources(const AgentFlags& f, bool cuda_build, AgentOptions* o) {
  RETURN_IF_ERROR(ParseDevice(f.device, cuda_build, o));
  RETURN_IF_ERROR(ParseSlots(f.slots, o));
  RETURN_IF_ERROR(CheckInt("threads", f.threads, 1, 1024));
  o->threads_per_rank = f.threads;
  RETURN_IF_ERROR(ParseLabels(f.labels, o));
  if (f.cache_dir.empty()) return Bad("cache-dir", "is empty");
  o->cache_dir = f.cache_dir;
  RETURN_IF_ERROR(ParseBytes("cache-max-bytes", f.cache_max_bytes, &o->cache_max_bytes));
  return absl::OkStatus();
}

absl::Status ParseRanks(const AgentFlags& f, AgentOptions* o) {
  if (f.advertise_host.empty() || f.advertise_host.size() > 255) {
    return Bad("advertise-host", "must be 1-255 chars");
  }
  o->advertise_host = f.advertise_host;
  RETURN_IF_ERROR(ParsePorts(f.rendezvous_ports, o));
  o->work_dir = f.work_dir;
  o->credential_file = f.credential_file;
  ASSIGN_OR_RETURN(o->file_roots, FileRoots::Parse(f.file_roots, "file-roots"));
  const std::optional<bool> die = checks::ParseBoolWord(f.ranks_die_with_daemon);
  if (!die) return Bad("ranks-die-with-daemon", "wants true or false (or 1 or 0)");
  o->ranks_die_with_daemon = *die;
  o->rank_binary = f.rank_binary;
  RETURN_IF_ERROR(CheckInt("kill-grace-ms", f.kill_grace_ms, 0, 600000));
  o->kill_grace_ms = f.kill_grace_ms;
  RETURN_IF_ERROR(CheckInt("preemption-grace-ms", f.preemption_grace_ms, 0, 3600000));
  o->preemption_grace_ms = f.preemption_grace_ms;
  RETURN_IF_ERROR(CheckInt("collective-timeout-ms", f.collective_timeout_ms, 1000, 86400000));
  o->collective_timeout_ms = f.collective_timeout_ms;
  o->idle_exit_after = absl::ZeroDuration();
  if (!f.idle_exit_after.empty() && f.idle_exit_after != "0") {
    int64_t seconds = 0;
    absl::Duration idle;
    if (absl::SimpleAtoi(f.idle_exit_after, &seconds)) {
      idle = absl::Seconds(seconds);
    } else if (!absl::ParseDuration(f.idle_exit_after, &idle)) {
      return Bad("idle-exit-after", absl::StrCat("\"", f.idle_exit_after,
                                                 "\" is not a duration; use e.g. 300s, 5m or 1h"));
    }
    if (idle < absl::Seconds(1) || idle > absl::Hours(24 * 30)) {
      return Bad("idle-exit-after", "must be between 1s and 720h (or 0 = never)");
    }
    o->idle_exit_after = idle;
  }
  return absl::OkStatus();
}

absl::Status ParseServing(const AgentFlags& f, AgentOptions* o) {
  RETURN_IF_ERROR(CheckInt("serve-port", f.serve_port, -1, 65535));
  // gantry-server's router sends the worker's generation secret with every call: in clear only on
  // this host, unless the operator says the network is private.
  if (f.serve_port >= 0 && f.tls_cert.empty() && !f.serve_plaintext &&
      !IsLoopbackTarget(f.advertise_host)) {
    return Bad("serve-port",
               absl::StrCat("serving generation on ", BoundedField(f.advertise_host),
                            " without TLS would take the router's secret in clear: give "
                            "--tls-cert/--tls-key (the endpoint then serves TLS), "
                            "--serve-plaintext on a private network, or --serve-port=-1"));
  }
  o->serve_port = f.serve_port;
  RETURN_IF_ERROR(CheckInt("max-batch-size", f.max_batch_size, 1, 4096));
  o->max_batch_size = f.max_batch_size;
  if (!(f.max_queue_delay_ms >= 0) || f.max_queue_delay_ms > 10000) {
    return Bad(
        "max-queue-delay-ms",
        absl::StrCat("\"", f.max_queue_delay_ms, "\" is not a number of milliseconds in 0..10000"));
  }
  o->max_queue_delay_ms = f.max_queue_delay_ms;
  RETURN_IF_ERROR(CheckInt("max-queued-requests", f.max_queued_requests, 1, 1000000));
  o->max_queued_requests = f.max_queued_requests;
  RETURN_IF_ERROR(ParseBytes("model-cache-bytes", f.model_cache_bytes, &o->model_cache_bytes));
  RETURN_IF_ERROR(CheckInt("serve-threads", f.serve_threads, 0, 1024));
  o->serve_threads = f.serve_threads;
  return absl::OkStatus();
}

}  // namespace

namespace {

// Creates `dir` private (0700), or tightens it when it is the daemon's and others may use it
// (logged): it holds datasets, checkpoints and the worker's credential.
absl::Status MakeOwnDirectory(const std::string& flag, const std::string& dir) {
  absl::StatusOr<std::string> note = MakePrivateDirectory(dir);
  if (!note.ok()) return Bad(flag, std::string(note.status().message()));
  if (!note->empty()) GANTRY_LOG(WARNING) << "--" << flag << ": " << *note;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AgentOptions> BuildAgentOptions(const AgentFlags& flags) {
  return BuildAgentOptions(flags, kCudaBuild);
}

absl::StatusOr<AgentOptions> BuildAgentOptions(const AgentFlags& flags, bool cuda_build) {
  AgentOptions o;
  RETURN_IF_ERROR(ParseIdentity(flags, &o));
  RETURN_IF_ERROR(ParseResources(flags, cuda_build, &o));
  RETURN_IF_ERROR(ParseRanks(flags, &o));
  RETURN_IF_ERROR(ParseServing(flags, &o));
  return o;
}

absl::Status ResolveAgentOptions(AgentOptions* o) {
  if (o->join_token.empty()) {
    ASSIGN_OR_RETURN(o->join_token, ReadSecretFile(o->join_token_file, "--join-token-file",
                                                   "the worker join token"));
  }
  for (std::string* path : {&o->tls_files.ca_cert, &o->tls_files.cert, &o->tls_files.key}) {
    std::error_code ec;
    if (!path->empty()) *path = std::filesystem::absolute(*path, ec).lexically_normal().string();
  }
  ASSIGN_OR_RETURN(o->tls, LoadTlsConfig(o->tls_files));
  if (o->name.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0' || !NameChars(host)) {
      return Bad("name", "the host name is not usable as a worker name; give --name");
    }
    o->name = host;
  }
  std::error_code ec;
  o->cache_dir = std::filesystem::absolute(o->cache_dir, ec).lexically_normal().string();
  RETURN_IF_ERROR(MakeOwnDirectory("cache-dir", o->cache_dir));
  if (o->work_dir.empty()) o->work_dir = o->cache_dir + "/work";
  o->work_dir = std::filesystem::absolute(o->work_dir, ec).lexically_normal().string();
  RETURN_IF_ERROR(MakeOwnDirectory("work-dir", o->work_dir));
  while (o->cache_dir.size() > 1 && o->cache_dir.back() == '/') o->cache_dir.pop_back();
  while (o->work_dir.size() > 1 && o->work_dir.back() == '/') o->work_dir.pop_back();
  if (o->credential_file.empty()) {
    o->credential_file = absl::StrCat(o->cache_dir, "/worker-", o->name, ".credential");
  }
  o->credential_file =
      std::filesystem::absolute(o->credential_file, ec).lexically_normal().string();
  ASSIGN_OR_RETURN(std::string kept, ReadCredentialFile(o->credential_file));
  if (!kept.empty()) o->credential->Set(std::move(kept));
  // A root that holds (or lies in) the cache or the scratch would let a job read other jobs'
  // data and checkpoints.
  for (const std::string& root : o->file_roots.roots()) {
    const std::string real_root = std::filesystem::weakly_canonical(root, ec).string();
    for (const auto& [flag, dir] :
         {std::pair<const char*, const std::string&>{"cache-dir", o->cache_dir},
          {"work-dir", o->work_dir}}) {
      const std::string real_dir = std::filesystem::weakly_canonical(dir, ec).string();
      if (PathIsUnder(real_dir, real_root) || PathIsUnder(real_root, real_dir)) {
        return Bad("file-roots", absl::StrCat(root, " overlaps --", flag, " ", dir));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gantry::agent
