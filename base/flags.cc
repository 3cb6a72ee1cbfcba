#include "base/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "base/build_info.h"

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

// --version anywhere before "--": prints GantryVersionText for the program's base name and exits 0.
void HandleVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    if (arg != "--version") continue;
    std::string program = argc > 0 && argv[0] != nullptr ? argv[0] : "gantry";
    if (const size_t slash = program.rfind('/'); slash != std::string::npos) {
      program = program.substr(slash + 1);
    }
    std::fputs(GantryVersionText(program).c_str(), stdout);
    std::fflush(stdout);
    std::exit(0);
  }
}

}  // namespace

std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage) {
  HandleVersion(argc, argv);
  absl::SetProgramUsageMessage(usage);
  std::vector<std::string> normalized = NormalizeFlagNames(argc, argv);
  std::vector<char*> pointers;
  pointers.reserve(normalized.size());
  for (std::string& arg : normalized) pointers.push_back(arg.data());
  const std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  return std::vector<std::string>(rest.begin() + 1, rest.end());
}

namespace {

// Sets the flag named in `arg` (already without its leading dashes, name not yet normalized) from
// its "=value", the next argument of argv (advancing *i) or, for a bool, "true"/"false".
absl::Status ParseOneFlag(const std::string& arg, int argc, char** argv, int* i) {
  const size_t eq = arg.find('=');
  const std::string written = arg.substr(0, eq);
  std::string name = written;
  std::replace(name.begin(), name.end(), '-', '_');
  const auto unknown = [&] { return absl::InvalidArgumentError("unknown flag --" + written); };
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  std::string value;
  if (flag == nullptr) {
    // --noname for a bool flag.
    if (name.rfind("no", 0) != 0 || eq != std::string::npos) return unknown();
    flag = absl::FindCommandLineFlag(name.substr(2));
    if (flag == nullptr || !flag->IsOfType<bool>()) return unknown();
    value = "false";
  } else if (eq != std::string::npos) {
    value = arg.substr(eq + 1);
  } else if (flag->IsOfType<bool>()) {
    value = "true";
  } else if (*i + 1 < argc && std::string(argv[*i + 1]).rfind("--", 0) != 0) {
    value = argv[++*i];
  } else {
    return absl::InvalidArgumentError("--" + written + ": needs a value");
  }
  std::string error;
  if (!flag->ParseFrom(value, &error)) {
    return absl::InvalidArgumentError("--" + written + ": " + error);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv, bool* help) {
  HandleVersion(argc, argv);
  *help = false;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      positional.insert(positional.end(), argv + i + 1, argv + argc);
      break;
    }
    if (arg == "--help" || arg == "-h") {
      *help = true;
    } else if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      if (absl::Status status = ParseOneFlag(arg.substr(2), argc, argv, &i); !status.ok()) {
        return status;
      }
    } else {
      positional.push_back(arg);
    }
  }
  return positional;
}

}  // namespace gantry
