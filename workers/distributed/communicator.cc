#include "workers/distributed/communicator.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>
#include <torch/version.h>
#ifdef GANTRY_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gantry::distributed {
namespace {

std::string Message(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

std::chrono::milliseconds Millis(absl::Duration d) {
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

// Gloo's collectives take one tensor per device, all of one type and size; gantry's take any list.
// Tensors are packed per dtype into one flat buffer, run through `op`, and copied back.
void PackedCollective(std::vector<at::Tensor>& tensors,
                      const std::function<void(at::Tensor&)>& op) {
  std::vector<bool> done(tensors.size(), false);
  for (size_t first = 0; first < tensors.size(); ++first) {
    if (done[first]) continue;
    const at::ScalarType type = tensors[first].scalar_type();
    std::vector<size_t> members;
    std::vector<at::Tensor> flat;
    for (size_t i = first; i < tensors.size(); ++i) {
      if (!done[i] && tensors[i].scalar_type() == type) {
        members.push_back(i);
        flat.push_back(tensors[i].detach().reshape({-1}));
        done[i] = true;
      }
    }
    // A single contiguous tensor is reduced in place through a flat view; otherwise via a copy.
    const bool direct = members.size() == 1 && tensors[first].is_contiguous();
    at::Tensor buffer = direct ? flat[0] : at::cat(flat);
    op(buffer);
    if (direct) continue;
    at::NoGradGuard no_grad;
    int64_t offset = 0;
    for (size_t i : members) {
      const int64_t n = tensors[i].numel();
      tensors[i].detach().copy_(buffer.slice(0, offset, offset + n).view(tensors[i].sizes()));
      offset += n;
    }
  }
}

// NCCL reduces CUDA tensors only: on a GPU group a CPU buffer (the RNG state, the counters, the
// epoch's order, the data checks) goes through the rank's current CUDA device and back.
std::function<void(at::Tensor&)> OnGroupDevice(bool gpu, std::function<void(at::Tensor&)> op) {
  if (!gpu) return op;
  return [op = std::move(op)](at::Tensor& buffer) {
    if (!buffer.is_cpu()) return op(buffer);
    at::Tensor staged = buffer.to(at::Device(at::kCUDA));
    op(staged);
    at::NoGradGuard no_grad;
    buffer.copy_(staged);
  };
}

}  // namespace

absl::Status CollectiveError(const std::exception& e, const std::string& what,
                             const std::string& where) {
  const std::string message = Message(e);
  const std::string text = absl::StrCat(what, " (", where, ") failed: ", message);
  const std::string lower = absl::AsciiStrToLower(message);
  if (dynamic_cast<const c10d::TimeoutError*>(&e) != nullptr ||
      absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout")) {
    return absl::DeadlineExceededError(text);
  }
  return absl::UnavailableError(text);
}

Communicator::Communicator(CommunicatorOptions options, c10::intrusive_ptr<c10d::Store> store,
                           c10::intrusive_ptr<c10d::ProcessGroup> group)
    : options_(std::move(options)), store_(std::move(store)), group_(std::move(group)) {}

Communicator::~Communicator() = default;

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Connect(
    const CommunicatorOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " of world size ",
                                                   options.world_size, " is out of range"));
  }
  if (options.rendezvous_host.empty()) {
    return absl::InvalidArgumentError("no rendezvous host");
  }
  if (options.rendezvous_port < 0 || options.rendezvous_port > 65535 ||
      (options.rendezvous_port == 0 && options.world_size > 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous port ", options.rendezvous_port, " is not a valid TCP port"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the rendezvous timeout must be positive");
  }
  if (!options.secret.empty() &&
      (options.secret.size() < 32 || options.secret.size() > 128 ||
       !std::all_of(options.secret.begin(), options.secret.end(),
                    [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); }))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the rendezvous secret must be 32 to 128 hex characters (it has ", options.secret.size(),
        "); a rank uses the rendezvous_secret of its assignment"));
  }
#ifndef GANTRY_WITH_CUDA
  if (options.gpu) {
    return absl::UnimplementedError(
        "GPU ranks need ProcessGroupNCCL: this gantry-worker was built without GANTRY_WITH_CUDA "
        "(CPU LibTorch)");
  }
#endif
  const std::string where =
      absl::StrCat("rendezvous at ", options.rendezvous_host, ":", options.rendezvous_port,
                   " as rank ", options.rank, " of ", options.world_size);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.rendezvous_port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = static_cast<size_t>(options.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = Millis(options.timeout);
    store = c10::make_intrusive<c10d::TCPStore>(options.rendezvous_host, store_options);
    // Keys "<secret>/...": the TCPStore has no authentication; a process without the secret can
    // connect but finds none of the group's keys and cannot write one the group would read.
    if (!options.secret.empty()) {
      store = c10::make_intrusive<c10d::PrefixStore>(options.secret, store);
    }
  } catch (const std::exception& e) {
    return CollectiveError(e, "c10d TCPStore", where);
  }
#ifdef GANTRY_WITH_CUDA
  // Compiled only against a CUDA LibTorch; never built or run on gantry's CPU machines.
  if (options.gpu) {
    try {
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = Millis(options.timeout);
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank,
                                                              options.world_size, nccl_options);
#if TORCH_VERSION_MAJOR >= 2
      // Since PyTorch 2 a process group dispatches each collective to the backend of its tensors'
      // device: NCCL for CUDA (CPU tensors are staged through the device, OnGroupDevice).
      auto group = c10::make_intrusive<c10d::ProcessGroup>(store, options.rank, options.world_size);
      group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
      group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
#else
      auto group = nccl;
#endif
      return std::unique_ptr<Communicator>(new Communicator(options, store, group));
    } catch (const std::exception& e) {
      return CollectiveError(e, "NCCL process group", where);
    }
  }
#endif
#ifdef USE_C10D_GLOO
  try {
    std::string bind = options.bind_host;
    if (bind.empty()) bind = options.rank == 0 ? options.rendezvous_host : "127.0.0.1";
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(Millis(options.timeout));
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bind));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank,
                                                             options.world_size, gloo_options);
    return std::unique_ptr<Communicator>(new Communicator(options, store, group));
  } catch (const std::exception& e) {
    return CollectiveError(e, "Gloo process group", where);
  }
#else
  // A build without Gloo (the GPU device check's, against a LibTorch whose Gloo headers are
  // absent).
  return absl::UnimplementedError("CPU process groups need Gloo, which this build lacks");
#endif
}

absl::Status Communicator::AllReduceSum(std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return absl::OkStatus();
  try {
    PackedCollective(tensors, OnGroupDevice(options_.gpu, [this](at::Tensor& buffer) {
                       std::vector<at::Tensor> one{buffer};
                       c10d::AllreduceOptions opts;
                       opts.reduceOp = c10d::ReduceOp::SUM;
                       group_->allreduce(one, opts)->wait();
                     }));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return CollectiveError(e, "all-reduce", absl::StrCat("rank ", rank()));
  }
}

absl::Status Communicator::Broadcast(std::vector<at::Tensor>& tensors, int root) {
  if (root < 0 || root >= world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " out of range"));
  }
  if (tensors.empty()) return absl::OkStatus();
  try {
    PackedCollective(tensors, OnGroupDevice(options_.gpu, [this, root](at::Tensor& buffer) {
                       std::vector<at::Tensor> one{buffer};
                       c10d::BroadcastOptions opts;
                       opts.rootRank = root;
                       group_->broadcast(one, opts)->wait();
                     }));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return CollectiveError(e, "broadcast", absl::StrCat("rank ", rank()));
  }
}

absl::Status Communicator::Barrier() {
  try {
    group_->barrier()->wait();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return CollectiveError(e, "barrier", absl::StrCat("rank ", rank()));
  }
}

}  // namespace gantry::distributed
