// `tessel serve FILE [--backend SPEC]`: the JSON-lines protocol on stdin and
// stdout (docs/serve.md), for agent loops. Logs go to stderr only.
#include "command.hpp"
#include "common.hpp"
#include "protocol.hpp"
#include "study_setup.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <string>

namespace tessel::cli {
namespace {

int run_serve(const study_setup_options& o) {
  auto setup = make_study(o);
  ops agent_ops(*setup.study, setup.backend, setup.evaluates);
  protocol session(agent_ops);
  fmt::print(stderr,
             "tessel serve: space '{}' ({} valid configs), backend {}; one JSON request per line\n",
             setup.space.space.name(), setup.space.space.count(), setup.backend->name());
  std::string line;
  while (!session.done() && std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::cout << session.handle(line) << '\n' << std::flush;
  }
  return exit_code::success;
}

}  // namespace

command add_serve_command(CLI::App& tool) {
  auto options = std::make_shared<study_setup_options>();
  auto* app = tool.add_subcommand(
      "serve", "Speak the JSON-lines ask/tell protocol on stdin/stdout (for agent loops)");
  add_study_options(*app, *options, false);
  add_session_options(*app, *options);
  return {app, [options] { return report_errors([&] { return run_serve(*options); }, true); }};
}

}  // namespace tessel::cli
