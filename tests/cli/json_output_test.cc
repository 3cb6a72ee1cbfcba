// Tests of json_output: protobuf JSON objects and arrays that parse back to the same messages.
#include "clients/cli/json_output.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <sstream>

#include "gantry/v1/training.pb.h"

namespace gantry::cli {
namespace {

TEST(JsonOutputTest, ObjectHasDefaultFieldsAndEnumNames) {
  v1::Job job;
  job.set_id("job-1");
  job.set_state(v1::JOB_STATE_QUEUED);
  std::ostringstream out;
  ASSERT_TRUE(PrintJson(out, job).ok());
  EXPECT_THAT(out.str(), ::testing::HasSubstr("\"state\":\"JOB_STATE_QUEUED\""));
  EXPECT_THAT(out.str(), ::testing::HasSubstr("\"restarts\":0"));  // defaults are printed
  EXPECT_EQ(out.str().back(), '\n');
  v1::Job parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.str(), &parsed).ok());
  EXPECT_EQ(parsed.id(), "job-1");
}

TEST(JsonOutputTest, ArrayRoundTripsAndEmptyIsBrackets) {
  v1::ListJobsResponse response;
  for (const char* id : {"job-a", "job-b"}) response.add_jobs()->set_id(id);
  std::ostringstream out;
  ASSERT_TRUE(PrintJsonArray(out, response.jobs()).ok());
  v1::ListJobsResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage("{\"jobs\":" + out.str() + "}", &parsed).ok())
      << out.str();
  ASSERT_EQ(parsed.jobs_size(), 2);
  EXPECT_EQ(parsed.jobs(1).id(), "job-b");
  std::ostringstream empty;
  ASSERT_TRUE(PrintJsonArray(empty, std::vector<const google::protobuf::Message*>{}).ok());
  EXPECT_EQ(empty.str(), "[]\n");
}

}  // namespace
}  // namespace gantry::cli
