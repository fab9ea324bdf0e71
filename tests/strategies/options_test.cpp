// Options validation names the field and the rule; the registry builds
// every strategy by name and suggests the closest name for a typo.
#include "harness.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace tessel;

using namespace tessel::testing;

TEST_CASE("default options are valid") {
  CHECK_NOTHROW(random_options{}.validate());
  CHECK_NOTHROW(exhaustive_options{}.validate());
  CHECK_NOTHROW(local_options{}.validate());
  CHECK_NOTHROW(annealing_options{}.validate());
  CHECK_NOTHROW(ga_options{}.validate());
  CHECK_NOTHROW(auto_options{}.validate());
}

TEST_CASE("options errors name the field and the rule") {
  CHECK(message_of([] { random_options{.sample_attempts = 0}.validate(); }) ==
        "random_options.sample_attempts: must be at least 1 (got 0)");
  CHECK(message_of([] { local_options{.sample_attempts = 0}.validate(); }) ==
        "local_options.sample_attempts: must be at least 1 (got 0)");
  CHECK(message_of([] { annealing_options{.cooling = 1.5}.validate(); }) ==
        "annealing_options.cooling: must be in (0, 1) (got 1.5)");
  CHECK(message_of([] { annealing_options{.initial_temperature = -1}.validate(); }) ==
        "annealing_options.initial_temperature: must be finite and > 0 (got -1)");
  CHECK(message_of([] { annealing_options{.min_temperature = 0.5}.validate(); }) ==
        "annealing_options.min_temperature: must be in (0, initial_temperature) (got 0.5)");
  CHECK(message_of([] { annealing_options{.restart_from_best = 2}.validate(); }) ==
        "annealing_options.restart_from_best: must be in [0, 1] (got 2)");
  CHECK(message_of([] { ga_options{.population_size = 1}.validate(); }) ==
        "ga_options.population_size: must be at least 2 (got 1)");
  CHECK(message_of([] { ga_options{.tournament_size = 0}.validate(); }) ==
        "ga_options.tournament_size: must be in [1, population_size] (got 0)");
  CHECK(message_of([] { ga_options{.crossover_rate = -0.1}.validate(); }) ==
        "ga_options.crossover_rate: must be in [0, 1] (got -0.1)");
  CHECK(message_of([] { ga_options{.mutation_rate = 1.1}.validate(); }) ==
        "ga_options.mutation_rate: must be in [0, 1] (got 1.1)");
  CHECK(message_of([] {
          ga_options{.population_size = 4, .tournament_size = 2, .elite_count = 4}.validate();
        }) == "ga_options.elite_count: must be less than population_size (got 4)");
  CHECK(message_of([] { ga_options{.cost_draws = 0}.validate(); }) ==
        "ga_options.cost_draws: must be at least 1 (got 0)");
  CHECK(message_of([] { local_options{.cost_draws = 0}.validate(); }) ==
        "local_options.cost_draws: must be at least 1 (got 0)");
  CHECK(message_of([] { auto_options{.arms = {}}.validate(); }) ==
        "auto_options.arms: must name at least one strategy");
  CHECK(message_of([] {
          auto_options{.arms = {"random", "gaa"}}.validate();
        }) ==
        "auto_options.arms[1]: unknown strategy 'gaa' (did you mean 'ga'?); known: random, "
        "exhaustive, local, "
        "annealing, ga, bo, auto");
  CHECK(message_of([] { auto_options{.arms = {"auto"}}.validate(); }) ==
        "auto_options.arms[0]: must not be 'auto' itself");
  CHECK(message_of([] {
          auto_options{.arms = {"local", "local"}}.validate();
        }) == "auto_options.arms[1]: repeats 'local'");
  CHECK(message_of([] { auto_options{.exploration = -1}.validate(); }) ==
        "auto_options.exploration: must be finite and >= 0 (got -1)");
  CHECK(message_of([] { auto_options{.window = 0}.validate(); }) ==
        "auto_options.window: must be at least 1 (got 0)");
}

TEST_CASE("factories validate their options") {
  CHECK_THROWS_AS((void)make_ga_strategy({.population_size = 1}), options_error);
  CHECK_THROWS_AS((void)make_annealing_strategy({.cooling = 0}), options_error);
  CHECK_THROWS_AS((void)make_auto_strategy({.arms = {"nope"}}), options_error);
  CHECK_THROWS_AS((void)make_auto_strategy({}, {}), options_error);
}

TEST_CASE("the registry builds every strategy by name") {
  const auto names = strategy_names();
  CHECK(names ==
        std::vector<std::string>{"random", "exhaustive", "local", "annealing", "ga", "bo", "auto"});
  for (const auto& name : names) CHECK(make_strategy(name)->name() == name);
}

TEST_CASE("an unknown strategy name lists the known ones and suggests the closest") {
  CHECK(message_of([] { (void)make_strategy("anealing"); }) ==
        "error: unknown strategy 'anealing' (did you mean 'annealing'?); known: random, "
        "exhaustive, local, "
        "annealing, ga, bo, auto");
  CHECK(
      message_of([] { (void)make_strategy("bayes"); }) ==
      "error: unknown strategy 'bayes'; known: random, exhaustive, local, annealing, ga, bo, auto");
}

TEST_CASE("bayesian options name the field and the rule") {
  CHECK_NOTHROW(bo_options{}.validate());
  CHECK_NOTHROW(gp_options{}.validate());
  CHECK_NOTHROW(cost_model_options{}.validate());
  CHECK(message_of([] { bo_options{.pool_size = 0}.validate(); }) ==
        "bo_options.pool_size: must be at least 1 (got 0)");
  CHECK(message_of([] { bo_options{.model = {.refit_growth = 1.0}}.validate(); }) ==
        "bo_options.model.refit_growth: must be finite and > 1 (got 1)");
  CHECK(message_of([] { gp_options{.min_p_feasible = 0}.validate(); }) ==
        "gp_options.min_p_feasible: must be in (0, 1) (got 0)");
  CHECK(message_of([] { gp_options{.max_model_points = 8}.validate(); }) ==
        "gp_options.max_model_points: must be 0 (no limit) or at least 16 (got 8)");
  CHECK(message_of([] { bo_options{.feasibility_cutoff = 2}.validate(); }) ==
        "bo_options.feasibility_cutoff: must be in [0, 1] (got 2)");
  CHECK(message_of([] { cost_model_options{.prior_log_sd = -1}.validate(); }) ==
        "cost_model_options.prior_log_sd: must be finite and > 0 (got -1)");
  CHECK(message_of([] { cost_model_options{.max_points = 4}.validate(); }) ==
        "cost_model_options.max_points: must be at least 16 (got 4)");
  CHECK(message_of([] { cost_model_options{.refit_growth = 0.5}.validate(); }) ==
        "cost_model_options.refit_growth: must be finite and > 1 (got 0.5)");
  CHECK(message_of([] { cost_model_options{.run_link_max_sd = -1}.validate(); }) ==
        "cost_model_options.run_link_max_sd: must be finite and >= 0 (got -1)");
  CHECK(message_of([] { bo_options{.initial_draws = 0}.validate(); }) ==
        "bo_options.initial_draws: must be at least 1 (got 0)");
  CHECK_THROWS_AS((void)make_bo_strategy({.initial_samples = 0}), options_error);
}

TEST_CASE("bo and auto take options as a spec: bo[KEY=VALUE;...]") {
  const auto s = bowl_space();
  auto proposals = [&](strategy& st) { return drive(st, s, bowl, 25, 1, 7).proposals; };
  // The spec builds what the options struct would.
  auto from_spec = make_strategy("bo[initial_samples=12;pool_size=64;acquisition=ucb]");
  auto from_options = make_bo_strategy(
      {.initial_samples = 12, .acquisition = acquisition_kind::ucb, .pool_size = 64});
  auto plain = make_strategy("bo");
  const auto a = proposals(*from_spec), b = proposals(*from_options), c = proposals(*plain);
  CHECK(a == b);
  CHECK(a != c);
  // The model's fields by path.
  auto model_spec = make_strategy("bo[model.max_model_points=16;model.alignment_features=false]");
  bo_options small;
  small.model.max_model_points = 16;
  small.model.alignment_features = false;
  auto model_built = make_bo_strategy(small);
  CHECK(proposals(*model_spec) == proposals(*model_built));
  // auto's keys and its bo arm's.
  auto auto_spec = make_strategy("auto[lead=5;arms=bo+ga;initial_samples=12;ucb_kappa=2.5]");
  std::vector<std::unique_ptr<strategy>> arms;
  arms.push_back(make_bo_strategy({.initial_samples = 12, .ucb_kappa = 2.5}));
  arms.push_back(make_strategy("ga"));
  auto_options o;
  o.lead = 5;
  auto auto_built = make_auto_strategy(o, std::move(arms));
  const auto d = drive(*auto_spec, s, bowl, 40, 1, 7), e = drive(*auto_built, s, bowl, 40, 1, 7);
  CHECK(d.proposals == e.proposals);
  CHECK(d.sources == e.sources);

  // Errors name the spec and what is wrong with it.
  CHECK(message_of([] { (void)make_strategy("bo[initail_draws=1]"); })
            .starts_with(
                "error: strategy 'bo[initail_draws=1]': unknown key 'initail_draws' (did you mean "
                "'initial_draws'?); bo takes acquisition, "));
  CHECK(message_of([] { (void)make_strategy("auto[lead=x]"); }) ==
        "error: strategy 'auto[lead=x]': lead: 'x' is not a whole number");
  CHECK(message_of([] { (void)make_strategy("bo[lead=5]"); }).find("unknown key 'lead'") !=
        std::string::npos);  // auto's key, not bo's
  CHECK(message_of([] { (void)make_strategy("bo[initial_draws=0]"); }) ==
        "strategy 'bo[initial_draws=0]': initial_draws: must be at least 1 (got 0)");
  CHECK(message_of([] { (void)make_strategy("ga[x=1]"); }) ==
        "error: strategy 'ga[x=1]': only bo and auto take options in [...]");
  CHECK(message_of([] { (void)make_strategy("bo[ucb_kappa]"); }) ==
        "error: strategy 'bo[ucb_kappa]': 'ucb_kappa' is not KEY=VALUE");
  CHECK(message_of([] { (void)make_strategy("bo[pool_size=8"); }) ==
        "error: strategy 'bo[pool_size=8': options go in [KEY=VALUE;...], closed by ']'");
  CHECK(message_of([] { (void)make_strategy("bo[acquisition=ei]"); }) ==
        "error: strategy 'bo[acquisition=ei]': acquisition: 'ei' is not log_ei, ucb or thompson");
  CHECK(message_of([] {
          (void)make_strategy("auto[arms=bo+gaa]");
        }).find("unknown strategy 'gaa' (did you mean 'ga'?)") != std::string::npos);
}
