// CliConfig: where the CLI connects and as whom, resolved from flags > environment > config file.
#ifndef GANTRY_CLIENTS_CLI_CLI_CONFIG_H_
#define GANTRY_CLIENTS_CLI_CLI_CONFIG_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace gantry::cli {

// The server address used when nothing else names one.
inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

struct CliConfig {
  std::string server;   // host:port
  std::string token;    // API token sent as "authorization: Bearer <token>"; may be empty
  std::string ca_cert;  // path of a PEM CA bundle; non-empty = TLS
  // Send the token over a plaintext channel to a server that is not on this host (loopback or a
  // unix socket); refused otherwise (connection.h, CheckTransport).
  bool allow_plaintext = false;
  // Where each value came from ("flag", "env", "file <path>", "default"), for `gantry config`.
  std::string server_source;
  std::string token_source;
  std::string ca_cert_source;
  std::string allow_plaintext_source;
};

// Values given as command-line flags (unset = not given).
struct ConfigFlags {
  std::optional<std::string> server;
  std::optional<std::string> token;
  std::optional<std::string> ca_cert;
  std::optional<bool> allow_plaintext;     // --allow-plaintext
  std::optional<std::string> config_path;  // --config
};

// What reading a config file found: its text, and whether the file may hold a secret
// (base/secret_file.h CheckSecretFileMode), both from one open of the file, so that the mode
// checked is the mode of the file that was read.
struct ConfigFileRead {
  std::string contents;
  absl::Status private_enough;  // OK when it may hold a token; else why not
};

// The outside world the resolver reads; injectable so tests need no real environment or files.
struct ConfigEnvironment {
  // Returns the environment variable's value, or nullopt when unset.
  std::function<std::optional<std::string>(const std::string&)> getenv;
  // Returns the config file, NOT_FOUND when it does not exist, another error when unreadable.
  std::function<absl::StatusOr<ConfigFileRead>(const std::string&)> read_config;
};

// The real process environment and file system.
ConfigEnvironment SystemEnvironment();

// Parses the config file format: `key = value` lines (keys server, token, ca_cert, allow_plaintext
// = true|false), '#' comments
// and blank lines ignored. Unknown keys and malformed lines are errors naming `path` and the line
// number.
absl::StatusOr<CliConfig> ParseConfigFile(const std::string& path, const std::string& contents);

// Resolves the configuration. The file is --config, else $GANTRY_CONFIG, else
// $HOME/.config/gantry/config (absent default file = no file; an explicitly named missing file is
// an error). Each value: flag, else GANTRY_SERVER / GANTRY_TOKEN / GANTRY_CA_CERT /
// GANTRY_ALLOW_PLAINTEXT (1, true, 0 or false), else the file, else the default (server only).
// A config file that holds a token must be private (mode 0600): FAILED_PRECONDITION otherwise,
// whichever token wins.
absl::StatusOr<CliConfig> ResolveConfig(const ConfigFlags& flags, const ConfigEnvironment& env);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_CLI_CONFIG_H_
