// src/cli/command.hpp: how a subcommand plugs into the `tessel` tool.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace tessel::cli {

/// A subcommand added to the tool: its CLI11 node (owned by the tool) and what
/// runs when the command line selects it. `run` returns the process exit code
/// (see exit_code in common.hpp) and reports its own errors.
struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// command add_NAME_command(CLI::App& tool): adds subcommand NAME to `tool`,
// one per line of commands.def.
#define TESSEL_CLI_COMMAND(name) command add_##name##_command(CLI::App& tool);
#include "commands.def"
#undef TESSEL_CLI_COMMAND

}  // namespace tessel::cli
