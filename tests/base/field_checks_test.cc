// The field-check building blocks that no request check exercises on its own.
#include "base/field_checks.h"

#include <gtest/gtest.h>

namespace gantry::checks {
namespace {

TEST(ParseBoolWordTest, TrueFalseOneZeroAndNothingElse) {
  EXPECT_EQ(ParseBoolWord("true"), true);
  EXPECT_EQ(ParseBoolWord("1"), true);
  EXPECT_EQ(ParseBoolWord("false"), false);
  EXPECT_EQ(ParseBoolWord("0"), false);
  for (const char* other : {"", "TRUE", "yes", "on", " 1", "1 ", "01", "truex"}) {
    EXPECT_EQ(ParseBoolWord(other), std::nullopt) << "'" << other << "'";
  }
}

}  // namespace
}  // namespace gantry::checks
