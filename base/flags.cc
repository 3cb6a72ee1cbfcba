#include "base/flags.h"

#include <algorithm>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"

namespace gantry {
namespace {

// Abseil flag names are identifiers: rewrite dashes in a flag's name (never in its value, never
// after "--") to underscores.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> out(argv, argv + argc);
  for (size_t i = 1; i < out.size(); ++i) {
    std::string& arg = out[i];
    if (arg == "--") break;
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + 2, arg.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
  }
  return out;
}

}  // namespace

std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage) {
  absl::SetProgramUsageMessage(usage);
  std::vector<std::string> normalized = NormalizeFlagNames(argc, argv);
  std::vector<char*> pointers;
  pointers.reserve(normalized.size());
  for (std::string& arg : normalized) pointers.push_back(arg.data());
  const std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  return std::vector<std::string>(rest.begin() + 1, rest.end());
}

}  // namespace gantry
