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
  bool too_long = false;
  while (!session.done() && read_request_line(std::cin, line, too_long)) {
    if (too_long) {
      std::cout << fmt::format(R"({{"ok":false,"error":"a request line is at most {} bytes"}})",
                               max_request_line_bytes)
                << '\n'
                << std::flush;
      continue;
    }
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
  return {app, [options] {
            // stdout carries JSON lines only: a failure to start is one line too.
            return report_errors([&] { return run_serve(*options); }, true, true);
          }};
}

}  // namespace tessel::cli
