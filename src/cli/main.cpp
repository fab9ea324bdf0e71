// The `tessel` tool: sets up CLI11, registers every subcommand of
// commands.def, and runs the one the command line selects.
#include "command.hpp"
#include "common.hpp"

#include <tessel/did_you_mean.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#ifndef TESSEL_VERSION
#error "TESSEL_VERSION must be defined by the build (src/cli/CMakeLists.txt)"
#endif

namespace {

/// "WHO: unknown option 'ARG'; did you mean '--x'?" with the nearest long
/// option of `app` (a short one gets no hint: any letter is one edit from
/// every other).
std::string unknown_option(const CLI::App& app, const std::string& who, const std::string& arg) {
  std::vector<std::string> names;
  for (const auto* option : app.get_options())
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
  const auto name = arg.substr(0, arg.find('='));
  const auto hint = name.starts_with("--") ? tessel::did_you_mean(name, names) : std::string();
  return who + ": unknown option '" + name + "'" + (hint.empty() ? "" : "; " + hint);
}

/// For CLI11's "The following arguments were not expected: 3 --budjet":
/// "tessel tune: unknown option '--budjet'; did you mean '--budget'?", for
/// the first argument `command` left that looks like an option; "" when
/// none of what is left is one.
std::string unknown_option(const CLI::App& command) {
  for (const auto& arg : command.remaining())
    if (arg.size() >= 2 && arg[0] == '-' && (arg[1] < '0' || arg[1] > '9'))
      return unknown_option(command, "tessel " + command.get_name(), arg);
  return {};
}

bool is_option_of(const CLI::App& app, const std::string& arg) {
  for (const auto* option : app.get_options())
    if (option->check_name(arg)) return true;
  return false;
}

int run(int argc, char** argv) {
  using namespace tessel::cli;
  command_line().assign(argv, argv + argc);
  CLI::App tool{"tessel: auto-tuning for compute kernels", "tessel"};
  tool.set_version_flag("--version", "tessel " TESSEL_VERSION, "Print the version and exit");
  tool.require_subcommand(1);
  tool.footer(
      "Exit codes: 0 success, 1 bad input (diagnostics, empty space, unreadable file),\n"
      "2 usage error, 3 internal error. Run 'tessel COMMAND --help' for a command's options.");

  std::vector<command> commands;
#define TESSEL_CLI_COMMAND(name) commands.push_back(add_##name##_command(tool));
#include "commands.def"
#undef TESSEL_CLI_COMMAND

  // CLI11 answers a misspelt command with "A subcommand is required".
  std::vector<std::string> names;
  for (const auto* c : tool.get_subcommands({})) names.push_back(c->get_name());
  if (argc > 1 && argv[1][0] != '-' && std::ranges::find(names, argv[1]) == names.end()) {
    const auto hint = tessel::did_you_mean(argv[1], names);
    std::fprintf(stderr,
                 "tessel: unknown command '%s'%s%s\nRun with --help for more information.\n",
                 argv[1], hint.empty() ? "" : "; ", hint.c_str());
    return exit_code::usage;
  }
  // And an option before any command with "A subcommand is required".
  if (argc > 1 && argv[1][0] == '-' && !is_option_of(tool, argv[1])) {
    std::fprintf(stderr,
                 "%s (a command's options follow it: tessel COMMAND [OPTIONS])\nRun with --help "
                 "for more information.\n",
                 unknown_option(tool, "tessel", argv[1]).c_str());
    return exit_code::usage;
  }
  try {
    tool.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    for (const auto& c : commands) {
      const auto message = c.app->parsed() ? unknown_option(*c.app) : std::string();
      if (message.empty()) continue;
      std::fprintf(stderr, "%s\nRun with --help for more information.\n", message.c_str());
      return exit_code::usage;
    }
    (void)tool.exit(e);  // an argument that is no option: CLI11's message
    return exit_code::usage;
  } catch (const CLI::ParseError& e) {
    const int code = tool.exit(e);  // prints help, the version, or the usage error
    return code == static_cast<int>(CLI::ExitCodes::Success) ? exit_code::success
                                                             : exit_code::usage;
  }
  for (const auto& c : commands)
    if (c.app->parsed()) return c.run();
  return exit_code::usage;  // unreachable: require_subcommand(1)
}

/// `code`, unless what was written to stdout could not all be written (a
/// full disk, a closed stdout): that is no success, as stdout is buffered
/// and the failure would otherwise pass unseen at exit with code 0.
int with_output_written(int code) {
  std::cout.flush();
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good()) return code;
  std::fprintf(stderr,
               "tessel: error: cannot write the output to stdout (a full disk, a closed "
               "stdout?)\n");
  return code == tessel::cli::exit_code::success ? tessel::cli::exit_code::bad_input : code;
}

}  // namespace

int main(int argc, char** argv) {
  int code = tessel::cli::exit_code::internal;
  try {
    code = run(argc, argv);
  } catch (const std::exception& e) {  // subcommands report their own; this is a bug
    std::fprintf(stderr, "tessel: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tessel: internal error: unknown exception\n");
  }
  return with_output_written(code);
}
