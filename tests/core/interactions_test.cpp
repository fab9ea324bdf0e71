// analyse_interactions (tessel/interactions.hpp): the designed set, the
// budget split between measured and predicted figures, and the changes that
// only pay off together, on a made-up objective with one known interaction.
#include "space_fixtures.hpp"

#include <tessel/interactions.hpp>

#include <doctest/doctest.h>

namespace {

using namespace tessel;
using namespace tessel::testing;

space three_switches() {
  space::definition def;
  def.name = "switches";
  def.parameters.push_back(param("a", booleans()));
  def.parameters.push_back(param("b", booleans()));
  def.parameters.push_back(param("c", booleans()));
  return space(std::move(def));
}

/// 100 at the base; a alone saves 20; b alone nothing, but 30 more with a;
/// c nothing ever.
double made_up(const config& x) {
  double t = 100;
  if (x[0] == 1) t -= 20;
  if (x[0] == 1 && x[1] == 1) t -= 30;
  return t;
}

/// Predicts 90 everywhere: a figure from it is visibly not a measurement.
struct flat final : surrogate {
  void observe(const trial&) override {}
  [[nodiscard]] bool ready() const override { return true; }
  [[nodiscard]] candidate_score score(const config&, std::optional<double>) const override {
    return {.mean = 90, .sigma = 1, .p_feasible = 1, .expected_gain = 0};
  }
};

}  // namespace

TEST_CASE("interactions: standalone, without-one and pairs, measured within the budget") {
  const space s = three_switches();
  std::size_t calls = 0;
  const interaction_measure measure = [&](const config& c, std::string&) -> std::optional<double> {
    ++calls;
    return made_up(c);
  };
  const auto r = analyse_interactions(s, config{0, 0, 0}, config{1, 1, 1}, measure, nullptr, 100);
  CHECK(r.changes == std::vector<std::string>{"a=true", "b=true", "c=true"});
  CHECK(r.alone.size() == 3);
  CHECK(r.without.size() == 3);
  CHECK(r.pairs.size() == 3);
  CHECK(calls == 2 + 3 + 3 + 3);
  CHECK(r.measured == 11);
  CHECK(r.predicted == 0);
  CHECK(*r.gain(r.target) == doctest::Approx(0.5));
  CHECK(*r.gain(r.alone[0]) == doctest::Approx(0.2));
  CHECK(*r.gain(r.alone[1]) == doctest::Approx(0.0));
  CHECK(*r.gain(r.without[0]) == doctest::Approx(0.0));  // without a, b is worth nothing either
  CHECK(r.only_together() ==
        std::vector<std::string>{"b=true gains 0% alone, 30% with a=true (measured)"});
  CHECK(r.spent == 11);
  CHECK(r.text().find("budget: 11 evaluations spent, 11 figures measured in all, 0 predicted") !=
        std::string::npos);
}

TEST_CASE("interactions: past the budget the surrogate predicts, marked so") {
  const space s = three_switches();
  const interaction_measure measure = [](const config& c, std::string&) -> std::optional<double> {
    return made_up(c);
  };
  const flat model;
  const auto r = analyse_interactions(s, config{0, 0, 0}, config{1, 1, 1}, measure, &model, 5);
  CHECK(r.measured == 5);
  CHECK(r.spent == 5);
  CHECK(r.predicted == 6);
  CHECK(r.base.measured);
  CHECK(r.alone[2].measured);
  CHECK(!r.without[0].measured);
  CHECK(*r.without[0].objective == 90);
  const auto none = analyse_interactions(s, config{0, 0, 0}, config{1, 1, 1}, measure, nullptr, 5);
  CHECK(none.pairs[0].note == "not evaluated (over budget)");
}

TEST_CASE("interactions: a failed measurement is noted, not a number") {
  const space s = three_switches();
  const interaction_measure measure = [](const config& c,
                                         std::string& why) -> std::optional<double> {
    if (c[2] == 1) {
      why = "compile_error: too big";
      return std::nullopt;
    }
    return made_up(c);
  };
  const auto r = analyse_interactions(s, config{0, 0, 0}, config{1, 1, 1}, measure, nullptr, 100);
  CHECK(!r.alone[2].objective);
  CHECK(r.alone[2].note == "compile_error: too big");
  CHECK(!r.gain(r.alone[2]));
}

TEST_CASE("interactions: a study's finished trials are measured figures that cost no budget") {
  const space s = three_switches();
  std::vector<trial> known(3);
  auto finish = [&](trial& t, const config& c, measurement m) {
    t.config = c;
    t.key = s.key(c);
    t.state = trial_state::finished;
    t.result = std::move(m);
  };
  measurement ok;
  ok.objective = 77;
  measurement failed;
  failed.status = status::compile_error;
  failed.message = "PSUM overflow";
  finish(known[0], config{0, 0, 0}, ok);      // the base: its objective is taken
  finish(known[1], config{0, 0, 1}, failed);  // c alone: failed in the study
  known[2].config = config{1, 1, 1};          // the target: proposed, not finished
  known[2].key = s.key(known[2].config);
  std::size_t calls = 0;
  const interaction_measure measure = [&](const config& c, std::string&) -> std::optional<double> {
    ++calls;
    return made_up(c);
  };
  const auto r =
      analyse_interactions(s, config{0, 0, 0}, config{1, 1, 1}, measure, nullptr, 2, known);
  CHECK(*r.base.objective == 77);
  CHECK(r.base.measured);
  CHECK(!r.alone[2].objective);
  CHECK(r.alone[2].measured);
  CHECK(r.alone[2].note == "compile_error: PSUM overflow");
  CHECK(calls == 2);  // the target and a alone; the study's two figures were free
  CHECK(r.spent == 2);
  CHECK(r.measured == 4);
  CHECK(*r.target.objective == 50);
  CHECK(r.alone[1].note == "not evaluated (over budget)");
}
