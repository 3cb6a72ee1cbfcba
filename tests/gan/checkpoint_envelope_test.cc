// Tests of ParseCheckpointEnvelope: the torch-free header check of a checkpoint file.
#include "workers/gan/checkpoint_envelope.h"

#include <string>

#include "absl/status/status.h"
#include "base/sha256.h"
#include "gtest/gtest.h"

namespace gantry::gan {
namespace {

std::string Envelope(const std::string& payload) {
  return std::string(kCheckpointMagic) + "\nsha256 " + Sha256Hex(payload) + "\nbytes " +
         std::to_string(payload.size()) + "\n" + payload;
}

TEST(CheckpointEnvelopeTest, ReturnsTheVerifiedPayload) {
  const std::string payload = "PK\x03\x04 any bytes\n\nwith newlines";
  const std::string file = Envelope(payload);
  auto parsed = ParseCheckpointEnvelope(file, "a.ckpt");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, payload);
  auto empty = ParseCheckpointEnvelope(Envelope(""), "a.ckpt");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

TEST(CheckpointEnvelopeTest, RefusesWhatIsNotACheckpoint) {
  for (const std::string file :
       {std::string(""), std::string("GANTRY-CHECKPOINT 2\n"),
        std::string("GANTRY-CHECKPOINT 10\n"), std::string("\x89HDF\r\n")}) {
    auto r = ParseCheckpointEnvelope(file, "a.ckpt");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << file;
    EXPECT_EQ(r.status().message(), "a.ckpt is not a gantry checkpoint");
  }
}

TEST(CheckpointEnvelopeTest, DamagedHeaderTruncationAndCorruptionAreDataLoss) {
  const std::string payload(100, 'x');
  const std::string good = Envelope(payload);
  const std::string sha = Sha256Hex(payload);
  struct Case {
    std::string file;
    std::string message;
  };
  const Case cases[] = {
      {"GANTRY-CHECKPOINT 1", "checkpoint a.ckpt: damaged header"},
      {"GANTRY-CHECKPOINT 1\nsha256 abc\nbytes 100\n" + payload,
       "checkpoint a.ckpt: damaged header"},
      {"GANTRY-CHECKPOINT 1\nsha256 " + sha + "\nbytes -1\n" + payload,
       "checkpoint a.ckpt: damaged header"},
      {"GANTRY-CHECKPOINT 1\nsha256 " + sha + "\nbytes 99999999999999999999999\n" + payload,
       "checkpoint a.ckpt: damaged header"},
      {"GANTRY-CHECKPOINT 1\nbytes 100\nsha256 " + sha + "\n" + payload,
       "checkpoint a.ckpt: damaged header"},
      {good.substr(0, good.size() - 1),
       "checkpoint a.ckpt is truncated or padded: 99 payload bytes, header says 100"},
      {good + "y", "checkpoint a.ckpt is truncated or padded: 101 payload bytes, header says 100"},
      {good.substr(0, good.size() - 1) + "y", "checkpoint a.ckpt: sha256 mismatch (corrupted)"},
  };
  for (const Case& c : cases) {
    auto r = ParseCheckpointEnvelope(c.file, "a.ckpt");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << c.file.substr(0, 40);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

}  // namespace
}  // namespace gantry::gan
