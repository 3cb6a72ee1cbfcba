// BuildValidateCommand: gantry-validate's flag values and files into a ValidateCommand.
#include "workers/physics/validate_flags.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace gantry::physics {
namespace {

ValidateFlags TwoFiles() {
  ValidateFlags flags;
  flags.files = {"ref.h5", "gen.h5"};
  return flags;
}

TEST(ValidateFlagsTest, BuildsTheBinningFromTheLists) {
  ValidateFlags flags = TwoFiles();
  flags.energies = "50,100";
  flags.half_width = 7;
  flags.theta = "90";
  flags.json = "r.json";
  absl::StatusOr<ValidateCommand> command = BuildValidateCommand(flags);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_FALSE(command->summary);
  EXPECT_EQ(command->reference, "ref.h5");
  EXPECT_EQ(command->generated, "gen.h5");
  EXPECT_EQ(command->json, "r.json");
  EXPECT_EQ(command->options.energy_centres_gev, (std::vector<double>{50, 100}));
  EXPECT_EQ(command->options.energy_half_width_gev, 7);
  ASSERT_EQ(command->options.theta_centres_rad.size(), 1u);
  EXPECT_NEAR(command->options.theta_centres_rad[0], M_PI / 2, 1e-12);
}

TEST(ValidateFlagsTest, RefusesBadListsBinningWithSummaryAndOneFile) {
  ValidateFlags flags = TwoFiles();
  flags.edges = "10,x";
  EXPECT_NE(BuildValidateCommand(flags).status().message().find("--edges"), std::string::npos);
  flags = TwoFiles();
  flags.summary = true;
  flags.energies = "50";
  EXPECT_NE(BuildValidateCommand(flags).status().message().find("--energies"), std::string::npos);
  flags = TwoFiles();
  flags.summary = true;
  flags.files.pop_back();
  EXPECT_EQ(BuildValidateCommand(flags).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::physics
