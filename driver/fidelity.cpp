// fidelity.cpp: multi-fidelity specs and statistics for the front-ends
// (tessel/driver.hpp, docs/fidelity.md).
#include <tessel/backends.hpp>
#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/settings.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>

namespace tessel {
namespace {

bool is_setting(std::string_view piece) {
  const auto eq = piece.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  for (char ch : piece.substr(0, eq))
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') return false;
  return true;
}

multi_fidelity_options fidelity_options_of(const settings_map& given) {
  settings_reader read("--fidelity-set", given);
  multi_fidelity_options o;
  o.warmup = read.count("warmup").value_or(o.warmup);
  o.z = read.number("z").value_or(o.z);
  o.min_agreement = read.number("min_agreement").value_or(o.min_agreement);
  o.top_patience = read.count("top_patience").value_or(o.top_patience);
  o.top_fraction = read.number("top_fraction").value_or(o.top_fraction);
  o.top_min = read.count("top_min").value_or(o.top_min);
  o.min_spread = read.number("min_spread").value_or(o.min_spread);
  o.audit_every = read.count("audit_every").value_or(o.audit_every);
  o.max_high = read.count("max_high").value_or(o.max_high);
  o.promote_failures = read.flag("promote_failures").value_or(o.promote_failures);
  read.finish();
  return read.validated({{"multi_fidelity_options::warmup", "warmup"},
                         {"multi_fidelity_options::z", "z"},
                         {"multi_fidelity_options::top_patience", "top_patience"},
                         {"multi_fidelity_options::top_fraction", "top_fraction"},
                         {"multi_fidelity_options::min_agreement", "min_agreement"},
                         {"multi_fidelity_options::min_spread", "min_spread"}},
                        [&] {
                          o.validate();
                          return o;
                        });
}

}  // namespace

std::pair<std::string, settings_map> split_fidelity_spec(std::string_view spec) {
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) return {std::string(spec), {}};
  std::string argument;
  settings_map settings;
  std::string_view rest = spec.substr(colon + 1);
  while (true) {
    const auto comma = rest.find(',');
    const auto piece = rest.substr(0, comma);
    if (is_setting(piece)) {
      const auto eq = piece.find('=');
      settings[std::string(piece.substr(0, eq))] = std::string(piece.substr(eq + 1));
    } else if (!piece.empty()) {
      argument += (argument.empty() ? "" : ",") + std::string(piece);
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  auto scheme = std::string(spec.substr(0, colon));
  return {argument.empty() ? scheme : scheme + ":" + argument, std::move(settings)};
}

std::shared_ptr<multi_fidelity_backend> make_fidelity_backend(const std::vector<std::string>& specs,
                                                              const settings_map& settings,
                                                              bool gate) {
  if (specs.size() != 2)
    throw error(fmt::format(
        "--fidelity: give exactly two, the low fidelity first (e.g. --fidelity sim:target=trn2 "
        "--fidelity trainium:...); got {}",
        specs.size()));
  std::vector<std::shared_ptr<backend>> levels;
  for (const auto& spec : specs) {
    auto [base, level_settings] = split_fidelity_spec(spec);
    if (!gate && (base == "sim" || base.rfind("sim:", 0) == 0))
      level_settings.emplace("gate", "false");
    levels.push_back(make_backend(base, level_settings));
  }
  return std::make_shared<multi_fidelity_backend>(levels[0], levels[1],
                                                  fidelity_options_of(settings));
}

nlohmann::json fidelity_json(const multi_fidelity_stats& s) {
  nlohmann::json reasons = nlohmann::json::object();
  for (std::size_t r = 0; r < 4; ++r)
    reasons[std::string(to_string(static_cast<promotion_reason>(r)))] = s.by_reason[r];
  nlohmann::json out = {{"low_evaluations", s.low_evaluations},
                        {"high_evaluations", s.high_evaluations},
                        {"promoted_by", reasons},
                        {"low_cost_s", s.low_cost_s},
                        {"high_cost_s", s.high_cost_s},
                        {"pairs", s.agreement.pairs},
                        {"correction",
                         {{"scale", s.correction.log_scale ? "log" : "linear"},
                          {"intercept", s.correction.intercept},
                          {"slope", s.correction.slope},
                          {"text", s.correction.text()}}}};
  if (s.correction.spread) out["correction"]["spread"] = *s.correction.spread;
  if (s.agreement.kendall_tau) out["kendall_tau"] = *s.agreement.kendall_tau;
  if (s.agreement.spearman_rho) out["spearman_rho"] = *s.agreement.spearman_rho;
  if (s.best_high) out["best_high"] = *s.best_high;
  return out;
}

}  // namespace tessel
