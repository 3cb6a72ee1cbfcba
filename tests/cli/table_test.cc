// Tests of Table rendering and of the text formatting helpers.
#include "clients/cli/table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "clients/cli/format.h"

namespace gantry::cli {
namespace {

TEST(TableTest, AlignsColumnsWithoutTrailingSpaces) {
  Table table({"ID", "NAME", "STATE"});
  table.AddRow({"job-1", "a-long-name", "QUEUED"});
  table.AddRow({"job-22", "", "RUNNING"});
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(),
            "ID      NAME         STATE\n"
            "job-1   a-long-name  QUEUED\n"
            "job-22  -            RUNNING\n");
}

TEST(TableTest, MissingCellsAreDashesAndLastColumnUnpadded) {
  Table table({"A", "B"});
  table.AddRow({"x"});
  table.AddRow({"yyyy", "z"});
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(), "A     B\nx     -\nyyyy  z\n");
  EXPECT_EQ(table.rows(), 2u);
}

TEST(TableTest, CountsUtf8CodePoints) {
  EXPECT_EQ(DisplayWidth("abc"), 3u);
  EXPECT_EQ(DisplayWidth("\xce\xbc"
                         "s"),
            2u);  // "µs"
  Table table({"UNIT", "X"});
  table.AddRow(
      {"\xce\xbc"
       "s",
       "1"});
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(),
            "UNIT  X\n\xce\xbc"
            "s    1\n");
}

TEST(FormatTest, AgeAndDuration) {
  google::protobuf::Timestamp t;
  absl::Time now = absl::FromUnixSeconds(1'000'000);
  EXPECT_EQ(FormatAge(t, now), "-");
  t.set_seconds(1'000'000 - 42);
  EXPECT_EQ(FormatAge(t, now), "42s");
  t.set_seconds(1'000'000 - 600);
  EXPECT_EQ(FormatAge(t, now), "10m");
  t.set_seconds(1'000'000 - 5 * 3600);
  EXPECT_EQ(FormatAge(t, now), "5h");
  t.set_seconds(1'000'000 - 3 * 86400);
  EXPECT_EQ(FormatAge(t, now), "3d");
  t.set_seconds(1'000'000 + 10);  // clock skew
  EXPECT_EQ(FormatAge(t, now), "0s");
  EXPECT_EQ(FormatDuration(45), "45s");
  EXPECT_EQ(FormatDuration(200), "3m20s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(-1), "-");
}

TEST(FormatTest, BytesProgressAndRanges) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(27 * 1024 * 1024), "27.0 MiB");
  v1::Progress progress;
  EXPECT_EQ(FormatProgressCell(progress), "-");
  progress.set_epoch(3);
  progress.set_epochs(10);
  EXPECT_EQ(FormatProgressCell(progress), "3/10 30%");
  progress.set_steps_per_epoch(100);
  progress.set_step(350);
  EXPECT_EQ(FormatProgressCell(progress), "3/10 35%");
  v1::Range range;
  EXPECT_EQ(FormatRange(range), "-");
  range.set_min(10);
  range.set_max(500);
  EXPECT_EQ(FormatRange(range), "10-500");
  range.set_min(10.5242);
  range.set_max(99.9123);
  EXPECT_EQ(FormatRange(range), "10.52-99.91");
}

TEST(FormatTest, EnumNamesRoundTrip) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_QUEUED), "QUEUED");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_UNSPECIFIED), "-");
  EXPECT_EQ(*ParseJobState("cancelled"), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(*ParseJobState("Running"), v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(ParseJobState("done").ok());
  EXPECT_FALSE(ParseJobState("JOB_STATE_UNSPECIFIED").ok());
  EXPECT_TRUE(IsTerminal(v1::JOB_STATE_SUCCEEDED));
  EXPECT_FALSE(IsTerminal(v1::JOB_STATE_CANCELLING));
  for (auto particle :
       {v1::PARTICLE_ELECTRON, v1::PARTICLE_PHOTON, v1::PARTICLE_PI0, v1::PARTICLE_CHARGED_PION}) {
    EXPECT_EQ(*ParseParticle(ParticleName(particle)), particle);
  }
  EXPECT_EQ(*ParseParticle("Ele"), v1::PARTICLE_ELECTRON);
  EXPECT_FALSE(ParseParticle("muon").ok());
  EXPECT_EQ(*ParseDevice("GPU"), v1::DEVICE_KIND_GPU);
  EXPECT_FALSE(ParseDevice("tpu").ok());
  EXPECT_EQ(*ParseVisibility("public"), v1::VISIBILITY_PUBLIC);
  EXPECT_EQ(*ParsePrecision("bf16"), v1::PRECISION_BF16);
  for (auto precision : {v1::TRAINING_PRECISION_FP32, v1::TRAINING_PRECISION_BF16_AUTOCAST}) {
    EXPECT_EQ(*ParseTrainingPrecision(TrainingPrecisionName(precision)), precision);
  }
  EXPECT_EQ(*ParseTrainingPrecision("BF16"), v1::TRAINING_PRECISION_BF16_AUTOCAST);
  EXPECT_FALSE(ParseTrainingPrecision("fp16").ok());
}

TEST(FormatTest, Bf16Check) {
  v1::Bf16Check check;
  EXPECT_EQ(FormatBf16(check), "not checked: registered before the BF16 check");
  check.set_state(v1::Bf16Check::STATE_AVAILABLE);
  check.set_reason("BF16 vs FP32: eprof 0.1 vs 0.1 (null 0.05)");
  EXPECT_EQ(FormatBf16(check), "available");
  check.set_state(v1::Bf16Check::STATE_UNAVAILABLE);
  check.set_reason("eprof is 0.3 in BF16 against 0.1 in FP32");
  EXPECT_EQ(FormatBf16(check), "unavailable: eprof is 0.3 in BF16 against 0.1 in FP32");
  check.set_state(v1::Bf16Check::STATE_NOT_CHECKED);
  check.set_reason("this worker's CPU lacks AVX512-BF16/AMX; use PRECISION_FP32");
  EXPECT_EQ(FormatBf16(check),
            "not checked: this worker's CPU lacks AVX512-BF16/AMX; use PRECISION_FP32");
}

TEST(FormatTest, HistogramTable) {
  v1::Histogram h;
  h.set_name("longitudinal_profile");
  h.set_x_label("layer");
  h.set_energy_bin("100-110 GeV");
  for (double r : {2.0, 4.0, 0.0}) h.add_reference(r);
  for (double g : {1.0, 5.0, 0.5}) h.add_generated(g);
  EXPECT_EQ(FormatHistogram(h),
            "longitudinal_profile [100-110 GeV]\n"
            "layer  REFERENCE  GENERATED  RATIO\n"
            "0      2          1          0.500\n"
            "1      4          5          1.250\n"
            "2      0          0.5        -\n");
  for (double e : {0.0, 10.0, 20.0, 30.0}) h.add_edges(e);
  EXPECT_THAT(FormatHistogram(h), ::testing::HasSubstr("\n10-20  4 "));
}

TEST(FormatTest, ValidationCurveTableAndEvent) {
  google::protobuf::RepeatedPtrField<v1::ValidationPoint> curve;
  EXPECT_EQ(FormatValidationCurve(curve), "");
  v1::ValidationPoint* a = curve.Add();
  a->set_epoch(0);
  a->set_step(4);
  (*a->mutable_metrics())["fom"] = 1.23456;
  (*a->mutable_metrics())["mre_sampling_fraction"] = 0.25;
  (*a->mutable_metrics())["eprof"] = 0.5;
  (*a->mutable_metrics())["pos"] = 0.73456;
  v1::ValidationPoint* b = curve.Add();
  b->set_epoch(1);
  b->set_step(8);
  (*b->mutable_metrics())["fom"] = 0.5;
  EXPECT_EQ(FormatValidationCurve(curve),
            "EPOCH  STEP  FOM    SF_MRE  EPROF  POS     SEP_POWER\n"
            "0      4     1.235  0.25    0.5    0.7346  -\n"
            "1      8     0.5    -       -      -       -\n");
  (*b->mutable_metrics())["ang"] = 0.1;
  EXPECT_THAT(FormatValidationCurve(curve), ::testing::HasSubstr("POS     ANG  SEP_POWER"));

  v1::JobEvent event;
  event.set_sequence(7);
  *event.mutable_validation_point() = *a;
  EXPECT_EQ(FormatJobEvent(event),
            "--:--:--  #7  validation epoch 0 step 4 eprof=0.5 fom=1.23 pos=0.735 sf_mre=0.25");
}

TEST(FormatTest, JobEventLines) {
  v1::JobEvent event;
  event.set_sequence(3);
  event.mutable_time()->set_seconds(3600 * 22 + 60 * 40 + 3);
  auto* change = event.mutable_state_change();
  change->set_from(v1::JOB_STATE_QUEUED);
  change->set_to(v1::JOB_STATE_CANCELLED);
  change->set_reason("CancelledByUser");
  change->set_message("cancelled by alice");
  EXPECT_EQ(FormatJobEvent(event),
            "22:40:03  #3  state    QUEUED -> CANCELLED (CancelledByUser: cancelled by alice)");

  v1::JobEvent created;
  created.set_sequence(1);
  created.mutable_state_change()->set_to(v1::JOB_STATE_QUEUED);
  created.mutable_state_change()->set_reason("Submitted");
  EXPECT_THAT(FormatJobEvent(created),
              ::testing::EndsWith("#1  state    (new) -> QUEUED (Submitted)"));

  v1::JobEvent progress_event;
  progress_event.set_sequence(9);
  auto* progress = progress_event.mutable_progress();
  progress->set_epoch(2);
  progress->set_epochs(30);
  progress->set_step(120);
  progress->set_steps_per_epoch(64);
  (*progress->mutable_losses())["g_loss"] = 1.234567;
  (*progress->mutable_losses())["d_loss"] = 0.5;
  progress->set_samples_per_second(812.3);
  progress->set_eta_seconds(3720);
  std::string line = FormatJobEvent(progress_event);
  EXPECT_EQ(line,
            "--:--:--  #9  progress epoch 2/30 step 120 d_loss=0.5 g_loss=1.23 812.3 "
            "samples/s ETA 1h02m");

  v1::JobEvent model_event;
  model_event.set_sequence(20);
  model_event.mutable_model_registered()->set_model_ref("ele:1");
  (*model_event.mutable_model_registered()->mutable_metrics())["fom"] = 0.0421;
  EXPECT_THAT(FormatJobEvent(model_event), ::testing::HasSubstr("registered ele:1 fom=0.0421"));

  v1::JobEvent log_event;
  log_event.mutable_log()->set_rank(1);
  log_event.mutable_log()->set_text("hello");
  EXPECT_THAT(FormatJobEvent(log_event), ::testing::HasSubstr("[rank 1] INFO hello"));

  // A checkpoint scored for keep_best shows its fom; an unscored one shows none.
  v1::JobEvent checkpoint_event;
  v1::CheckpointSaved* saved = checkpoint_event.mutable_checkpoint_saved();
  saved->set_epoch(2);
  saved->set_step(90);
  saved->set_sha256(std::string(64, 'd'));
  saved->set_size_bytes(2048);
  EXPECT_THAT(FormatJobEvent(checkpoint_event), ::testing::Not(::testing::HasSubstr("fom=")));
  saved->set_fom(0.0375);
  EXPECT_THAT(FormatJobEvent(checkpoint_event),
              ::testing::HasSubstr("epoch 2 step 90 2.00 KiB sha256 dddddddddddd fom=0.0375"));
}

}  // namespace
TEST(FormatFieldMetricsTest, ValueSpreadAndFloorPerMetricAndNothingWithoutFloors) {
  google::protobuf::Map<std::string, double> m;
  m["field_events"] = 2000;
  m["auc_features"] = 0.91;
  m["auc_features_spread"] = 0.01;
  m["auc_features_floor"] = 0.5;
  m["auc_features_spread_floor"] = 0.02;
  m["fpd"] = 3.5;
  m["fpd_floor"] = 0.1;
  m["fom"] = 0.02;
  m["fom_null"] = 0.01;
  const std::string text = FormatFieldMetrics(m);
  EXPECT_THAT(text, ::testing::HasSubstr("2000 events per sample"));
  EXPECT_THAT(text, ::testing::ContainsRegex("auc_features +0.9100 \\+- 0.0100 +0.5000 \\+- 0.0200"));
  EXPECT_THAT(text, ::testing::ContainsRegex("fpd +3.5000 +0.1000"));
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("fom")));
  for (const char* key : {"field_events", "auc_features", "auc_features_spread",
                          "auc_features_spread_floor", "fpd_floor"}) {
    EXPECT_TRUE(IsFieldMetric(m, key)) << key;
  }
  EXPECT_FALSE(IsFieldMetric(m, "fom"));
  EXPECT_FALSE(IsFieldMetric(m, "fom_null"));
  google::protobuf::Map<std::string, double> old;
  old["fom"] = 0.02;
  EXPECT_EQ(FormatFieldMetrics(old), "");
}

}  // namespace gantry::cli
