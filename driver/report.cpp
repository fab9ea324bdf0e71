// report.cpp: a study's reports for every front-end (tessel/driver.hpp):
// what its failures taught (the learned constraints as candidate `require`
// lines, and what testing them found), and the HTML/SVG report with the
// Gaussian-process surrogate of strategies/bayesian wired in.
#include <tessel/bayesian.hpp>
#include <tessel/calibration.hpp>
#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/report.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdint>

namespace tessel {
namespace {

/// The finished trials `bo` proposed to test its learned rules
/// (bo_options::rule_test_after): provenance "bo/rule-test" or "auto/bo/rule-test".
std::vector<const trial*> rule_tests(const std::vector<trial>& trials) {
  std::vector<const trial*> out;
  for (const auto& t : trials)
    if (t.state == trial_state::finished && t.provenance.source.ends_with("bo/rule-test"))
      out.push_back(&t);
  return out;
}

/// The best config against the baseline: the study's own figures measured
/// (its baseline and best at least), the rest predicted by `model`.
void add_interactions(const stored_study& stored, const surrogate& model, report_input& in) {
  const auto& s = stored.space;
  const auto base = s.default_config();
  const trial* best = best_trial(stored);
  if (!base || !best) {
    in.interactions_note = !base ? "the baseline is not a valid config" : "no trial finished ok";
    return;
  }
  in.interactions = analyse_interactions(s, *base, best->config, {}, &model, 0, stored.trials);
}

/// What the GP surrogate fed every finished trial says: the importances and
/// the interactions, or why not.
void add_model_figures(const stored_study& stored, report_input& in) {
  const auto model = fitted_surrogate(stored.space, stored.trials);
  in.importance = parameter_importances(stored.space, stored.trials, *model);
  if (in.importance) {
    in.importance->method += " (Gaussian-process surrogate, docs/bayesian.md)";
  } else {
    std::size_t ok = 0;
    for (const auto& t : stored.trials)
      ok += t.state == trial_state::finished && t.result.ok() ? 1 : 0;
    in.importance_note =
        fmt::format("the Gaussian-process surrogate is not ready ({} ok trials; it needs {})", ok,
                    gp_options{}.min_observations);
  }
  if (model->ready())
    add_interactions(stored, *model, in);
  else
    in.interactions_note = in.importance_note;
}

}  // namespace

std::unique_ptr<surrogate> fitted_surrogate(const space& s, const std::vector<trial>& trials) {
  auto model = make_gp_surrogate(s);
  for (const auto& t : trials)
    if (t.state == trial_state::finished) model->observe(t);
  return model;
}

std::string suggested_constraints_text(const stored_study& stored,
                                       const std::vector<learned_constraint>& rules,
                                       const std::string& source) {
  if (rules.empty())
    return fmt::format(
        "# {}: no constraint learned (too few failures, or none that a rule on the "
        "parameters separates from the successes)\n",
        source);
  std::string out =
      fmt::format("# learned from {} ({} trials): paste the lines you agree with into space {}\n",
                  source, stored.trials.size(), stored.record.space_name);
  for (const auto& r : rules) out += r.line() + "\n";
  return out;
}

interaction_report interactions_measured_on(backend& b, const space& s, const config& base,
                                            const config& target, std::size_t budget,
                                            const std::vector<trial>& known) {
  const auto model = fitted_surrogate(s, known);
  const interaction_measure measure = [&](const config& c,
                                          std::string& why) -> std::optional<double> {
    const auto m = b.evaluate(s, c);
    if (m.ok()) return m.objective;
    why = outcome_text(m.status, m.message);
    return std::nullopt;
  };
  return analyse_interactions(s, base, target, measure, model.get(), budget, known);
}

std::string study_report(const stored_study& stored, const report_request& r) {
  if (r.format != "html" && r.format != "svg")
    throw error(fmt::format("report: unknown format '{}' (html or svg)", r.format));
  if (r.format == "svg" && r.plot.empty())
    throw error(fmt::format("report: the svg format draws one plot: name the plot ({})",
                            fmt::join(report_plot_names(), ", ")));
  report_input in;
  in.record = &stored.record;
  in.study_space = &stored.space;
  in.trials = &stored.trials;
  in.source = r.source;
  in.top = r.top;
  if (r.format == "html" || r.plot == "importance" || r.plot == "interactions")
    add_model_figures(stored, in);
  for (const auto& rule : learn_constraints(stored.space, stored.trials))
    in.learned_constraints.push_back(rule.line());
  return r.format == "html" ? report_html(in) : report_svg(in, r.plot);
}

/// A titled block of `require` lines and what testing the rules found, or
/// "" when nothing was learned or tested.
std::string learned_text(const std::vector<learned_constraint>& rules,
                         const std::vector<trial>& trials) {
  const auto tests = rule_tests(trials);
  if (rules.empty() && tests.empty()) return {};
  std::string out =
      "learned constraints: candidate require lines for the .tsl (each condition met by every\n"
      "failure it counts and by no success so far; check before pasting)\n";
  for (const auto& r : rules) out += "  " + r.line() + "\n";
  if (tests.empty()) return out;
  std::vector<std::uint64_t> ok, failed;
  for (const auto* t : tests) (t->result.ok() ? ok : failed).push_back(t->id);
  auto listed = [](const std::vector<std::uint64_t>& ids) {
    return ids.empty() ? std::string("none")
                       : fmt::format("{} (trial {})", ids.size(), fmt::join(ids, ", "));
  };
  out +=
      fmt::format("  bo tested the rules {} time(s): {} ran ok{}; {} failed\n", tests.size(),
                  listed(ok), ok.empty() ? "" : ", each refuting a rule held then", listed(failed));
  return out;
}

nlohmann::json learned_json(const std::vector<learned_constraint>& rules) {
  auto out = nlohmann::json::array();
  for (const auto& r : rules)
    out.push_back({{"require", r.require},
                   {"rejects", r.condition},
                   {"kind", std::string(to_string(r.kind))},
                   {"failures_rejected", r.failures_rejected},
                   {"failures", r.failures},
                   {"successes_rejected", r.successes_rejected},
                   {"successes", r.successes}});
  return out;
}

nlohmann::json calibration_json(const calibration_result& r) {
  nlohmann::json j{{"ok", true},
                   {"rms_log_error_before", r.rms_log_error_before},
                   {"rms_log_error_after", r.rms_log_error_after},
                   {"start", r.start},
                   {"fitted", r.fitted},
                   {"insensitive", r.insensitive},
                   {"evaluations", r.evaluations},
                   {"sim_settings", r.sim_settings},
                   {"target", r.target_text}};
  for (const auto& c : r.cases)
    j["cases"].push_back({{"file", c.file},
                          {"name", c.name},
                          {"quantity", c.quantity},
                          {"measured", c.measured},
                          {"before", c.before},
                          {"after", c.after}});
  return j;
}

}  // namespace tessel
