// `tessel explain FILE --config JSON`: why one config of a space is as fast
// as it is on the simulator: the bottleneck, engine busy fractions, the
// critical path and ranked suggestions in plain words, and with --trace a
// Chrome/Perfetto timeline. The config is given inline, from a file
// (@PATH), or as the best trial of a study file (--best DB).
#include "command.hpp"
#include "common.hpp"
#include "study_setup.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

namespace tessel::cli {
namespace {

struct explain_options {
  space_options input;
  std::string config;  ///< JSON text, or @PATH
  std::string best;    ///< a study file whose best trial to explain
  std::string backend = "sim";
  std::vector<std::string> backend_settings;
  std::string trace;  ///< write the timeline here
  bool json = false;
};

std::string read_config_text(const std::string& spec) {
  if (spec.empty() || spec.front() != '@') return spec;
  std::ifstream in(spec.substr(1), std::ios::binary);
  if (!in) throw error(fmt::format("--config: cannot read '{}'", spec.substr(1)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// `given` over the space's baseline (its declared defaults), as JSON text.
std::string merged_text(const space& s, const nlohmann::json& given) {
  const auto baseline = s.default_config();
  if (!baseline) return given.dump();
  auto merged = nlohmann::json::parse(s.to_json(*baseline));
  for (const auto& [name, value] : given.items()) merged[name] = value;
  return merged.dump();
}

/// The config to explain: parameters the JSON leaves out take their value in
/// the space's baseline (its declared defaults), so a person can name only
/// what they want to change.
config config_from(const space& s, const explain_options& o) {
  if (!o.best.empty()) {
    const auto stored = load_stored(o.best);
    const trial* best = nullptr;
    for (const auto& t : stored.trials)
      if (t.result.ok() && (!best || t.result.objective < best->result.objective)) best = &t;
    if (!best) throw error(fmt::format("study file '{}' has no successful trial yet", o.best));
    return s.from_json(stored.space.to_json(best->config));
  }
  const auto given = nlohmann::json::parse(read_config_text(o.config), nullptr, false);
  if (given.is_discarded() || !given.is_object())
    throw error(
        "--config expects a JSON object of parameter names to values, e.g. "
        "'{\"tile_m\": 128}', or @PATH of a file holding one");
  config c = s.from_json(merged_text(s, given));
  if (!s.is_valid(c)) {
    // A conditional parameter the caller left out is inactive in the
    // baseline but may be active in this config: give it its default.
    config filled = c;
    for (std::size_t p = 0; p < s.size(); ++p) {
      const auto& param = s.parameters()[p];
      if (param.when && filled[p] == config::inactive && !given.contains(param.name))
        filled[p] = static_cast<config::index_type>(param.default_index.value_or(0));
    }
    c = filled;  // valid, or the better diagnosis
  }
  if (!s.is_valid(c))
    throw error(fmt::format("the config {} is not valid in space '{}': {}", s.to_json(c), s.name(),
                            s.why_invalid(c)));
  return c;
}

nlohmann::json to_json(const sim_explanation& e, const space& s, const config& c) {
  nlohmann::json path = nlohmann::json::array();
  for (const auto& [what, share] : e.critical_path)
    path.push_back({{"what", what}, {"share", share}});
  return {{"ok", true},
          {"config", nlohmann::json::parse(s.to_json(c))},
          {"workload", e.workload},
          {"target", e.target},
          {"latency_s", e.latency_s},
          {"roofline_s", e.roofline_s},
          {"roofline_bound", e.roofline_bound},
          {"bottleneck", e.bottleneck},
          {"busy", e.busy},
          {"critical_path", path},
          {"suggestions", e.suggestions}};
}

int run_explain(const explain_options& o) {
  if (o.config.empty() == o.best.empty())
    throw error("explain: give the config to explain with --config JSON (or @PATH) or --best DB");
  const auto loaded = load(o.input);
  const auto& s = loaded.space;
  backend_settings settings;
  for (const auto& a : o.backend_settings) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw error(fmt::format("--backend-set expects KEY=VALUE, got '{}'", a));
    settings[a.substr(0, eq)] = a.substr(eq + 1);
  }
  const auto b = make_backend(o.backend, settings);
  const auto* sim = dynamic_cast<const sim_backend*>(b.get());
  if (!sim)
    throw error(fmt::format(
        "explain needs the simulator (--backend sim or sim:WORKLOAD); '{}' cannot say why a "
        "config is slow",
        o.backend));
  b->prepare(s);
  const config c = config_from(s, o);
  const auto e = sim->analyse(s, c);
  if (!o.trace.empty()) sim->write_trace(s, c, o.trace);
  if (o.json) {
    auto out = to_json(e, s, c);
    if (!o.trace.empty()) out["trace"] = o.trace;
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_code::success;
  }
  fmt::print("config  {}\n{}", s.to_json(c), e.text());
  if (!o.trace.empty())
    fmt::print("\ntrace written to {} (open it at https://ui.perfetto.dev or chrome://tracing)\n",
               o.trace);
  return exit_code::success;
}

}  // namespace

command add_explain_command(CLI::App& tool) {
  auto options = std::make_shared<explain_options>();
  auto* app = tool.add_subcommand(
      "explain",
      "Say why one config is as fast as it is on the simulator: bottleneck, engine busy "
      "fractions, ranked suggestions; --trace writes a Perfetto timeline");
  add_space_options(*app, options->input);
  app->add_option("--config", options->config,
                  "The config as a JSON object (parameters left out take their default), or "
                  "@PATH of a file holding one")
      ->type_name("JSON");
  app->add_option("--best", options->best, "Explain the best trial of this study file instead")
      ->type_name("DB")
      ->excludes("--config");
  app->add_option("--backend", options->backend, "The simulator: sim or sim:WORKLOAD")
      ->capture_default_str()
      ->type_name("SPEC");
  app->add_option("--backend-set", options->backend_settings,
                  "A simulator setting, e.g. --backend-set set.dma_issue_ns=60; repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app->add_option("--trace", options->trace,
                  "Write the timeline as Chrome/Perfetto trace JSON to PATH")
      ->type_name("PATH");
  app->add_flag("--json", options->json, "Print JSON on stdout");
  return {app, [options] {
            return report_errors([&] { return run_explain(*options); }, options->json);
          }};
}

}  // namespace tessel::cli
