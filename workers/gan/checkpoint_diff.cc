#include "workers/gan/checkpoint_diff.h"

#include <torch/torch.h>

#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gantry::gan {
namespace {

std::string Shape(const at::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

TensorDifference Compare(const std::string& name, const at::Tensor* a, const at::Tensor* b) {
  TensorDifference d;
  d.name = name;
  const bool has_a = a != nullptr && a->defined(), has_b = b != nullptr && b->defined();
  if (!has_a && !has_b) {
    d.identical = true;
    return d;
  }
  if (!has_a || !has_b) {
    d.problem = has_a ? "missing in B" : "missing in A";
    d.max_abs_difference = std::numeric_limits<double>::infinity();
    return d;
  }
  if (!a->sizes().equals(b->sizes()) || a->scalar_type() != b->scalar_type()) {
    d.problem = absl::StrCat("shape ", Shape(*a), " ", c10::toString(a->scalar_type()), " vs ",
                             Shape(*b), " ", c10::toString(b->scalar_type()));
    d.max_abs_difference = std::numeric_limits<double>::infinity();
    return d;
  }
  torch::NoGradGuard no_grad;
  const at::Tensor x = a->detach().cpu(), y = b->detach().cpu();
  d.identical = at::equal(x, y);
  if (!d.identical && x.is_floating_point()) {
    // NaNs in the same places are equal; a NaN against a number is an infinite difference.
    const at::Tensor both_nan = at::logical_and(at::isnan(x), at::isnan(y));
    d.identical = at::equal(at::where(both_nan, at::zeros_like(x), x),
                            at::where(both_nan, at::zeros_like(y), y));
  }
  if (!d.identical && x.numel() > 0) {
    at::Tensor diff = (x.to(at::kDouble) - y.to(at::kDouble)).abs();
    diff = at::where(at::isnan(diff), at::full_like(diff, std::numeric_limits<double>::infinity()),
                     diff);
    d.max_abs_difference = diff.max().item<double>();
  }
  return d;
}

void CompareDicts(const std::string& prefix, const torch::OrderedDict<std::string, at::Tensor>& a,
                  const torch::OrderedDict<std::string, at::Tensor>& b,
                  std::vector<TensorDifference>* out) {
  for (const auto& item : a) {
    out->push_back(Compare(prefix + item.key(), &item.value(), b.find(item.key())));
  }
  for (const auto& item : b) {
    if (a.find(item.key()) == nullptr) {
      out->push_back(Compare(prefix + item.key(), nullptr, &item.value()));
    }
  }
}

// The RMSprop state of each parameter, in parameter order, as named tensors.
std::map<std::string, at::Tensor> OptimizerTensors(const torch::optim::RMSprop& optimizer,
                                                   const torch::nn::Module& model) {
  std::map<std::string, at::Tensor> out;
  std::map<const void*, std::string> names;
  for (const auto& item : model.named_parameters()) {
    names[item.value().unsafeGetTensorImpl()] = item.key();
  }
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params()) {
      const auto found = optimizer.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (found == optimizer.state().end()) continue;
      const auto* s = dynamic_cast<const torch::optim::RMSpropParamState*>(found->second.get());
      if (s == nullptr) continue;
      const auto name = names.find(p.unsafeGetTensorImpl());
      const std::string key = name != names.end() ? name->second : "?";
      out[key + ".step"] = at::tensor(s->step(), at::kLong);
      out[key + ".square_avg"] = s->square_avg();
      out[key + ".momentum_buffer"] = s->momentum_buffer();
      out[key + ".grad_avg"] = s->grad_avg();
    }
  }
  return out;
}

void CompareOptimizers(const std::string& prefix, const torch::optim::RMSprop* a,
                       const torch::nn::Module& model_a, const torch::optim::RMSprop* b,
                       const torch::nn::Module& model_b, std::vector<TensorDifference>* out) {
  if (a == nullptr || b == nullptr) return;
  const std::map<std::string, at::Tensor> ta = OptimizerTensors(*a, model_a);
  const std::map<std::string, at::Tensor> tb = OptimizerTensors(*b, model_b);
  for (const auto& [key, tensor] : ta) {
    const auto other = tb.find(key);
    out->push_back(Compare(prefix + key, &tensor, other != tb.end() ? &other->second : nullptr));
  }
  for (const auto& [key, tensor] : tb) {
    if (ta.count(key) == 0) out->push_back(Compare(prefix + key, nullptr, &tensor));
  }
}

}  // namespace

std::vector<TensorDifference> CompareTrainingStates(const TrainingState& a, const TrainingState& b,
                                                    bool optimizers) {
  std::vector<TensorDifference> out;
  CompareDicts("generator.", a.generator->named_parameters(), b.generator->named_parameters(),
               &out);
  CompareDicts("generator.", a.generator->named_buffers(), b.generator->named_buffers(), &out);
  CompareDicts("discriminator.", a.discriminator->named_parameters(),
               b.discriminator->named_parameters(), &out);
  CompareDicts("discriminator.", a.discriminator->named_buffers(), b.discriminator->named_buffers(),
               &out);
  if (optimizers) {
    CompareOptimizers("generator_optimizer.", a.generator_optimizer.get(), *a.generator,
                      b.generator_optimizer.get(), *b.generator, &out);
    CompareOptimizers("discriminator_optimizer.", a.discriminator_optimizer.get(), *a.discriminator,
                      b.discriminator_optimizer.get(), *b.discriminator, &out);
  }
  return out;
}

bool AllIdentical(const std::vector<TensorDifference>& differences) {
  for (const TensorDifference& d : differences) {
    if (!d.identical) return false;
  }
  return true;
}

}  // namespace gantry::gan
