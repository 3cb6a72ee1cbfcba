// SearchSpace validation, assignment checks and the text form of assignments.
#include "studies/search_space.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gantry::studies {
namespace {

using ::testing::HasSubstr;

SearchSpace MixedSpace() {
  return SearchSpace({{"lr", ParameterKind::kLogContinuous, 1e-5, 1e-1, {}},
                      {"dropout", ParameterKind::kContinuous, 0, 0.5, {}},
                      {"layers", ParameterKind::kInteger, 1, 8, {}},
                      {"optimizer", ParameterKind::kCategorical, 0, 0, {"sgd", "adam"}}});
}

void ExpectInvalid(const SearchSpace& space, const std::string& fragment) {
  const absl::Status status = space.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << fragment;
  EXPECT_THAT(std::string(status.message()), HasSubstr(fragment));
}

TEST(SearchSpaceTest, ValidSpaceValidates) { EXPECT_TRUE(MixedSpace().Validate().ok()); }

TEST(SearchSpaceTest, ValidateNamesTheParameterAndTheFault) {
  ExpectInvalid(SearchSpace(), "no parameters");
  ExpectInvalid(SearchSpace({{"lr", ParameterKind::kContinuous, 1, 1, {}}}),
                "\"lr\" (continuous): empty or inverted range [1, 1]");
  ExpectInvalid(SearchSpace({{"lr", ParameterKind::kContinuous, 2, 1, {}}}), "inverted");
  ExpectInvalid(SearchSpace({{"lr", ParameterKind::kLogContinuous, 0, 1, {}}}),
                "\"lr\" (log-continuous): log scale needs low > 0");
  ExpectInvalid(SearchSpace({{"lr", ParameterKind::kLogContinuous, -1, 1, {}}}), "low > 0");
  ExpectInvalid(SearchSpace({{"a", ParameterKind::kContinuous, 0, 1, {}},
                             {"a", ParameterKind::kInteger, 0, 3, {}}}),
                "\"a\" is defined twice");
  ExpectInvalid(SearchSpace({{"opt", ParameterKind::kCategorical, 0, 0, {}}}),
                "\"opt\" (categorical): no choices");
  ExpectInvalid(SearchSpace({{"opt", ParameterKind::kCategorical, 0, 0, {"sgd", "sgd"}}}),
                "choice \"sgd\" appears twice");
  ExpectInvalid(SearchSpace({{"opt", ParameterKind::kCategorical, 0, 0, {"sgd", ""}}}),
                "an empty choice");
  ExpectInvalid(SearchSpace({{"opt", ParameterKind::kCategorical, 0, 0, {"a,b"}}}), "','");
  ExpectInvalid(SearchSpace({{"n", ParameterKind::kInteger, 0.5, 4, {}}}),
                "\"n\" (integer): bounds [0.5, 4] must be integers");
  ExpectInvalid(SearchSpace({{"n", ParameterKind::kInteger, 1, 4, {"x"}}}),
                "choices are for categorical parameters only");
  ExpectInvalid(
      SearchSpace(
          {{"x", ParameterKind::kContinuous, 0, std::numeric_limits<double>::infinity(), {}}}),
      "finite");
  ExpectInvalid(SearchSpace({{"x", ParameterKind::kContinuous, std::nan(""), 1, {}}}), "finite");
  ExpectInvalid(SearchSpace({{"x", ParameterKind::kContinuous, -1e308, 1e308, {}}}),
                "wider than a double holds");
  ExpectInvalid(SearchSpace({{"", ParameterKind::kContinuous, 0, 1, {}}}), "empty name");
  ExpectInvalid(SearchSpace({{"a=b", ParameterKind::kContinuous, 0, 1, {}}}), "use only letters");
  std::vector<Parameter> many;
  for (size_t i = 0; i <= SearchSpace::kMaxParameters; ++i) {
    many.push_back({"p" + std::to_string(i), ParameterKind::kContinuous, 0, 1, {}});
  }
  ExpectInvalid(SearchSpace(many), "at most 64");
}

TEST(SearchSpaceTest, CheckAssignmentNamesTheOffendingParameter) {
  const SearchSpace space = MixedSpace();
  Assignment good = {
      {"lr", 1e-3}, {"dropout", 0.1}, {"layers", int64_t{3}}, {"optimizer", std::string("adam")}};
  EXPECT_TRUE(space.CheckAssignment(good).ok());

  Assignment missing = good;
  missing.erase("layers");
  EXPECT_THAT(std::string(space.CheckAssignment(missing).message()),
              HasSubstr("\"layers\" (integer): missing"));
  Assignment unknown = good;
  unknown["momentum"] = 0.9;
  EXPECT_THAT(std::string(space.CheckAssignment(unknown).message()),
              HasSubstr("unknown parameter \"momentum\""));
  Assignment outside = good;
  outside["lr"] = 0.5;
  EXPECT_THAT(std::string(space.CheckAssignment(outside).message()), HasSubstr("outside"));
  Assignment wrong_type = good;
  wrong_type["layers"] = 3.0;
  EXPECT_THAT(std::string(space.CheckAssignment(wrong_type).message()),
              HasSubstr("must be an integer"));
  Assignment bad_choice = good;
  bad_choice["optimizer"] = std::string("lamb");
  EXPECT_THAT(std::string(space.CheckAssignment(bad_choice).message()),
              HasSubstr("not one of the choices"));
  Assignment nan = good;
  nan["dropout"] = std::nan("");
  EXPECT_FALSE(space.CheckAssignment(nan).ok());
}

TEST(SearchSpaceTest, FormatAndParseRoundTripExactly) {
  const SearchSpace space = MixedSpace();
  Assignment assignment = {{"lr", 0.1 * 0.3 / 7},
                           {"dropout", 1.0 / 3},
                           {"layers", int64_t{8}},
                           {"optimizer", std::string("sgd")}};
  const std::string text = FormatAssignment(assignment);
  EXPECT_THAT(text, HasSubstr("layers=8,lr="));
  absl::StatusOr<Assignment> parsed = space.ParseAssignment(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, assignment);
  EXPECT_EQ(FormatParameterValue(0.001), "0.001");
  EXPECT_EQ(FormatParameterValue(int64_t{-4}), "-4");
}

TEST(SearchSpaceTest, ParseRejectsBadText) {
  const SearchSpace space = MixedSpace();
  EXPECT_THAT(std::string(space.ParseValue("layers", "3.5").status().message()),
              HasSubstr("not an integer"));
  EXPECT_THAT(std::string(space.ParseValue("lr", "nan").status().message()),
              HasSubstr("not a finite number"));
  EXPECT_THAT(std::string(space.ParseValue("lr", "1").status().message()), HasSubstr("outside"));
  EXPECT_THAT(std::string(space.ParseValue("depth", "1").status().message()),
              HasSubstr("unknown parameter"));
  EXPECT_THAT(std::string(space.ParseAssignment("lr").status().message()), HasSubstr("name=value"));
  EXPECT_THAT(std::string(space.ParseAssignment("lr=0.001,lr=0.002").status().message()),
              HasSubstr("twice"));
  EXPECT_THAT(std::string(space.ParseAssignment("lr=0.001").status().message()),
              HasSubstr("missing"));
}

TEST(SearchSpaceTest, KindNamesRoundTrip) {
  for (ParameterKind kind : {ParameterKind::kContinuous, ParameterKind::kLogContinuous,
                             ParameterKind::kInteger, ParameterKind::kCategorical}) {
    EXPECT_EQ(*ParseParameterKind(ParameterKindName(kind)), kind);
  }
  EXPECT_THAT(std::string(ParseParameterKind("real").status().message()),
              HasSubstr("use continuous, log-continuous, integer or categorical"));
}

}  // namespace
}  // namespace gantry::studies
