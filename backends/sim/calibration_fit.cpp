// calibration_fit.cpp: tessel::calibrate_simulator (tessel/calibration.hpp).
// The recorded cases are replayed with run_calibration; the constants are
// fitted in log space (each constant = start x e^theta, |theta| <= log range)
// by NLopt's Nelder-Mead simplex (LN_NELDERMEAD: Nelder & Mead, The
// Computer Journal 7(4), 1965; a point outside the bounds is moved back onto
// them, after Box, Computer J. 8(1), 1965), minimising the mean squared log
// error. A handful of constants, an
// objective that is piecewise smooth (the timing model has max() and integer
// tile counts) and no gradient: a derivative-free local method, and a
// deterministic one. Of NLopt's derivative-free methods it fitted the
// recorded cases best (docs/simulator.md, "Calibrating to your device"):
// BOBYQA and COBYLA stop at the first kink, Subplex and PRAXIS wander along
// the directions the cases do not pin down (a 20 GHz TensorE clock at 12%
// efficiency on the trn1 tutorial).
#include <tessel/backend.hpp>
#include <tessel/calibration.hpp>
#include <tessel/error.hpp>
#include <tessel/target.hpp>

#include "calibration.hpp"
#include "machine.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <nlopt.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace tessel {
namespace {

using constants_t = std::map<std::string, double, std::less<>>;

/// Mean squared log error of the predictions against the measurements.
double objective(const std::vector<sim::calibration_row>& rows) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    if (!(r.published > 0) || !(r.predicted > 0)) return INFINITY;
    const double e = std::log(r.predicted / r.published);
    sum += e * e;
    ++n;
  }
  return n > 0 ? sum / n : 0;
}

/// The value every constant starts from: the base target's figure, or the
/// simulator table's for the base.
double start_value(const std::string& name, const target& base) {
  if (auto it = base.constants.find(name); it != base.constants.end())
    return static_cast<double>(it->second);
  for (const auto& row : sim::calibrated_constants())
    if (row.name == name) return base.name == "trn1" || base.base == "trn1" ? row.trn1 : row.trn2;
  throw error(
      fmt::format("calibrate: '{}' is neither a constant of target '{}' nor one of the simulator's "
                  "(docs/simulator.md)",
                  name, base.name));
}

struct search {
  const calibration_options& options;
  std::vector<std::string> names;
  std::vector<double> start;
  int evaluations = 0;

  constants_t constants_at(const std::vector<double>& theta) const {
    constants_t c = options.fixed;
    for (std::size_t i = 0; i < names.size(); ++i) c[names[i]] = start[i] * std::exp(theta[i]);
    return c;
  }
  sim::calibration_selection selection;
  std::vector<sim::calibration_row> rows_at(const constants_t& c) {
    ++evaluations;
    return sim::run_calibration(options.recorded, c, selection);
  }
  double value(const std::vector<double>& theta) {
    try {
      return objective(rows_at(constants_at(theta)));
    } catch (const error&) {
      return INFINITY;  // a constant out of the model's domain
    }
  }

  /// The minimiser from theta = 0: first steps of 0.5 (a factor e^0.5 on
  /// each constant), stopping when a step moves theta by less than 1e-4 or
  /// after options.max_evaluations evaluations.
  std::vector<double> run() {
    std::vector<double> theta(names.size(), 0.0);
    if (theta.empty()) return theta;
    const auto n = static_cast<unsigned>(theta.size());
    const double bound = std::log(options.range);
    nlopt::opt opt(nlopt::LN_NELDERMEAD, n);
    opt.set_lower_bounds(std::vector<double>(n, -bound));
    opt.set_upper_bounds(std::vector<double>(n, bound));
    opt.set_min_objective(
        [](unsigned, const double* x, double*, void* self) {
          auto& s = *static_cast<search*>(self);
          return s.value(std::vector<double>(x, x + s.names.size()));
        },
        this);
    opt.set_initial_step(0.5);
    opt.set_xtol_abs(1e-4);
    opt.set_maxeval(options.max_evaluations);
    double best = 0;
    try {
      opt.optimize(theta, best);  // theta: the best point found, also when stopped early
    } catch (const nlopt::roundoff_limited&) {  // as far as doubles allow: theta is the best
    }
    return theta;
  }
};

std::string number_text(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

void calibration_options::validate() const {
  if (recorded.empty()) throw options_error("calibration_options::recorded", "give a folder");
  if (!builtin_target(base))
    throw options_error("calibration_options::base",
                        fmt::format("'{}' is not a built-in target", base));
  if (name.empty()) throw options_error("calibration_options::name", "must not be empty");
  if (max_evaluations < 1)
    throw options_error("calibration_options::max_evaluations",
                        fmt::format("must be >= 1 (got {})", max_evaluations));
  if (!(range > 1) || !std::isfinite(range))
    throw options_error("calibration_options::range",
                        fmt::format("must be > 1 and finite (got {})", range));
}

std::vector<std::string> default_calibration_constants() {
  return {"tensor_clock_mhz",
          "tensor_full_tile_efficiency_percent",
          "tensor_small_tile_penalty_percent",
          "dma_stream_bytes_per_us_per_engine",
          "dma_descriptor_ns",
          "dma_issue_ns",
          "dma_fixed_latency_ns"};
}

calibration_result calibrate_simulator(const calibration_options& o) {
  o.validate();
  const target base = *builtin_target(o.base);
  // the files timed on the base target (the tutorial on trn1; tiles and DMA on trn2)
  const std::string family = base.name == "trn1" ? "trn1" : "trn2";
  std::vector<std::string> expected;
  bool any = false;
  for (const auto& [file, on] : sim::calibration_files())
    if (on == family) {
      expected.push_back(file);
      any = any || std::filesystem::exists(o.recorded / file);
    }
  if (!any)
    throw error(fmt::format("calibrate: no calibration file for {} in '{}' (expected any of: {})",
                            family, o.recorded.string(), fmt::join(expected, ", ")));

  search s{o, {}, {}, 0, {.skip_missing = true, .target = family}};
  calibration_result result;
  const std::vector<std::string> asked =
      o.constants.empty() ? default_calibration_constants() : o.constants;
  const auto before = sim::run_calibration(o.recorded, o.fixed, s.selection);
  for (const auto& name : asked) {
    const double v = start_value(name, base);
    result.start[name] = v;
    // a constant no recorded case reads (10% less moves nothing) is left alone
    constants_t nudged = o.fixed;
    nudged[name] = v * 0.9;
    const auto moved = sim::run_calibration(o.recorded, nudged, s.selection);
    bool sensitive = false;
    for (std::size_t i = 0; i < moved.size(); ++i)
      sensitive = sensitive || moved[i].predicted != before[i].predicted;
    if (!sensitive) {
      result.insensitive.push_back(name);
      continue;
    }
    s.names.push_back(name);
    s.start.push_back(v);
  }
  const std::vector<double> theta = s.run();
  constants_t fitted = s.constants_at(theta);
  // target fields are integers: round them, and time the rounded model
  std::vector<std::string> fields, table;
  for (const auto& name : s.names) {
    if (base.constants.contains(name)) {
      fitted[name] = std::max(1.0, std::round(fitted[name]));
      fields.push_back(name);
    } else {
      table.push_back(name);
    }
    result.fitted[name] = fitted[name];
  }
  const auto after = sim::run_calibration(o.recorded, fitted, s.selection);
  for (std::size_t i = 0; i < before.size(); ++i)
    result.cases.push_back({before[i].file, before[i].name, before[i].quantity, before[i].published,
                            before[i].predicted, after[i].predicted});
  result.rms_log_error_before = std::sqrt(objective(before));
  result.rms_log_error_after = std::sqrt(objective(after));
  result.evaluations = s.evaluations + 1 + static_cast<int>(asked.size());

  std::string settings;
  for (const auto& name : table)
    settings +=
        fmt::format("{}set.{}={}", settings.empty() ? "" : ",", name, number_text(fitted[name]));
  result.sim_settings = settings;
  std::string text = fmt::format(
      "# {}: {} re-fitted by `tessel calibrate` to the cases in {}\n"
      "# rms log error of the simulator: {:.4f} before, {:.4f} after ({} cases)\n",
      o.name, o.base, o.recorded.string(), result.rms_log_error_before, result.rms_log_error_after,
      result.cases.size());
  if (!table.empty())
    text += fmt::format(
        "# fitted simulator constants that no target carries; pass them to the sim backend:\n"
        "#   --backend \"sim:target={},{}\"\n",
        o.name, settings);
  text += fmt::format("target {} : {} {{\n", o.name, o.base);
  for (const auto& name : fields)
    text += fmt::format("  {} = {}  # was {}\n", name, number_text(fitted[name]),
                        number_text(result.start[name]));
  text += "}\n";
  result.target_text = std::move(text);
  return result;
}

int record_calibration(backend& b, const std::filesystem::path& data,
                       const std::filesystem::path& out) {
  const std::string file = "nki_matmul_tutorial_trn1.json";
  std::ifstream in(data / file);
  if (!in) throw error(fmt::format("calibrate: cannot read '{}'", (data / file).string()));
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw error(fmt::format("calibrate: '{}' is not JSON", file));
  const auto cases = sim::tutorial_configs(data);
  int written = 0;
  for (const auto& [name, s, c] : cases) {
    b.prepare(s);
    const measurement m = b.evaluate(s, c);
    if (!m.ok())
      throw error(fmt::format("calibrate: case {} of {} did not measure: {} ({})", name, file,
                              to_string(m.status), m.message));
    for (auto& stage : j.at("stages"))
      if (stage.at("name") == name) stage["latency_ms"] = m.objective * 1e3;
    ++written;
  }
  j["source"] = fmt::format("recorded by tessel calibrate through backend {}", b.name());
  std::filesystem::create_directories(out);
  std::ofstream(out / file) << j.dump(2) << "\n";
  return written;
}

std::string calibration_result::report() const {
  std::string out =
      fmt::format("{:<20} {:<18} {:>12} {:>12} {:>8} {:>12} {:>8}\n", "case", "quantity",
                  "measured", "sim before", "error", "sim after", "error");
  std::string file;
  for (const auto& c : cases) {
    if (c.file != file) out += fmt::format("-- {}\n", file = c.file);
    const auto error = [&](double p) { return 100 * (p - c.measured) / c.measured; };
    out +=
        fmt::format("{:<20} {:<18} {:>12.4g} {:>12.4g} {:>+7.1f}% {:>12.4g} {:>+7.1f}%\n", c.name,
                    c.quantity, c.measured, c.before, error(c.before), c.after, error(c.after));
  }
  out += fmt::format("rms log error: {:.4f} before, {:.4f} after\n", rms_log_error_before,
                     rms_log_error_after);
  for (const auto& [name, value] : fitted)
    out += fmt::format("  {:<40} {:>12} -> {}\n", name, number_text(start.at(name)),
                       number_text(value));
  if (!insensitive.empty())
    out += fmt::format("  not fitted (no recorded case reads them): {}\n",
                       fmt::join(insensitive, ", "));
  return out;
}

}  // namespace tessel
