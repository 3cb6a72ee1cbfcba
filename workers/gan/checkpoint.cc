#include "workers/gan/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/sha256.h"
#include "workers/gan/checkpoint_envelope.h"

namespace gantry::gan {
namespace {

constexpr std::streamoff kMaxHeaderBytes = 256;  // three short lines
// The largest payload read (the server accepts checkpoints of at most 4 GiB by default).
constexpr uint64_t kMaxCheckpointBytes = uint64_t{16} << 30;

// Keras initialisers of the reference: he_uniform for the generator convs, glorot_normal for its
// last conv, glorot_uniform for dense layers and discriminator convs, zero biases. A generator with
// a shower template starts with the template at 0 (the trainer's caller sets it from the data) and
// its last conv `residual_init` times smaller (ModelConfig::template_residual_init), so its first
// showers are about the template's.
void InitKerasStyle(torch::nn::Module& module, bool is_generator, int64_t last_stage,
                    double residual_init, at::Generator& rng) {
  torch::NoGradGuard no_grad;
  const bool has_template = module.named_parameters().contains("shower_template");
  for (auto& item : module.named_parameters()) {
    const std::string& name = item.key();
    at::Tensor p = item.value();
    if (name == "shower_template") {
      p.zero_();
      continue;
    }
    if (name.find(".bn.") != std::string::npos)
      continue;  // BatchNorm: gamma 1, beta 0 (torch default)
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      p.zero_();
      continue;
    }
    const int64_t receptive = p.dim() > 2 ? p[0][0].numel() : 1;
    const double fan_in = static_cast<double>(p.size(1) * receptive);
    const double fan_out = static_cast<double>(p.size(0) * receptive);
    const bool conv = p.dim() == 5;
    const bool last = name.rfind("stage" + std::to_string(last_stage) + ".", 0) == 0;
    if (is_generator && conv && last) {
      p.normal_(0.0, std::sqrt(2.0 / (fan_in + fan_out)), rng);
      if (has_template) p.mul_(residual_init);
    } else if (is_generator && conv) {
      const double limit = std::sqrt(6.0 / fan_in);
      p.uniform_(-limit, limit, rng);
    } else {
      const double limit = std::sqrt(6.0 / (fan_in + fan_out));
      p.uniform_(-limit, limit, rng);
    }
  }
}

// The generator's parameter groups of GeneratorGroupRateScales: the network, then the template's
// and the last conv's when their scales are not 1.
void MakeOptimizers(TrainingState& s) {
  const ModelConfig& c = s.config;
  auto options = [&c](double rate_scale) {
    return std::make_unique<torch::optim::RMSpropOptions>(
        torch::optim::RMSpropOptions(c.learning_rate * rate_scale).alpha(c.rms_rho).eps(c.rms_eps));
  };
  const bool own_template = c.generator_template && c.template_learning_rate_scale != 1.0;
  const bool own_residual = c.generator_template && c.template_residual_learning_rate_scale != 1.0;
  const std::string last_stage =
      absl::StrCat("stage", static_cast<int64_t>(GeneratorStages(c).size()) - 1, ".");
  std::vector<at::Tensor> network, shower_template, residual;
  for (const auto& item : s.generator->named_parameters()) {
    if (own_template && item.key() == "shower_template") {
      shower_template.push_back(item.value());
    } else if (own_residual && absl::StartsWith(item.key(), last_stage)) {
      residual.push_back(item.value());
    } else {
      network.push_back(item.value());
    }
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(network, options(1.0));
  if (own_template) groups.emplace_back(shower_template, options(c.template_learning_rate_scale));
  if (own_residual) {
    groups.emplace_back(residual, options(c.template_residual_learning_rate_scale));
  }
  s.generator_optimizer = std::make_unique<torch::optim::RMSprop>(std::move(groups), *options(1.0));
  s.discriminator_optimizer =
      std::make_unique<torch::optim::RMSprop>(s.discriminator->parameters(), *options(1.0));
}

at::Tensor BytesTensor(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::string TensorBytes(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kByte).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()),
                     static_cast<size_t>(c.numel()));
}

absl::StatusOr<std::string> SerializePayload(const TrainingState& s) {
  try {
    torch::serialize::OutputArchive archive;
    torch::serialize::OutputArchive g, d, go, dopt;
    s.generator->save(g);
    s.discriminator->save(d);
    archive.write("generator", g);
    archive.write("discriminator", d);
    s.generator_optimizer->save(go);
    s.discriminator_optimizer->save(dopt);
    archive.write("generator_optimizer", go);
    archive.write("discriminator_optimizer", dopt);
    archive.write("config", BytesTensor(SerializeModelConfig(s.config)));
    archive.write("counters", at::tensor(std::vector<int64_t>{s.epoch, s.step, s.epoch_cursor,
                                                              static_cast<int64_t>(s.seed)}));
    archive.write("rng_state", s.rng.get_state());
    archive.write("permutation",
                  s.permutation.defined() ? s.permutation : at::empty({0}, at::kLong));
    std::ostringstream out;
    archive.save_to(out);
    return out.str();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("serialising checkpoint: ", e.what_without_backtrace()));
  }
}

}  // namespace

std::vector<double> GeneratorGroupRateScales(const ModelConfig& config) {
  std::vector<double> scales{1.0};
  if (!config.generator_template) return scales;
  if (config.template_learning_rate_scale != 1.0) {
    scales.push_back(config.template_learning_rate_scale);
  }
  if (config.template_residual_learning_rate_scale != 1.0) {
    scales.push_back(config.template_residual_learning_rate_scale);
  }
  return scales;
}

absl::StatusOr<TrainingState> NewTrainingState(const ModelConfig& config, uint64_t seed) {
  if (absl::Status s = ValidateModelConfig(config); !s.ok()) return s;
  try {
    TrainingState s;
    s.config = config;
    s.seed = seed;
    s.rng = at::make_generator<at::CPUGeneratorImpl>(seed);
    s.generator = Generator(config);
    s.discriminator = Discriminator(config);
    InitKerasStyle(*s.generator, /*is_generator=*/true,
                   static_cast<int64_t>(GeneratorStages(config).size()) - 1,
                   config.template_residual_init, s.rng);
    InitKerasStyle(*s.discriminator, /*is_generator=*/false, -1, 1.0, s.rng);
    s.discriminator->set_dropout_generator(s.rng);
    MakeOptimizers(s);
    return s;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("building models: ", e.what_without_backtrace()));
  }
}

absl::Status WriteCheckpoint(const std::string& path, const TrainingState& state) {
  absl::StatusOr<std::string> payload = SerializePayload(state);
  if (!payload.ok()) return payload.status();
  const std::string header =
      absl::StrCat(kCheckpointMagic, "\n", "sha256 ", gantry::Sha256Hex(*payload), "\n", "bytes ",
                   payload->size(), "\n");
  return gantry::WriteFileAtomically(path, {header, *payload});
}

absl::StatusOr<TrainingState> ReadCheckpoint(const std::string& path, bool load_optimizers) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be opened"));
  // The size first, from the file itself, before anything is allocated.
  in.seekg(0, std::ios::end);
  const std::streamoff file_size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (file_size < 0)
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " cannot be read"));
  if (static_cast<uint64_t>(file_size) > kMaxCheckpointBytes + kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", path, " has ", file_size,
                                                   " bytes; at most ", kMaxCheckpointBytes,
                                                   " payload bytes are accepted"));
  }
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<absl::string_view> payload = ParseCheckpointEnvelope(file, path);
  if (!payload.ok()) return payload.status();
  if (CheckpointKindOfPayload(*payload) == CheckpointKind::kBaseline) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path,
                     " is a no-network baseline (a baseline-* preset): it has no generator or "
                     "discriminator network to load, resume, fine-tune or export"));
  }
  try {
    torch::serialize::InputArchive archive;
    std::istringstream stream{std::string(*payload)};
    // Onto the CPU whatever device wrote it: a checkpoint taken on a GPU resumes anywhere.
    archive.load_from(stream, torch::Device(torch::kCPU));
    at::Tensor config_bytes;
    archive.read("config", config_bytes);
    if (config_bytes.dim() != 1 || config_bytes.scalar_type() != at::kByte ||
        config_bytes.numel() > static_cast<int64_t>(kMaxConfigTextBytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", path, ": the model config is not a byte string of at most ",
                       kMaxConfigTextBytes, " bytes"));
    }
    absl::StatusOr<ModelConfig> config = ParseModelConfig(TensorBytes(config_bytes));
    if (!config.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", path, ": ", config.status().message()));
    }
    at::Tensor counters;
    archive.read("counters", counters);
    if (counters.numel() != 4 || counters.scalar_type() != at::kLong ||
        counters.min().item<int64_t>() < 0) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": counters damaged"));
    }
    absl::StatusOr<TrainingState> state =
        NewTrainingState(*config, static_cast<uint64_t>(counters[3].item<int64_t>()));
    if (!state.ok()) return state.status();
    TrainingState& s = *state;
    torch::serialize::InputArchive g, d;
    archive.read("generator", g);
    archive.read("discriminator", d);
    s.generator->load(g);
    s.discriminator->load(d);
    if (load_optimizers) {
      torch::serialize::InputArchive go, dopt;
      archive.read("generator_optimizer", go);
      archive.read("discriminator_optimizer", dopt);
      s.generator_optimizer->load(go);
      s.discriminator_optimizer->load(dopt);
    }
    s.epoch = counters[0].item<int64_t>();
    s.step = counters[1].item<int64_t>();
    s.epoch_cursor = counters[2].item<int64_t>();
    at::Tensor rng_state;
    archive.read("rng_state", rng_state);
    s.rng.set_state(rng_state);
    at::Tensor permutation;
    archive.read("permutation", permutation);
    if (permutation.numel() > 0) {
      if (permutation.dim() != 1 || permutation.scalar_type() != at::kLong ||
          s.epoch_cursor > permutation.numel()) {
        return absl::DataLossError(
            absl::StrCat("checkpoint ", path, ": the epoch's sample order is damaged"));
      }
      s.permutation = permutation;
    }
    return state;
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " cannot be decoded: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " cannot be decoded: ", e.what()));
  }
}

}  // namespace gantry::gan
