#include "clients/cli/cli_config.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/field_checks.h"
#include "base/secret_file.h"
#include "base/status_macros.h"

namespace gantry::cli {

namespace {

// Config files are a few lines; anything larger is a mistake.
constexpr size_t kMaxConfigBytes = 1 << 20;

// The text and the mode come from one open of the file (ReadRegularFile).
absl::StatusOr<ConfigFileRead> ReadConfigFile(const std::string& path) {
  absl::StatusOr<RegularFileRead> file = ReadRegularFile(path, kMaxConfigBytes);
  if (!file.ok()) {
    if (absl::IsNotFound(file.status())) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", path, ": ", file.status().message()));
  }
  if (file->bytes.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is larger than ", kMaxConfigBytes,
                                                   " bytes; a config file is a few lines"));
  }
  ConfigFileRead read;
  read.private_enough = CheckSecretFileMode(file->st, "config file", path);
  read.contents = std::move(file->bytes);
  return read;
}

}  // namespace

ConfigEnvironment SystemEnvironment() {
  ConfigEnvironment env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  env.read_config = ReadConfigFile;
  return env;
}

absl::StatusOr<CliConfig> ParseConfigFile(const std::string& path, const std::string& contents) {
  CliConfig config;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", path, ":", line_number, ": expected 'key = value'"));
    }
    std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    // Allow the value to be quoted.
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    const std::string source = absl::StrCat("file ", path);
    if (key == "server") {
      config.server = value;
      config.server_source = source;
    } else if (key == "token") {
      config.token = value;
      config.token_source = source;
    } else if (key == "ca_cert") {
      config.ca_cert = value;
      config.ca_cert_source = source;
    } else if (key == "allow_plaintext") {
      std::optional<bool> allow = checks::ParseBoolWord(value);
      if (!allow.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("config ", path, ":", line_number,
                                                       ": allow_plaintext must be true or false"));
      }
      config.allow_plaintext = *allow;
      config.allow_plaintext_source = source;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", path, ":", line_number, ": unknown key '", key,
                       "' (known: server, token, ca_cert, allow_plaintext)"));
    }
  }
  return config;
}

absl::StatusOr<CliConfig> ResolveConfig(const ConfigFlags& flags, const ConfigEnvironment& env) {
  // Which file, and whether its absence is an error.
  std::string path;
  bool explicit_path = true;
  if (flags.config_path.has_value()) {
    path = *flags.config_path;
  } else if (auto from_env = env.getenv("GANTRY_CONFIG");
             from_env.has_value() && !from_env->empty()) {
    path = *from_env;
  } else if (auto home = env.getenv("HOME"); home.has_value() && !home->empty()) {
    path = absl::StrCat(*home, "/.config/gantry/config");
    explicit_path = false;
  }

  CliConfig file_config;
  if (!path.empty()) {
    absl::StatusOr<ConfigFileRead> contents = env.read_config(path);
    if (contents.ok()) {
      ASSIGN_OR_RETURN(file_config, ParseConfigFile(path, contents->contents));
      // A token at rest is read only from a private file, as the programs' secret files are.
      if (!file_config.token.empty() && !contents->private_enough.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat(contents->private_enough.message(), " (it holds a token)"));
      }
    } else if (explicit_path || !absl::IsNotFound(contents.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat("config file: ", contents.status().message()));
    }
  }

  CliConfig config;
  auto pick = [&](const std::optional<std::string>& flag, const char* env_name,
                  const std::string& file_value, const std::string& file_source, std::string* value,
                  std::string* source) {
    if (flag.has_value()) {
      *value = *flag;
      *source = "flag";
      return;
    }
    if (auto from_env = env.getenv(env_name); from_env.has_value() && !from_env->empty()) {
      *value = *from_env;
      *source = absl::StrCat("env ", env_name);
      return;
    }
    if (!file_value.empty()) {
      *value = file_value;
      *source = file_source;
    }
  };
  pick(flags.server, "GANTRY_SERVER", file_config.server, file_config.server_source, &config.server,
       &config.server_source);
  pick(flags.token, "GANTRY_TOKEN", file_config.token, file_config.token_source, &config.token,
       &config.token_source);
  pick(flags.ca_cert, "GANTRY_CA_CERT", file_config.ca_cert, file_config.ca_cert_source,
       &config.ca_cert, &config.ca_cert_source);
  if (flags.allow_plaintext.has_value()) {
    config.allow_plaintext = *flags.allow_plaintext;
    config.allow_plaintext_source = "flag";
  } else if (auto from_env = env.getenv("GANTRY_ALLOW_PLAINTEXT");
             from_env.has_value() && !from_env->empty()) {
    std::optional<bool> allow = checks::ParseBoolWord(*from_env);
    if (!allow.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GANTRY_ALLOW_PLAINTEXT must be 1, true, 0 or false, not '", *from_env, "'"));
    }
    config.allow_plaintext = *allow;
    config.allow_plaintext_source = "env GANTRY_ALLOW_PLAINTEXT";
  } else if (!file_config.allow_plaintext_source.empty()) {
    config.allow_plaintext = file_config.allow_plaintext;
    config.allow_plaintext_source = file_config.allow_plaintext_source;
  }
  if (config.server.empty()) {
    config.server = kDefaultServer;
    config.server_source = "default";
  }
  return config;
}

}  // namespace gantry::cli
