// gantry: the command-line client of gantry-server. Everything but process setup lives in CliApp.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "clients/cli/cli_app.h"
#include "clients/cli/command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  gantry::cli::CliApp app(gantry::cli::AllCommands(), gantry::cli::SystemEnvironment());
  return app.Run(args, std::cout, std::cerr, isatty(STDERR_FILENO) != 0);
}
