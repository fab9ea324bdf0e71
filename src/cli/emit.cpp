// `tessel emit FILE --config JSON|@PATH|--best DB [--target T] [--output kernel.py]`:
// writes the NKI kernel that implements the simulator's plan of one config
// (tessel::emit_nki, docs/nki.md): Python using the public nki.language /
// nki.isa API, with the config in a header comment and a numpy reference.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>

namespace tessel::cli {
namespace {

struct emit_options {
  spec_options input;
  config_choice chosen;
  std::string backend = "sim";  ///< sim or sim:WORKLOAD, as explain takes it
  std::string workload;         ///< --workload, the name before issue 27
  std::string output;           ///< "" = stdout
  std::string fault;            ///< tests only (hidden)
};

int run_emit(emit_options o) {
  // the best trial was timed on the study's target (its space may have parameters only that
  // target enables, as moe's core_split with lnc = 2)
  if (!o.chosen.best.empty() && o.input.spec.target.empty())
    o.input.spec.target = reopen_study(o.chosen.best).spec.target;
  const auto spec = o.input.resolved();
  const auto loaded = read_space(spec);
  const auto& s = loaded.space;
  const config c = o.chosen.in(s, "emit");
  nki_options options;
  if (o.backend != "sim" && !o.backend.starts_with("sim:"))
    throw error(fmt::format(
        "emit writes the simulator's plan: --backend sim or sim:WORKLOAD, not '{}'", o.backend));
  options.workload = o.workload.empty() && o.backend.size() > 4 ? o.backend.substr(4) : o.workload;
  options.target = spec.target;
  options.source = o.input.spec.file;
  options.fault = o.fault;
  const std::string kernel = emit_nki(s, c, options);
  if (o.output.empty() || o.output == "-") {
    fmt::print("{}", kernel);
    return exit_code::success;
  }
  write_file(o.output, kernel);
  fmt::print(stderr, "wrote {} ({} lines)\n", o.output,
             std::count(kernel.begin(), kernel.end(), '\n'));
  return exit_code::success;
}

}  // namespace

command add_emit_command(CLI::App& tool) {
  auto options = std::make_shared<emit_options>();
  auto* app = tool.add_subcommand(
      "emit",
      "Write the NKI kernel (Python) that implements one config's simulated plan, with a numpy "
      "reference (docs/nki.md)");
  add_space_options(*app, options->input);
  add_config_options(*app, options->chosen, "Emit");
  app->add_option("--backend", options->backend,
                  "The simulator: sim, or sim:WORKLOAD to name the workload (default: the "
                  "space's `const workload`, or its name)")
      ->capture_default_str()
      ->type_name("SPEC");
  app->add_option("--workload", options->workload)->group("");  // before issue 27
  app->add_option("--output,-o", options->output, "Write the kernel here instead of stdout")
      ->type_name("PATH");
  app->add_option("--fault", options->fault,
                  "Tests only: emit a deliberately broken kernel (drop_tail, skip_accumulation, "
                  "drop_collective)")
      ->group("");
  return {app, [options] { return report_errors([&] { return run_emit(*options); }, false); }};
}

}  // namespace tessel::cli
