// `tessel calibrate`: re-fits the NeuronCore simulator to measurements of a
// real device and writes a target file (`target my_trn2 : trn2 { ... }`)
// with the fitted constants, printing simulator-vs-device before and after
// (docs/cli.md, docs/simulator.md "Calibrating to your device").
//
//   tessel calibrate --recorded DIR [--base trn2] [--name my_trn2] [--out FILE]
//   tessel calibrate --backend SPEC --record-to DIR --base trn1 ...
//
// --recorded fits measurements already recorded in the format of
// data/calibration/. --backend runs the cases a backend can run as configs
// through it (any backend spec: the trainium backend plugs in here), records
// them under --record-to, then fits them the same way.
#include "command.hpp"
#include "common.hpp"

#include <tessel/backends.hpp>
#include <tessel/calibration.hpp>
#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/settings.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessel::cli {
namespace {

struct calibrate_options {
  std::string recorded;
  std::string backend;
  std::string record_to;
  std::string data;
  std::string out;
  std::vector<std::string> fit;
  std::vector<std::string> sets;
  tessel::calibration_options fit_options;
  bool json = false;
};

int run_calibrate(calibrate_options& o) {
  calibration_options fit = o.fit_options;
  fit.constants = o.fit;
  for (const auto& [name, value] : parse_assignments(o.sets, "--set")) {
    const auto number = parse_number(value);  // the model constants held fixed
    if (!number) throw error(fmt::format("--set wants NAME=NUMBER, got '{}={}'", name, value));
    fit.fixed[name] = *number;
  }
  if (!o.backend.empty()) {
    if (o.record_to.empty()) throw error("--backend needs --record-to DIR (where to record)");
    if (o.data.empty())
      throw error(
          "--backend needs --data DIR: the data/ folder of a tessel checkout (its "
          "calibration/ cases)");
    const auto b = make_backend(o.backend);
    const int cases =
        record_calibration(*b, std::filesystem::path(o.data) / "calibration", o.record_to);
    if (!o.json)
      fmt::print("recorded {} cases through {} under {}\n", cases, b->name(), o.record_to);
    fit.recorded = o.record_to;
  } else {
    fit.recorded = o.recorded;
  }
  const calibration_result r = calibrate_simulator(fit);
  if (!o.out.empty()) write_file(o.out, r.target_text);
  if (o.json) {
    const auto j = calibration_json(r);
    fmt::print("{}\n", j.dump(2));
    return exit_code::success;
  }
  fmt::print("{}", r.report());
  if (o.out.empty())
    fmt::print("\n{}", r.target_text);
  else
    fmt::print("wrote {} (target {})\n", o.out, fit.name);
  if (!r.sim_settings.empty())
    fmt::print("simulator constants no target carries: --backend \"sim:target={},{}\"\n", fit.name,
               r.sim_settings);
  return exit_code::success;
}

}  // namespace

command add_calibrate_command(CLI::App& tool) {
  auto o = std::make_shared<calibrate_options>();
  auto* app = tool.add_subcommand(
      "calibrate",
      "Re-fit the simulator's constants to device measurements and write a target file, "
      "printing simulator vs device before and after");
  auto* recorded =
      app->add_option("--recorded", o->recorded,
                      "A folder of measurements in the format of data/calibration/ (any of "
                      "its files)")
          ->type_name("DIR");
  auto* live = app->add_option("--backend", o->backend,
                               "Run the cases a backend can run as configs through it and "
                               "record them first (e.g. trainium:...)")
                   ->type_name("SPEC");
  recorded->excludes(live);
  app->add_option("--record-to", o->record_to, "With --backend: where to record")->type_name("DIR");
  app->add_option("--data", o->data, "With --backend: the data/ folder holding calibration/")
      ->type_name("DIR");
  app->add_option("--base", o->fit_options.base, "The built-in target to derive from")
      ->type_name("TARGET")
      ->capture_default_str();
  app->add_option("--name", o->fit_options.name, "The written target's name")
      ->type_name("NAME")
      ->capture_default_str();
  app->add_option("--out", o->out, "Write the target file here (default: print it)")
      ->type_name("FILE");
  app->add_option("--fit", o->fit, "A constant to fit; repeatable (default: the usual set)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app->add_option("--set", o->sets, "Hold a model constant at a value; repeatable")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  app->add_option("--budget,-n", o->fit_options.max_evaluations,
                  "Evaluations of the fit's objective at most")
      ->type_name("N")
      ->check(whole_number())
      ->capture_default_str();
  app->add_option("--max-evaluations", o->fit_options.max_evaluations)
      ->group("")
      ->check(whole_number());  // before #27
  app->add_flag("--json", o->json, "Print JSON on stdout");
  app->callback([recorded, live] {
    if (recorded->count() == 0 && live->count() == 0)
      throw CLI::RequiredError("--recorded DIR or --backend SPEC");
  });
  return {app, [o] { return report_errors([&] { return run_calibrate(*o); }, o->json); }};
}

}  // namespace tessel::cli
