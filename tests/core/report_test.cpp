// The report (tessel/report.hpp): exact element counts of each plot on a
// made-up study, the importance of a surrogate whose prediction depends on
// one parameter, and the errors a caller gets.
#include "space_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/report.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <regex>
#include <string>

namespace {

using namespace tessel;
using namespace tessel::testing;

space three_parameters() {
  space::definition def;
  def.name = "small";
  def.parameters.push_back(param("a", integers({1, 2, 3, 4, 5, 6, 7, 8})));
  def.parameters.push_back(param("b", symbols(def, {"x", "y", "z"})));
  def.parameters.push_back(param("c", booleans()));
  return space(std::move(def));
}

/// 30 finished trials; every 5th a compile error; the objective grows with a.
std::vector<trial> made_up_trials(const space& s) {
  std::vector<trial> out;
  for (std::uint64_t i = 1; i <= 30; ++i) {
    trial t;
    t.id = i;
    t.config = s.at((i * 7) % s.count());
    t.key = s.key(t.config);
    t.state = trial_state::finished;
    t.finished_at = static_cast<double>(i);
    t.result = i % 5 == 0
                   ? measurement::failure(status::compile_error, "too big", {.compile_s = 0.5})
                   : measurement::success(1e-3 * (t.config[0] + 1), {.run_s = 0.25});
    out.push_back(t);
  }
  return out;
}

/// Predicts 1 ms x (a's index + 1): only `a` matters.
struct a_only final : surrogate {
  void observe(const trial&) override {}
  [[nodiscard]] bool ready() const override { return true; }
  [[nodiscard]] candidate_score score(const config& c, std::optional<double>) const override {
    return {.mean = 1e-3 * (c[0] + 1), .sigma = 0, .p_feasible = 1, .expected_gain = 0};
  }
};

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

struct fixture {
  space s = three_parameters();
  std::vector<trial> trials = made_up_trials(s);
  study_record record = [] {
    study_record r;
    r.space_name = "small";
    r.target = "trn2";
    r.backend = "replay";
    r.strategy = "random";
    r.seed = 3;
    return r;
  }();
  report_input input() const {
    report_input in;
    in.record = &record;
    in.study_space = &s;
    in.trials = &trials;
    in.top = 5;
    return in;
  }
};

}  // namespace

TEST_CASE("report: convergence marks every ok trial and every failure") {
  const fixture f;
  const auto svg = report_svg(f.input(), "convergence");
  CHECK(svg.starts_with("<?xml"));
  CHECK(count(svg, "<circle class=\"ok\"") == 24);
  CHECK(count(svg, "<path class=\"fail\"") == 6);
  CHECK(count(svg, "<path class=\"best\"") == 1);
  CHECK(svg.find("24 ok, 6 failed") != std::string::npos);
}

TEST_CASE("report: the status bars add up to the finished trials") {
  const fixture f;
  const auto svg = report_svg(f.input(), "status");
  const std::regex bar("<title>(ok|compile_error): ([0-9]+) of");
  std::size_t ok = 0, failed = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), bar), end; it != end; ++it)
    ((*it)[1] == "ok" ? ok : failed) += std::stoul((*it)[2]);
  CHECK(ok == 24);
  CHECK(failed == 6);
}

TEST_CASE("report: one panel per parameter, a line per top trial") {
  const fixture f;
  const auto panels = report_svg(f.input(), "objective_by_parameter");
  CHECK(count(panels, "<svg class=\"panel\"") == 3);
  CHECK(count(panels, "<circle class=\"ok\"") == 3 * 24);
  CHECK(count(report_svg(f.input(), "parallel"), "<path class=\"top\"") == 5);
}

TEST_CASE("report: importance is the parameter the surrogate's prediction follows") {
  const fixture f;
  const auto found = parameter_importances(f.s, f.trials, a_only{});
  REQUIRE(found);
  REQUIRE(found->parameters.size() == 3);
  CHECK(found->parameters[0].parameter == "a");
  CHECK(found->parameters[0].share == doctest::Approx(1.0).epsilon(0.25));
  CHECK(found->parameters[1].share == doctest::Approx(0.0));
  CHECK(found->parameters[2].share == doctest::Approx(0.0));
  CHECK(found->method.find("functional ANOVA") != std::string::npos);
  auto in = f.input();
  in.importance = found;
  const auto svg = report_svg(in, "importance");
  CHECK(count(svg, "<rect class=\"bar\"") == 3);
  CHECK(svg.find("method: first-order functional ANOVA") != std::string::npos);
}

TEST_CASE("report: the page holds every section, no script, and is reproducible") {
  const fixture f;
  auto in = f.input();
  in.importance_note = "no surrogate in this test";
  in.learned_constraints = {"require a < 8   # made up"};
  const auto html = report_html(in);
  CHECK(html == report_html(in));
  for (const auto& name : report_plot_names())
    CHECK_MESSAGE(html.find("<section id=\"" + name + "\">") != std::string::npos, name);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("Not drawn: no surrogate in this test.") != std::string::npos);
  CHECK(html.find("Not drawn: the best trial has no engine busy fractions") != std::string::npos);
  CHECK(html.find("require a &lt; 8   # made up") != std::string::npos);
  CHECK(count(html, "<svg class=\"plot\"") == 5);  // no importance, engines or fidelity
}

TEST_CASE("report: errors name the plot and say why nothing is drawn") {
  const fixture f;
  CHECK_THROWS_WITH_AS(
      report_svg(f.input(), "histogram"),
      "report: no plot named 'histogram' (plots: convergence, convergence_cost, "
      "objective_by_parameter, importance, interactions, parallel, status, engines, "
      "fidelity)",
      error);
  CHECK_THROWS_WITH_AS(report_svg(f.input(), "fidelity"),
                       "report: plot 'fidelity' has nothing to draw: fewer than two configs were "
                       "measured at both fidelities (--fidelity)",
                       error);
  report_input none;
  CHECK_THROWS_AS((void)report_html(none), error);
}

TEST_CASE("report: the interactions plot has two bars per change, predicted ones marked") {
  const fixture f;
  const a_only model;
  auto in = f.input();
  const config base{0, 0, 0}, target{3, 1, 1};
  in.interactions = analyse_interactions(f.s, base, target, {}, &model, 0);
  REQUIRE(in.interactions->changes.size() == 3);
  const auto svg = report_svg(in, "interactions");
  CHECK(count(svg, "<rect class=\"bar\"") == 2 * 3);
  CHECK(count(svg, "(predicted)</text>") == 2 * 3);
  CHECK(svg.find("0 figures measured, 11 predicted by the surrogate") != std::string::npos);
}
