#include "clients/cli/cli_app.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/build_info.h"
#include "base/safe_text.h"
#include "base/status_details.h"
#include "clients/cli/arg_parser.h"
#include "clients/cli/connection.h"
#include "clients/cli/table.h"
#include "clients/cli/terminal_safe_buffer.h"

namespace gantry::cli {
namespace {

constexpr double kDefaultTimeoutSeconds = 30;

struct GlobalValues {
  ConfigFlags config;
  bool json = false;
  bool help = false;
  bool version = false;
  std::optional<std::string> timeout;
};

// Removes the global flags from `args` (anywhere before "--") into `values`: CLI11 takes the
// global flags (and -h/--help, --version) and leaves every other word, in order, for the command.
absl::StatusOr<std::vector<std::string>> ExtractGlobals(const std::vector<std::string>& args,
                                                        GlobalValues* values) {
  CLI::App app("gantry", "gantry");
  app.set_help_flag();  // help is printed by CliApp, for the command it names
  app.allow_extras(true);
  CLI::Option* help = app.add_flag("-h,--help");
  CLI::Option* version = app.add_flag("--version");
  const std::vector<FlagSpec> globals = GlobalFlags();
  std::vector<CLI::Option*> options;
  for (const FlagSpec& spec : globals) {
    CLI::Option* option = spec.metavar.empty() ? app.add_flag("--" + spec.name)
                                               : app.add_option("--" + spec.name)->expected(1);
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    options.push_back(option);
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& error) {
    return MissingValueError(error.what(), globals);  // a global flag at the end of the line
  } catch (const CLI::ParseError& error) {
    return UsageError(error.what());
  }
  values->help = help->count() > 0;
  values->version = version->count() > 0;
  for (size_t i = 0; i < globals.size(); ++i) {
    const std::vector<std::string>& given = options[i]->results();
    if (given.empty()) continue;
    const std::string& name = globals[i].name;
    const std::string& value = given.back();  // the last one wins
    if (name == "json") values->json = value == "true";
    if (name == "server") values->config.server = value;
    if (name == "token") values->config.token = value;
    if (name == "ca-cert") values->config.ca_cert = value;
    if (name == "allow-plaintext") values->config.allow_plaintext = value == "true";
    if (name == "config") values->config.config_path = value;
    if (name == "timeout") values->timeout = value;
  }
  return app.remaining();
}

void PrintFlags(const std::vector<FlagSpec>& flags, std::ostream& out) {
  std::vector<std::vector<std::string>> rows;
  size_t width = 0;
  for (const auto& flag : flags) {
    std::string left =
        absl::StrCat("  --", flag.name, flag.metavar.empty() ? "" : " ", flag.metavar);
    width = std::max(width, left.size());
    rows.push_back({left, absl::StrCat(flag.help, flag.repeatable ? " [repeatable]" : "")});
  }
  for (const auto& row : rows) {
    out << row[0] << std::string(width - row[0].size() + 2, ' ') << row[1] << '\n';
  }
}

// Prints a usage error (and a hint where there is one); returns the usage exit code.
int UsageFailure(std::ostream& err, const absl::Status& status, const std::string& hint) {
  err << "gantry: usage: " << status.message() << '\n';
  if (!hint.empty()) err << hint << '\n';
  return kExitUsage;
}

// The command words: the leading arguments up to the first flag.
std::vector<std::string> CommandWords(const std::vector<std::string>& args) {
  std::vector<std::string> words;
  for (const auto& token : args) {
    if (!token.empty() && token[0] == '-') break;
    words.push_back(token);
  }
  return words;
}

// The --timeout of ordinary calls, default kDefaultTimeoutSeconds; a usage error if not positive.
absl::StatusOr<double> TimeoutSeconds(const GlobalValues& globals) {
  if (!globals.timeout.has_value()) return kDefaultTimeoutSeconds;
  absl::StatusOr<double> value = ParseDoubleFlag("timeout", *globals.timeout);
  if (!value.ok() || *value <= 0) {
    return UsageError(absl::StrCat("--timeout: '", *globals.timeout, "' is not a positive number"));
  }
  return *value;
}

// Parses the command's own arguments and runs it; the connection is made on its first use.
int RunCommand(const Command& command, const std::vector<std::string>& command_args,
               const GlobalValues& globals, const ConfigEnvironment& env, bool err_is_tty,
               std::ostream& out, std::ostream& err) {
  const std::string name = absl::StrJoin(command.path, " ");
  const std::string hint = absl::StrCat("Run 'gantry ", name, " --help' for usage.");
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(name, command_args, command.flags, command.positionals);
  if (!parsed.ok()) return UsageFailure(err, parsed.status(), hint);
  absl::StatusOr<double> timeout_seconds = TimeoutSeconds(globals);
  if (!timeout_seconds.ok()) return UsageFailure(err, timeout_seconds.status(), hint);

  std::unique_ptr<Connection> connection;
  // Human-readable output is made terminal-safe in one place; JSON is escaped by its encoder.
  TerminalSafeBuffer safe_buffer(out.rdbuf());
  std::ostream safe_out(&safe_buffer);
  CommandContext context{*parsed, globals.json, err_is_tty, globals.json ? out : safe_out,
                         err,     nullptr};
  context.connect = [&]() -> absl::StatusOr<Connection*> {
    if (connection == nullptr) {
      absl::StatusOr<CliConfig> config = ResolveConfig(globals.config, env);
      if (!config.ok()) return config.status();
      absl::StatusOr<std::unique_ptr<Connection>> created =
          Connection::Create(*config, absl::Seconds(*timeout_seconds));
      if (!created.ok()) return created.status();
      connection = std::move(*created);
    }
    return connection.get();
  };
  absl::Status status = command.run(context);
  context.out.flush();
  out.flush();
  if (!status.ok()) {
    if (IsUsageError(status)) return UsageFailure(err, status, hint);
    err << "gantry: " << absl::StatusCodeToString(status.code()) << ": "
        << EscapeControlText(status.message()) << '\n';
    for (const std::string& line : DescribeStatusDetails(status)) {
      err << EscapeControlText(line) << '\n';
    }
    // The id the server logged the calls of this command under (for the operator).
    if (connection != nullptr) err << "gantry: request id " << connection->request_id() << '\n';
    return kExitError;
  }
  return context.exit_code;
}

}  // namespace

std::string UsageLine(const Command& command) {
  std::string line = absl::StrCat("gantry ", absl::StrJoin(command.path, " "));
  for (const auto& positional : command.positionals) {
    std::string name = positional.variadic ? absl::StrCat(positional.name, "...") : positional.name;
    absl::StrAppend(&line, " ", positional.optional ? absl::StrCat("[", name, "]") : name);
  }
  if (!command.flags.empty()) absl::StrAppend(&line, " [flags]");
  return line;
}

std::vector<FlagSpec> GlobalFlags() {
  return {
      {"server", "HOST:PORT", "gantry-server address (env GANTRY_SERVER; default 127.0.0.1:50051)"},
      {"token", "TOKEN", "API token (env GANTRY_TOKEN)"},
      {"ca-cert", "FILE", "PEM CA bundle: connect with TLS (env GANTRY_CA_CERT)"},
      {"allow-plaintext", "",
       "send the token without TLS to a server off this host (env GANTRY_ALLOW_PLAINTEXT=1; a "
       "trusted private network only)"},
      {"config", "FILE", "config file (env GANTRY_CONFIG; default ~/.config/gantry/config)"},
      {"timeout", "SECONDS", "deadline of each ordinary call (default 30)"},
      {"json", "", "print protobuf JSON instead of tables"},
  };
}

const Command* CliApp::Find(const std::vector<std::string>& words, size_t* consumed) const {
  const Command* best = nullptr;
  *consumed = 0;
  for (const auto& command : commands_) {
    const auto& path = command.path;
    if (path.size() > words.size() || path.size() <= *consumed) continue;
    if (std::equal(path.begin(), path.end(), words.begin())) {
      best = &command;
      *consumed = path.size();
    }
  }
  return best;
}

bool CliApp::PrintGroupHelp(const std::vector<std::string>& prefix, std::ostream& out) const {
  Table table({"COMMAND", "DESCRIPTION"});
  for (const auto& command : commands_) {
    if (command.path.size() > prefix.size() &&
        std::equal(prefix.begin(), prefix.end(), command.path.begin())) {
      table.AddRow({absl::StrCat("gantry ", absl::StrJoin(command.path, " ")), command.summary});
    }
  }
  if (table.rows() == 0) return false;
  out << "Commands under 'gantry " << absl::StrJoin(prefix, " ") << "':\n";
  table.Render(out);
  return true;
}

void CliApp::PrintUsage(std::ostream& out) const {
  out << "gantry: command-line client of the gantry training service for calorimeter-shower "
         "GANs\n\n"
      << "Usage: gantry <command> [arguments] [flags]\n\nCommands:\n";
  size_t width = 0;
  for (const auto& command : commands_) {
    width = std::max(width, absl::StrJoin(command.path, " ").size());
  }
  for (const auto& command : commands_) {
    std::string name = absl::StrJoin(command.path, " ");
    out << "  " << name << std::string(width - name.size() + 2, ' ') << command.summary << '\n';
  }
  out << "\nGlobal flags (anywhere on the line):\n";
  std::vector<FlagSpec> flags = GlobalFlags();
  flags.push_back({"help, -h", "", "show help (also 'gantry help <command>')"});
  flags.push_back({"version", "", "print the version and build info and exit"});
  PrintFlags(flags, out);
  out << "\nRun 'gantry <command> --help' for a command's arguments and flags.\n"
      << "Exit codes: 0 success, 1 error reported by the server or the system, 2 usage error.\n";
}

void CliApp::PrintCommandHelp(const Command& command, std::ostream& out) const {
  out << "Usage: " << UsageLine(command) << "\n\n" << command.summary << "\n";
  if (!command.description.empty()) out << "\n" << command.description << "\n";
  if (!command.positionals.empty()) {
    out << "\nArguments:\n";
    size_t width = 0;
    for (const auto& positional : command.positionals)
      width = std::max(width, positional.name.size());
    for (const auto& positional : command.positionals) {
      out << "  " << positional.name << std::string(width - positional.name.size() + 2, ' ')
          << positional.help << '\n';
    }
  }
  if (!command.flags.empty()) {
    out << "\nFlags:\n";
    PrintFlags(command.flags, out);
  }
  out << "\nGlobal flags: --server, --token, --ca-cert, --allow-plaintext, --config, --timeout, "
         "--json "
         "(see 'gantry help').\n";
}

int CliApp::Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                bool err_is_tty) const {
  GlobalValues globals;
  absl::StatusOr<std::vector<std::string>> rest = ExtractGlobals(args, &globals);
  if (!rest.ok()) return UsageFailure(err, rest.status(), "Run 'gantry help' for usage.");
  if (globals.version) {
    out << GantryVersionText("gantry");
    return kExitOk;
  }

  const std::vector<std::string> words = CommandWords(*rest);
  if (words.empty()) {
    if (globals.help) {
      PrintUsage(out);
      return kExitOk;
    }
    PrintUsage(err);
    return kExitUsage;
  }
  if (words[0] == "help") return RunHelp({words.begin() + 1, words.end()}, out, err);

  size_t consumed = 0;
  const Command* command = Find(words, &consumed);
  if (command == nullptr) return ReportUnknownCommand(words, globals.help, out, err);
  if (globals.help) {
    PrintCommandHelp(*command, out);
    return kExitOk;
  }
  return RunCommand(*command, {rest->begin() + consumed, rest->end()}, globals, env_, err_is_tty,
                    out, err);
}

int CliApp::RunHelp(const std::vector<std::string>& topic, std::ostream& out,
                    std::ostream& err) const {
  if (topic.empty()) {
    PrintUsage(out);
    return kExitOk;
  }
  size_t consumed = 0;
  const Command* command = Find(topic, &consumed);
  if (command != nullptr && consumed == topic.size()) {
    PrintCommandHelp(*command, out);
    return kExitOk;
  }
  if (PrintGroupHelp(topic, out)) return kExitOk;
  return UsageFailure(err,
                      UsageError(absl::StrCat("unknown command '", absl::StrJoin(topic, " "), "'")),
                      "Run 'gantry help' for the list of commands.");
}

size_t CliApp::GroupPrefixLength(const std::vector<std::string>& words) const {
  size_t group = 0;
  for (size_t n = words.size(); n > 0 && group == 0; --n) {
    for (const auto& c : commands_) {
      if (c.path.size() > n && std::equal(words.begin(), words.begin() + n, c.path.begin())) {
        group = n;
      }
    }
  }
  return group;
}

int CliApp::ReportUnknownCommand(const std::vector<std::string>& words, bool help,
                                 std::ostream& out, std::ostream& err) const {
  // A group name alone ("gantry jobs") or a typo below a group ("gantry jobs lst").
  const size_t group = GroupPrefixLength(words);
  if (group == 0) {
    return UsageFailure(err, UsageError(absl::StrCat("unknown command '", words[0], "'")),
                        "Run 'gantry help' for the list of commands.");
  }
  std::vector<std::string> prefix(words.begin(), words.begin() + group);
  if (group == words.size() && help) {
    PrintGroupHelp(prefix, out);
    return kExitOk;
  }
  if (group == words.size()) {
    err << "gantry: usage: 'gantry " << absl::StrJoin(prefix, " ") << "' needs a subcommand\n";
  } else {
    err << "gantry: usage: unknown command 'gantry "
        << absl::StrJoin(words.begin(), words.begin() + group + 1, " ") << "'\n";
  }
  PrintGroupHelp(prefix, err);
  return kExitUsage;
}

}  // namespace gantry::cli
