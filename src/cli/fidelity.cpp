#include "fidelity.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tessel::cli {
namespace {

bool is_setting(std::string_view piece) {
  const auto eq = piece.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  for (char ch : piece.substr(0, eq))
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') return false;
  return true;
}

double number(const std::string& key, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
    throw error(fmt::format("--fidelity-set {}: must be a number, got '{}'", key, text));
  return v;
}

/// A whole number from 0 to 10^9 (a count).
std::size_t count(const std::string& key, const std::string& text) {
  const double v = number(key, text);
  if (!(v >= 0 && v <= 1e9) || v != std::floor(v))
    throw error(fmt::format("--fidelity-set {}: must be a whole number from 0 to 10^9, got '{}'",
                            key, text));
  return static_cast<std::size_t>(v);
}

multi_fidelity_options parse_options(const std::vector<std::string>& settings) {
  multi_fidelity_options o;
  for (const auto& a : settings) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw error(fmt::format("--fidelity-set expects KEY=VALUE, got '{}'", a));
    const auto key = a.substr(0, eq), value = a.substr(eq + 1);
    if (key == "warmup") {
      o.warmup = count(key, value);
    } else if (key == "z") {
      o.z = number(key, value);
    } else if (key == "min_agreement") {
      o.min_agreement = number(key, value);
    } else if (key == "top_patience") {
      o.top_patience = count(key, value);
    } else if (key == "top_fraction") {
      o.top_fraction = number(key, value);
    } else if (key == "audit_every") {
      o.audit_every = count(key, value);
    } else if (key == "max_high") {
      o.max_high = count(key, value);
    } else if (key == "promote_failures") {
      o.promote_failures = value == "true" || value == "1" || value == "on" || value == "yes";
    } else {
      throw error(
          fmt::format("--fidelity-set: unknown setting '{}' (settings: warmup, z, min_agreement, "
                      "top_fraction, top_patience, audit_every, max_high, promote_failures)",
                      key));
    }
  }
  return o;
}

}  // namespace

std::pair<std::string, backend_settings> split_fidelity_spec(std::string_view spec) {
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) return {std::string(spec), {}};
  std::string argument;
  backend_settings settings;
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

std::shared_ptr<multi_fidelity_backend> make_fidelity_backend(
    const std::vector<std::string>& specs, const std::vector<std::string>& settings, bool gate) {
  if (specs.size() != 2)
    throw error(fmt::format(
        "--fidelity: give exactly two, the low fidelity first (e.g. --fidelity sim:target=trn2 "
        "--fidelity trainium:...); got {}",
        specs.size()));
  std::vector<std::shared_ptr<backend>> levels;
  for (const auto& spec : specs) {
    auto [base, backend_settings] = split_fidelity_spec(spec);
    if (!gate && (base == "sim" || base.rfind("sim:", 0) == 0))
      backend_settings.emplace("gate", "false");
    levels.push_back(make_backend(base, backend_settings));
  }
  return std::make_shared<multi_fidelity_backend>(levels[0], levels[1], parse_options(settings));
}

std::string fidelity_text(const multi_fidelity_stats& s) { return "fidelity\n" + s.text(); }

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

}  // namespace tessel::cli
