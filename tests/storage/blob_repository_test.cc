// BlobRepository against a real PostgreSQL and a real blob store: reference counts kept by the
// rows that use a blob, garbage collection with a grace period, and a dataset delete racing an
// identical upload.
#include "storage/blob_repository.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/sha256.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "tests/storage/storage_fixture.h"
#include "tests/support/temp_dir.h"

namespace gantry::storage {
namespace {

using gantry::v1::Dataset;

class BlobRepositoryTest : public StorageFixture {
 protected:
  void SetUp() override {
    StorageFixture::SetUp();
    auto store = BlobStore::Create(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // Stores `bytes` the way the server does: pinned, then published under its sha256.
  std::string Put(const std::string& bytes) {
    auto writer = store_->NewWriter();
    EXPECT_TRUE(writer.ok()) << writer.status();
    EXPECT_TRUE((*writer)->Append(bytes).ok());
    BlobRepository blobs(*db_);
    auto info =
        (*writer)->Commit(std::nullopt, [&](const std::string& sha) { return blobs.Pin(sha); });
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->sha256 : "";
  }

  static Dataset MakeDataset(const std::string& owner, const std::string& name,
                             const std::string& sha256) {
    Dataset d;
    d.set_owner(owner);
    d.set_name(name);
    d.set_sha256(sha256);
    d.set_size_bytes(10);
    return d;
  }

  int64_t RefsOf(const std::string& sha) {
    auto refs = BlobRepository(*db_).Refs(sha);
    EXPECT_TRUE(refs.ok()) << refs.status();
    return refs.ok() ? *refs : -1;
  }

  gantry::testing::TempDir dir_;
  std::unique_ptr<BlobStore> store_;
};

TEST_F(BlobRepositoryTest, DatasetsAndCheckpointsCountTheirBlobsInTheirOwnTransactions) {
  const std::string sha = Put("shared bytes");
  EXPECT_EQ(RefsOf(sha), 0) << "a pinned blob has no user yet";
  DatasetRepository datasets(*db_);
  auto a = datasets.Create(MakeDataset("alice", "a", sha));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = datasets.Create(MakeDataset("bob", "b", sha));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(RefsOf(sha), 2);
  // A refused create (same name) leaves the count alone: the trigger ran in a rolled-back insert.
  EXPECT_FALSE(datasets.Create(MakeDataset("alice", "a", sha)).ok());
  EXPECT_EQ(RefsOf(sha), 2);

  // A job checkpoint with the same bytes counts while it is live; retention expiring it drops it.
  JobRepository jobs(*db_);
  gantry::v1::JobSpec spec;
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:events=100");
  spec.set_world_size(1);
  auto job = jobs.Create("alice", spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string newer = Put("newer checkpoint");
  gantry::v1::CheckpointSaved saved;
  saved.set_sha256(sha);
  saved.set_step(10);
  saved.set_size_bytes(12);
  ASSERT_TRUE(jobs.RecordCheckpoint(job->id(), 0, saved).ok());
  EXPECT_EQ(RefsOf(sha), 3);
  saved.set_sha256(newer);
  saved.set_step(20);
  ASSERT_TRUE(jobs.RecordCheckpoint(job->id(), 0, saved).ok());
  ASSERT_TRUE(jobs.ExpireCheckpoints(job->id(), 1, false).ok());
  EXPECT_EQ(RefsOf(sha), 2) << "the expired checkpoint no longer uses the blob";
  EXPECT_EQ(RefsOf(newer), 1);

  ASSERT_TRUE(datasets.Delete("alice", "a").ok());
  ASSERT_TRUE(datasets.Delete("bob", "b").ok());
  EXPECT_EQ(RefsOf(sha), 0);
  EXPECT_TRUE(store_->Exists(sha)) << "deleting a dataset never unlinks; the collector does";
}

TEST_F(BlobRepositoryTest, CollectDeletesUnreferencedBlobsOnlyAfterTheGracePeriod) {
  BlobRepository blobs(*db_);
  DatasetRepository datasets(*db_);
  const std::string used = Put("used");
  const std::string unused = Put("unused");
  ASSERT_TRUE(datasets.Create(MakeDataset("alice", "used", used)).ok());
  // A file nobody recorded (e.g. stored while the database was down) and an abandoned upload.
  const std::string orphan_bytes = "orphan";
  const std::string orphan = Sha256Hex(orphan_bytes);
  std::filesystem::create_directories(dir_.File("blobs/" + orphan.substr(0, 2)));
  std::ofstream(store_->Path(orphan), std::ios::binary) << orphan_bytes;
  const std::string partial = dir_.File("blobs/tmp/abandoned.tmp");
  std::ofstream(partial) << "half an upload";

  const absl::Duration grace = absl::Milliseconds(800);
  auto first = blobs.Collect(*store_, grace);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->deleted, 0) << "nothing is older than the grace period yet";
  EXPECT_EQ(first->adopted, 1) << "the orphan file gets a row";
  EXPECT_EQ(first->temp_removed, 0);
  EXPECT_TRUE(store_->Exists(unused));
  EXPECT_TRUE(store_->Exists(orphan));
  EXPECT_TRUE(std::filesystem::exists(partial));

  absl::SleepFor(grace + absl::Milliseconds(300));
  auto second = blobs.Collect(*store_, grace);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->deleted, 2);
  EXPECT_EQ(second->temp_removed, 1);
  EXPECT_FALSE(store_->Exists(unused));
  EXPECT_FALSE(store_->Exists(orphan));
  EXPECT_FALSE(std::filesystem::exists(partial));
  EXPECT_TRUE(store_->Exists(used)) << "a referenced blob is never collected";
  EXPECT_EQ(blobs.Refs(unused).status().code(), absl::StatusCode::kNotFound);

  // A blob that loses its last user gets a fresh grace period from that moment.
  ASSERT_TRUE(datasets.Delete("alice", "used").ok());
  auto third = blobs.Collect(*store_, grace);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->deleted, 0);
  EXPECT_TRUE(store_->Exists(used));
  // Pinning it again (an identical upload) restarts the grace period too.
  absl::SleepFor(grace / 2);
  ASSERT_TRUE(blobs.Pin(used).ok());
  absl::SleepFor(grace / 2 + absl::Milliseconds(200));
  auto fourth = blobs.Collect(*store_, grace);
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_EQ(fourth->deleted, 0);
  EXPECT_TRUE(store_->Exists(used));
}

// An upload pins its blob, inspects it, then records its dataset with Blob::kPinned. If the
// collector deleted the still unreferenced blob meanwhile (the inspection outlasted the grace),
// the dataset is refused (ABORTED) instead of naming bytes that are gone; while the pin holds, or
// when a collector pass races the create, it is recorded and the blob survives.
TEST_F(BlobRepositoryTest, APinnedDatasetIsRefusedOnceTheCollectorTookItsBlob) {
  DatasetRepository datasets(*db_);
  BlobRepository blobs(*db_);
  // Long enough that no stall of a loaded machine between Put and Create outlasts it.
  const absl::Duration grace = absl::Seconds(1);
  const std::string late = Put("inspected for too long");
  absl::SleepFor(grace + absl::Milliseconds(100));
  auto collected = blobs.Collect(*store_, grace);
  ASSERT_TRUE(collected.ok()) << collected.status();
  ASSERT_EQ(collected->deleted, 1);
  auto refused =
      datasets.Create(MakeDataset("alice", "late", late), 0, DatasetRepository::Blob::kPinned);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted) << refused.status();
  EXPECT_EQ(datasets.Get("alice", "late").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(blobs.Refs(late).status().code(), absl::StatusCode::kNotFound)
      << "the refused create leaves no row behind";

  for (int round = 0; round < 10; ++round) {
    const std::string sha = Put(absl::StrCat("inspected in time ", round));
    std::atomic<bool> created{false};
    std::thread collector([&] {
      do {
        auto done = blobs.Collect(*store_, grace);
        ASSERT_TRUE(done.ok()) << done.status();
      } while (!created.load());
    });
    auto d = datasets.Create(MakeDataset("alice", absl::StrCat("in-time-", round), sha), 0,
                             DatasetRepository::Blob::kPinned);
    created = true;
    collector.join();
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(RefsOf(sha), 1);
    EXPECT_TRUE(store_->Verify(sha).ok()) << "round " << round;
  }
}

// The bug this replaces: deleting a dataset counted the blob's users and unlinked it outside any
// transaction, so an identical upload acknowledged in between lost its bytes. Here a delete (and
// the collector running flat out) races an identical upload, many times; every acknowledged
// dataset's blob must be there and intact afterwards.
TEST_F(BlobRepositoryTest, ADeleteRacingAnIdenticalUploadNeverLosesTheAcknowledgedBlob) {
  DatasetRepository datasets(*db_);
  BlobRepository blobs(*db_);
  const absl::Duration grace = absl::Milliseconds(500);
  constexpr int kRounds = 25;
  for (int round = 0; round < kRounds; ++round) {
    const std::string bytes = absl::StrCat("shower file of round ", round);
    const std::string sha = Put(bytes);
    ASSERT_TRUE(datasets.Create(MakeDataset("alice", absl::StrCat("old-", round), sha)).ok());

    std::atomic<bool> uploaded{false};
    std::thread deleter([&] {
      ASSERT_TRUE(datasets.Delete("alice", absl::StrCat("old-", round)).ok());
      while (!uploaded.load()) {
        auto done = blobs.Collect(*store_, grace);
        ASSERT_TRUE(done.ok()) << done.status();
      }
    });
    std::thread uploader([&] {
      const std::string again = Put(bytes);
      EXPECT_EQ(again, sha);
      auto created = datasets.Create(MakeDataset("bob", absl::StrCat("new-", round), again));
      EXPECT_TRUE(created.ok()) << created.status();
      uploaded = true;
    });
    uploader.join();
    deleter.join();
  }
  // Every unreferenced blob is old enough now; the collector must still keep every new one.
  absl::SleepFor(grace + absl::Milliseconds(200));
  auto done = blobs.Collect(*store_, grace);
  ASSERT_TRUE(done.ok()) << done.status();
  for (int round = 0; round < kRounds; ++round) {
    auto d = datasets.Get("bob", absl::StrCat("new-", round));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(store_->Verify(d->sha256()).ok()) << "round " << round;
    EXPECT_EQ(RefsOf(d->sha256()), 1);
  }
}

// The collector deleting an expired blob races an upload of the same bytes: the row lock orders
// them, so either the upload's pin waits and its rename recreates the file, or the pin comes first
// and the blob is too young to collect. Many rounds; every acknowledged blob survives intact.
TEST_F(BlobRepositoryTest, TheCollectorRacingAnIdenticalUploadNeverLosesTheAcknowledgedBlob) {
  DatasetRepository datasets(*db_);
  BlobRepository blobs(*db_);
  const absl::Duration grace = absl::Milliseconds(300);
  constexpr int kRounds = 25;
  auto bytes_of = [](int round) { return absl::StrCat("expired shower file ", round); };
  for (int round = 0; round < kRounds; ++round) {
    const std::string sha = Put(bytes_of(round));
    ASSERT_TRUE(datasets.Create(MakeDataset("alice", absl::StrCat("gone-", round), sha)).ok());
    ASSERT_TRUE(datasets.Delete("alice", absl::StrCat("gone-", round)).ok());
  }
  absl::SleepFor(grace + absl::Milliseconds(200));  // every one of them is collectable now
  int64_t collected = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> uploaded{false};
    std::thread collector([&] {
      do {
        auto done = blobs.Collect(*store_, grace);
        ASSERT_TRUE(done.ok()) << done.status();
        collected += done->deleted;
      } while (!uploaded.load());
    });
    std::thread uploader([&] {
      const std::string sha = Put(bytes_of(round));
      auto created = datasets.Create(MakeDataset("bob", absl::StrCat("again-", round), sha));
      EXPECT_TRUE(created.ok()) << created.status();
      uploaded = true;
    });
    uploader.join();
    collector.join();
  }
  EXPECT_GT(collected, 0) << "the collector did run against the expired blobs";
  for (int round = 0; round < kRounds; ++round) {
    auto d = datasets.Get("bob", absl::StrCat("again-", round));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(store_->Verify(d->sha256()).ok()) << "round " << round;
    EXPECT_EQ(RefsOf(d->sha256()), 1);
  }
}

TEST_F(BlobRepositoryTest, PinRefusesAName) {
  EXPECT_EQ(BlobRepository(*db_).Pin("../../etc/passwd").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::storage
