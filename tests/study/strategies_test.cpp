// Every registered strategy through a real study: the callback backend on a
// small .tsl space and the replay backend on a measured table. Never an
// invalid or repeated proposal; the optimum of an easy space; the same seed
// gives the same trial sequence, also with two jobs.
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace tessel;

namespace {

const char* bowl_text = R"(
space bowl {
  param x : 1 .. 12
  param y : pow2(1 .. 64)
  param order : perm(a, b, c)
  param fast : bool
  require x * y <= 256
}
)";

double bowl(const space& s, const config& c) {
  const auto x = s.integer(c, "x"), y = s.integer(c, "y");
  const auto order = s.value_of(c, "order").order;
  return 1.0 + (x - 7) * (x - 7) + (y - 16) * (y - 16) / 16.0 + (order.front() == "b" ? 0 : 3) +
         (s.integer(c, "fast") ? 0 : 1);
}

std::vector<std::uint64_t> run_keys(const std::string& name, std::uint64_t seed, std::size_t jobs,
                                    std::size_t budget, double* best = nullptr) {
  const auto s = parse_space(bowl_text);
  auto b = std::make_shared<callback_backend>(
      [&s](const config& c) { return measurement::success(bowl(s, c)); },
      callback_options{"bowl", 2, {}});
  study::options o;
  o.seed = seed;
  o.jobs = jobs;
  study st(s, b, make_strategy(name), o);
  const auto sum = st.run(stop::evaluations(budget) || stop::target(1.0));
  if (best && sum.best) *best = sum.best->result.objective;
  std::vector<std::uint64_t> keys;
  for (const auto& t : st.trials()) {
    CHECK(s.is_valid(t.config));
    keys.push_back(t.key);
  }
  return keys;
}

}  // namespace

TEST_CASE(
    "every strategy through the callback backend: valid, unrepeated, reproducible, finds the "
    "optimum") {
  for (const auto& name : strategy_names()) {
    CAPTURE(name);
    double best = 0;
    const auto keys = run_keys(name, 3, 1, 2000, &best);
    CHECK(std::set<std::uint64_t>(keys.begin(), keys.end()).size() == keys.size());
    CHECK(best == 1.0);  // x = 7, y = 16, order starts with b, fast
    const auto two = run_keys(name, 5, 2, 60);
    CHECK(two == run_keys(name, 5, 2, 60));
    CHECK(two == run_keys(name, 5, 1, 60));  // the proposal window, not --jobs, decides
  }
}

TEST_CASE("every strategy through the replay backend: no invalid or repeated proposal") {
  const auto path = std::string(TESSEL_DATA_DIR) + "/bench/pnpoly_RTX_3090.json.gz";
  const auto table = replay_table::load(path);
  const auto s = replay_space(path);
  for (const auto& name : strategy_names()) {
    CAPTURE(name);
    auto b = std::make_shared<replay_backend>(table);
    study::options o;
    o.seed = 9;
    study st(s, b, make_strategy(name), o);
    const auto sum = st.run(stop::evaluations(120));
    CHECK(sum.evaluations == 120);
    std::set<std::uint64_t> keys;
    for (const auto& t : st.trials()) {
      CHECK(s.is_valid(t.config));
      CHECK(keys.insert(t.key).second);
    }
    CHECK(sum.best);
  }
}
