#include "storage/blob_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace gantry::storage {
namespace {

namespace fs = std::filesystem;

// The known SHA-256 of "abc".
constexpr char kAbcSha[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

std::string ReadAll(BlobReader& reader, absl::Status* end, size_t chunk = 7) {
  std::string out;
  while (true) {
    absl::StatusOr<std::string> c = reader.Read(chunk);
    if (!c.ok()) {
      *end = c.status();
      return out;
    }
    if (c->empty()) {
      *end = absl::OkStatus();
      return out;
    }
    out += *c;
  }
}

// Every regular file under dir, recursively.
std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path().string());
  }
  return out;
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

absl::StatusOr<BlobInfo> Put(BlobStore& store, const std::string& data) {
  auto w = store.NewWriter();
  if (!w.ok()) return w.status();
  for (size_t i = 0; i < data.size(); i += 1000) {
    absl::Status s = (*w)->Append(absl::string_view(data).substr(i, 1000));
    if (!s.ok()) return s;
  }
  return (*w)->Commit();
}

TEST(BlobStoreTest, RoundTrip) {
  gantry::testing::TempDir dir;
  auto store = BlobStore::Create(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto w = (*store)->NewWriter();
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("a").ok());
  ASSERT_TRUE((*w)->Append("bc").ok());
  EXPECT_EQ((*w)->bytes_written(), 3);
  auto info = (*w)->Commit(std::string(kAbcSha));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->sha256, kAbcSha);
  EXPECT_EQ(info->size_bytes, 3);
  EXPECT_TRUE((*store)->Exists(kAbcSha));
  EXPECT_EQ(*(*store)->Size(kAbcSha), 3);
  EXPECT_EQ((*store)->Path(kAbcSha), dir.path() + "/blobs/ba/" + kAbcSha);
  EXPECT_TRUE(fs::exists((*store)->Path(kAbcSha)));
  EXPECT_TRUE((*store)->Verify(kAbcSha).ok());
  EXPECT_EQ((*w)->Append("x").code(), absl::StatusCode::kFailedPrecondition);

  const std::string big = Pattern(300000);
  auto big_info = Put(**store, big);
  ASSERT_TRUE(big_info.ok());
  auto reader = (*store)->Open(big_info->sha256);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->size_bytes(), 300000);
  absl::Status end;
  EXPECT_EQ(ReadAll(**reader, &end, 65536), big);
  EXPECT_TRUE(end.ok()) << end;
  // Resume from an offset: only the tail is returned, and the whole file is still verified.
  auto tail = (*store)->Open(big_info->sha256, 250000);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(ReadAll(**tail, &end, 4096), big.substr(250000));
  EXPECT_TRUE(end.ok());
  EXPECT_EQ((*store)->Open(big_info->sha256, 300001).status().code(),
            absl::StatusCode::kOutOfRange);

  // Same content again: fine, same name.
  auto again = Put(**store, big);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sha256, big_info->sha256);

  // Empty blob.
  auto empty = Put(**store, "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_TRUE((*store)->Verify(empty->sha256).ok());

  ASSERT_TRUE((*store)->Remove(kAbcSha).ok());
  EXPECT_FALSE((*store)->Exists(kAbcSha));
  EXPECT_EQ((*store)->Remove(kAbcSha).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Open(kAbcSha).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Verify(kAbcSha).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Open("../../etc/passwd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Size("ABC").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*store)->Exists("../x"));
}

TEST(BlobStoreTest, CorruptionIsDataLoss) {
  gantry::testing::TempDir dir;
  auto store = BlobStore::Create(dir.path());
  ASSERT_TRUE(store.ok());
  const std::string data = Pattern(10000);
  auto info = Put(**store, data);
  ASSERT_TRUE(info.ok());
  const std::string path = (*store)->Path(info->sha256);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put(static_cast<char>(data[5000] ^ 0x01));
  }
  absl::Status v = (*store)->Verify(info->sha256);
  EXPECT_EQ(v.code(), absl::StatusCode::kDataLoss) << v;
  auto reader = (*store)->Open(info->sha256);
  ASSERT_TRUE(reader.ok());
  absl::Status end;
  ReadAll(**reader, &end, 4096);
  EXPECT_EQ(end.code(), absl::StatusCode::kDataLoss);
  // Reading past the failure keeps reporting it.
  EXPECT_EQ((*reader)->Read(10).status().code(), absl::StatusCode::kDataLoss);

  // A truncated blob is caught too.
  fs::resize_file(path, 100);
  EXPECT_EQ((*store)->Verify(info->sha256).code(), absl::StatusCode::kDataLoss);
}

TEST(BlobStoreTest, TempFilesAreNeverBlobs) {
  gantry::testing::TempDir dir;
  auto store = BlobStore::Create(dir.path());
  ASSERT_TRUE(store.ok());
  auto w = (*store)->NewWriter();
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("abc").ok());
  // Mid-write: the content is only in a temp file, not under its blob name.
  EXPECT_FALSE((*store)->Exists(kAbcSha));
  auto files = FilesUnder(dir.path() + "/blobs");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].rfind(dir.path() + "/blobs/tmp/", 0), 0u) << files[0];
  (*w)->Abort();
  EXPECT_TRUE(FilesUnder(dir.path() + "/blobs").empty());
  EXPECT_EQ((*w)->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*store)->Exists(kAbcSha));

  // Destroying an uncommitted writer aborts it.
  {
    auto w2 = (*store)->NewWriter();
    ASSERT_TRUE(w2.ok());
    ASSERT_TRUE((*w2)->Append("abc").ok());
  }
  EXPECT_TRUE(FilesUnder(dir.path() + "/blobs").empty());

  // A crashed process leaves a temp file behind: the next start removes it, and it never was a
  // blob.
  {
    std::ofstream f(dir.path() + "/blobs/tmp/deadbeef.tmp", std::ios::binary);
    f << "abc";
  }
  auto reopened = BlobStore::Create(dir.path());
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE(FilesUnder(dir.path() + "/blobs").empty());
  EXPECT_FALSE((*reopened)->Exists(kAbcSha));
}

TEST(BlobStoreTest, ExpectedShaMismatchStoresNothing) {
  gantry::testing::TempDir dir;
  auto store = BlobStore::Create(dir.path());
  ASSERT_TRUE(store.ok());
  auto w = (*store)->NewWriter();
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("abd").ok());
  auto info = (*w)->Commit(std::string(kAbcSha));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find(kAbcSha), absl::string_view::npos);
  EXPECT_TRUE(FilesUnder(dir.path() + "/blobs").empty());
}

// A FileSystem that fails writes after a byte budget, or fails renames: an I/O error or a crash in
// the middle of writing.
class FaultyFileSystem : public FileSystem {
 public:
  std::atomic<int64_t> write_budget{1 << 30};
  std::atomic<bool> fail_rename{false};

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    auto f = base_->NewWritableFile(path);
    if (!f.ok()) return f.status();
    return std::unique_ptr<WritableFile>(new Faulty(std::move(*f), this));
  }
  absl::StatusOr<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& p) override {
    return base_->NewReadableFile(p);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (fail_rename) return absl::InternalError("injected rename failure");
    return base_->Rename(from, to);
  }
  absl::Status Remove(const std::string& p) override { return base_->Remove(p); }
  absl::Status CreateDirs(const std::string& p) override { return base_->CreateDirs(p); }
  absl::Status SyncDir(const std::string& p) override { return base_->SyncDir(p); }
  absl::StatusOr<int64_t> FileSize(const std::string& p) override { return base_->FileSize(p); }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& p) override {
    return base_->ListDir(p);
  }

 private:
  class Faulty : public WritableFile {
   public:
    Faulty(std::unique_ptr<WritableFile> f, FaultyFileSystem* fs) : f_(std::move(f)), fs_(fs) {}
    absl::Status Append(absl::string_view data) override {
      if (fs_->write_budget.fetch_sub(data.size()) < static_cast<int64_t>(data.size())) {
        return absl::InternalError("injected write failure (disk full)");
      }
      return f_->Append(data);
    }
    absl::Status Sync() override { return f_->Sync(); }
    absl::Status Close() override { return f_->Close(); }

   private:
    std::unique_ptr<WritableFile> f_;
    FaultyFileSystem* fs_;
  };
  FileSystem* base_ = FileSystem::Default();
};

TEST(BlobStoreTest, FailureMidWriteLeavesNoBlob) {
  gantry::testing::TempDir dir;
  FaultyFileSystem faulty;
  auto store = BlobStore::Create(dir.path(), &faulty);
  ASSERT_TRUE(store.ok());
  faulty.write_budget = 2500;
  const std::string data = Pattern(5000);
  auto info = Put(**store, data);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(FilesUnder(dir.path() + "/blobs").empty());

  faulty.write_budget = 1 << 30;
  faulty.fail_rename = true;
  auto renamed = Put(**store, data);
  ASSERT_FALSE(renamed.ok());
  EXPECT_TRUE(FilesUnder(dir.path() + "/blobs").empty());

  faulty.fail_rename = false;
  auto ok = Put(**store, data);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE((*store)->Verify(ok->sha256).ok());
}

}  // namespace
}  // namespace gantry::storage

namespace gantry::storage {
namespace {

// File-system errors can reach clients (an upload that cannot be stored): they name the file's
// base name and errno text, never the server's path.
TEST(BlobStoreTest, ErrorsNeverNameTheServersPaths) {
  gantry::testing::TempDir dir;
  auto store = BlobStore::Create(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  fs::remove_all(dir.path() + "/blobs/tmp");
  auto writer = (*store)->NewWriter();
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().message().find(dir.path()), absl::string_view::npos) << writer.status();
  EXPECT_NE(writer.status().message().find("No such file"), absl::string_view::npos)
      << writer.status();

  std::ofstream(dir.path() + "/data-dir-is-a-file") << "x";
  auto refused = BlobStore::Create(dir.path() + "/data-dir-is-a-file");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().find(dir.path()), absl::string_view::npos)
      << refused.status();
}

}  // namespace
}  // namespace gantry::storage
