// `tessel mcp FILE [tune options]`: a Model Context Protocol server on stdin
// and stdout (docs/agents.md); its tools are the agent ops, the same ones
// `tessel serve` speaks as JSON lines. Logs go to stderr only.
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

int run_mcp(const spec_options& o) {
  auto opened = open_as_given(o, o.resolved());
  agent_ops ops(*opened.study, opened.backend, opened.evaluates);
  // On stderr, as tune's; before the start line, which tells a watcher the
  // session is on.
  announce_interrupts(opened.db ? opened.db->location() : std::string(), {opened.study.get()});
  const auto& s = opened.study->space();
  fmt::print(stderr, "tessel mcp: space '{}' ({} valid configs), backend {}; MCP over stdio\n",
             s.name(), s.count(), opened.backend->name());
  serve_mcp(ops, std::cin, std::cout, std::cerr, TESSEL_VERSION);
  stop_announcing_interrupts();
  return exit_code::success;
}

}  // namespace

command add_mcp_command(CLI::App& tool) {
  auto options = std::make_shared<spec_options>();
  auto* app = tool.add_subcommand(
      "mcp", "Serve the study as Model Context Protocol tools and resources on stdin/stdout");
  add_study_options(*app, *options);
  add_session_options(*app, *options);
  return {app, [options] { return report_errors([&] { return run_mcp(*options); }, false); }};
}

}  // namespace tessel::cli
