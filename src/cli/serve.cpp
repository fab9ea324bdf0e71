// `tessel serve FILE [--backend SPEC]`: the JSON-lines protocol on stdin and
// stdout (docs/serve.md), for agent loops. Logs go to stderr only.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/ops.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

namespace tessel::cli {
namespace {

int run_serve(const spec_options& o) {
  auto opened = open_as_given(o, o.resolved());
  agent_ops ops(*opened.study, opened.backend, opened.evaluates);
  // On stderr, as tune's; before the start line, which tells a watcher the
  // session is on.
  announce_interrupts(opened.db ? opened.db->location() : std::string(), {opened.study.get()});
  const auto& s = opened.study->space();
  fmt::print(stderr,
             "tessel serve: space '{}' ({} valid configs), backend {}; one JSON request per line\n",
             s.name(), s.count(), opened.backend->name());
  json_lines_session(ops).serve(std::cin, std::cout);
  stop_announcing_interrupts();
  return exit_code::success;
}

}  // namespace

command add_serve_command(CLI::App& tool) {
  auto options = std::make_shared<spec_options>();
  auto* app = tool.add_subcommand(
      "serve", "Speak the JSON-lines ask/tell protocol on stdin/stdout (for agent loops)");
  add_study_options(*app, *options);
  add_session_options(*app, *options);
  return {app, [options] {
            // stdout carries JSON lines only: a failure to start is one line too.
            return report_errors([&] { return run_serve(*options); }, true, true);
          }};
}

}  // namespace tessel::cli
