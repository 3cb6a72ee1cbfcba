// GPU workers and GPU jobs against the real gantry-server and PostgreSQL: what a registration must
// say about its GPUs, the GPU jobs refused at submission (more than one GPU per rank, a pool whose
// workers are all CPUs), and placement that puts GPU ranks on GPU workers only and CPU ranks on
// CPU workers only. The workers are test drivers of the worker protocol
// (tests/server/driver_worker.h).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerDevicesTest : public ServerFixture {
 protected:
  // The fixture's server starts with these.
  std::vector<std::string> SetUpServerArgs() const override { return WorkerProtocolArgs(join_); }
  void SetUp() override {
    ServerFixture::SetUp();
    token_ = NewTenant("physics");
  }

  // A registration of a one-slot CPU worker, changed by `edit`.
  grpc::Status RegisterWith(const std::function<void(v1::RegisterRequest&)>& edit) {
    v1::RegisterRequest r;
    r.set_name("gpu-node");
    r.set_slots(1);
    r.set_advertise_host("127.0.0.1");
    edit(r);
    v1::RegisterResponse out;
    auto ctx = Ctx(join_);
    return worker_->Register(ctx.get(), r, &out);
  }

  grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    return training_->SubmitJob(Ctx(token_).get(), request, job);
  }

  static v1::JobSpec GpuSpec(int world_size) {
    v1::JobSpec spec = GoodSpec();
    spec.set_world_size(world_size);
    spec.mutable_resources_per_rank()->set_device(v1::DEVICE_KIND_GPU);
    spec.mutable_resources_per_rank()->set_count(1);
    return spec;
  }

  void CreatePool(const std::string& name, v1::DeviceKind device) {
    v1::CreatePoolRequest request;
    request.set_name(name);
    request.mutable_spec()->set_device(device);
    request.mutable_spec()->set_price_per_device_hour(1.0);
    request.mutable_spec()->mutable_provisioner()->mutable_static_();
    v1::Pool pool;
    grpc::Status s = admin_->CreatePool(Ctx(admin_token_).get(), request, &pool);
    ASSERT_TRUE(s.ok()) << Describe(s);
  }

  std::unique_ptr<DriverWorker> Worker(const std::string& name, int slots,
                                       const std::vector<int>& gpu_ids = {}) {
    auto w = std::make_unique<DriverWorker>(channel_, join_, name, slots,
                                            std::vector<std::string>{}, DriverServing{}, 0, "",
                                            std::map<std::string, std::string>{}, gpu_ids);
    EXPECT_TRUE(w->status().ok()) << Describe(w->status());
    w->set_free_slots(slots);
    w->Heartbeat();
    return w;
  }

  const std::string join_ = "devices-join-token";
  std::string token_;
};

struct BadRegistration {
  std::string what;
  std::function<void(v1::RegisterRequest&)> edit;
  std::string message;  // the whole message: the field and what to change
};

TEST_F(ServerDevicesTest, RegistrationsWithInconsistentGpusAreRefusedNamingTheField) {
  const auto gpu = [](std::vector<int> ids, int slots) {
    return [ids, slots](v1::RegisterRequest& r) {
      r.set_device(v1::DEVICE_KIND_GPU);
      r.set_slots(slots);
      for (int id : ids) r.add_device_ids(id);
    };
  };
  const std::vector<BadRegistration> cases = {
      {"GPU worker without ids", gpu({}, 1),
       "device_ids: is empty but device is GPU; list the GPU ids this worker offers, one per rank "
       "(gantry-worker daemon --device=gpu:0,1)"},
      {"negative id", gpu({0, -1}, 1), "device_ids[1]: is -1; set it to a value in 0..127"},
      {"duplicate id", gpu({2, 5, 2}, 1), "device_ids[2]: repeats GPU 2; list each GPU once"},
      {"more slots than GPUs", gpu({0, 1}, 3),
       "slots: is 3 but device_ids lists 2 GPU(s); a GPU rank runs on a GPU of its own, so give "
       "at most 2 slots or list more GPUs"},
      {"CPU worker with ids",
       [](v1::RegisterRequest& r) {
         r.set_device(v1::DEVICE_KIND_CPU);
         r.add_device_ids(0);
       },
       "device_ids: lists 1 GPU id(s) but device is CPU; register with device GPU (gantry-worker "
       "daemon --device=gpu:ID,...) or list no ids"},
      {"unspecified device with ids", [](v1::RegisterRequest& r) { r.add_device_ids(0); },
       "device_ids: lists 1 GPU id(s) but device is CPU; register with device GPU (gantry-worker "
       "daemon --device=gpu:ID,...) or list no ids"},
  };
  for (const BadRegistration& c : cases) {
    const grpc::Status s = RegisterWith(c.edit);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what << ": " << Describe(s);
    EXPECT_EQ(s.error_message(), c.message) << c.what;
  }
  // Nothing was registered; a consistent GPU worker (fewer slots than GPUs is fine) is.
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(admin_->ListWorkers(Ctx(admin_token_).get(), {}, &workers).ok());
  EXPECT_EQ(workers.workers_size(), 0);
  const grpc::Status ok = RegisterWith(gpu({3, 1}, 1));
  EXPECT_TRUE(ok.ok()) << Describe(ok);
  ASSERT_TRUE(admin_->ListWorkers(Ctx(admin_token_).get(), {}, &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).device(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(workers.workers(0).slots(), 1);
}

TEST_F(ServerDevicesTest, GpuJobsThatCouldNeverRunAreRefusedAtSubmission) {
  // More than one GPU per rank.
  v1::Job job;
  v1::JobSpec two_gpus = GpuSpec(1);
  two_gpus.mutable_resources_per_rank()->set_count(2);
  grpc::Status s = Submit(two_gpus, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_EQ(s.error_message(),
            "spec.resources_per_rank.count: is 2; gantry runs one GPU per rank: set count to 1 (or "
            "0) and raise world_size to use more GPUs");
  // count 0 means one GPU; a CPU rank's count is not a GPU count.
  v1::JobSpec zero = GpuSpec(1);
  zero.mutable_resources_per_rank()->set_count(0);
  s = Submit(zero, &job);
  EXPECT_TRUE(s.ok()) << Describe(s);

  // A pool whose workers are all CPUs, named by spec.pool or by the selector.
  CreatePool("cpus", v1::DEVICE_KIND_CPU);
  CreatePool("gpus", v1::DEVICE_KIND_GPU);
  v1::JobSpec in_cpus = GpuSpec(1);
  in_cpus.set_pool("cpus");
  s = Submit(in_cpus, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  EXPECT_EQ(s.error_message(),
            "spec.pool: pool cpus has CPU workers only and can never run the job's GPU ranks; "
            "name a GPU pool, leave the pool out, or change spec.resources_per_rank.device");
  v1::JobSpec selected = GpuSpec(1);
  (*selected.mutable_worker_selector())["pool"] = "cpus";
  s = Submit(selected, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  // A CPU job for the GPU pool, the same.
  v1::JobSpec cpu_in_gpus = GoodSpec();
  cpu_in_gpus.set_pool("gpus");
  s = Submit(cpu_in_gpus, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  // The GPU pool takes the GPU job.
  v1::JobSpec in_gpus = GpuSpec(1);
  in_gpus.set_pool("gpus");
  s = Submit(in_gpus, &job);
  EXPECT_TRUE(s.ok()) << Describe(s);
}

TEST_F(ServerDevicesTest, GpuRanksGoToGpuWorkersAndCpuRanksToCpuWorkers) {
  auto cpu = Worker("cpu-node", 4);
  auto gpu = Worker("gpu-node", 2, {0, 1});
  v1::JobSpec gpu_spec = GpuSpec(2);
  gpu_spec.set_model_name("on-gpus");
  const v1::Job gpu_job = SubmitJob(token_, gpu_spec);
  ASSERT_FALSE(gpu_job.id().empty());
  for (int i = 0; i < 2; ++i) {
    auto m = gpu->Next();
    ASSERT_TRUE(m && m->has_assignment()) << GetJob(token_, gpu_job.id()).DebugString();
    EXPECT_EQ(m->assignment().job_id(), gpu_job.id());
  }
  EXPECT_FALSE(cpu->Next(300).has_value()) << "no GPU rank on the CPU worker";

  // The GPU worker is full now: a CPU job goes to the CPU worker, a further GPU job waits even
  // though the CPU worker has slots free.
  gpu->set_free_slots(0);
  gpu->Heartbeat();
  v1::JobSpec cpu_spec = GoodSpec();
  cpu_spec.set_model_name("on-cpus");
  const v1::Job cpu_job = SubmitJob(token_, cpu_spec);
  for (int i = 0; i < 2; ++i) {
    auto m = cpu->Next();
    ASSERT_TRUE(m && m->has_assignment()) << GetJob(token_, cpu_job.id()).DebugString();
    EXPECT_EQ(m->assignment().job_id(), cpu_job.id());
  }
  v1::JobSpec waiting_spec = GpuSpec(1);
  waiting_spec.set_model_name("waits");
  const v1::Job waiting = SubmitJob(token_, waiting_spec);
  EXPECT_FALSE(cpu->Next(1000).has_value()) << "a GPU rank never lands on a CPU worker";
  EXPECT_FALSE(gpu->Next(100).has_value());
  EXPECT_EQ(GetJob(token_, waiting.id()).state(), v1::JOB_STATE_QUEUED);
}

}  // namespace
}  // namespace gantry::testing
