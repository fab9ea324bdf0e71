// auto's `groups` arm (auto_options::interaction_groups): the interaction
// estimate groups exactly the parameters a known model couples, and the arm
// keeps the strategy contract, is credited and is reproducible inside auto.
#include "strategies/interaction_groups.hpp"
#include "harness.hpp"
#include "strategies/auto.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <set>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// A ready surrogate whose mean is `f` exactly.
class known_model final : public surrogate {
 public:
  known_model(const space& s, std::function<double(const space&, const config&)> f)
      : space_(s), f_(std::move(f)) {}
  void observe(const trial&) override {}
  [[nodiscard]] bool ready() const override { return true; }
  [[nodiscard]] candidate_score score(const config& c, std::optional<double>) const override {
    return {.mean = f_(space_, c)};
  }

 private:
  const space& space_;
  std::function<double(const space&, const config&)> f_;
};

using groups = std::vector<std::vector<std::size_t>>;

groups grouped(const space& s, const std::function<double(const space&, const config&)>& f) {
  const known_model model(s, f);
  rng random(4);
  const config centre = s.from_json(R"({"x": 3, "y": 12, "z": 16, "order": ["b", "a", "c"]})");
  return detail::interaction_groups(s, centre, model, random, 8, 0.05);
}

}  // namespace

TEST_CASE("interaction_groups: an additive model has no interactions, a product couples x and y") {
  const auto s = bowl_space();  // parameters x, y, z, order
  // bowl is a sum of one term per parameter: every parameter alone.
  CHECK(grouped(s, [](const space& sp, const config& c) { return *bowl(sp, c); }) ==
        groups{{0}, {1}, {2}, {3}});
  // (1 + (x-11)^2) * (1 + (y-5)^2) + the rest: x and y only pay off together.
  const auto coupled = [](const space& sp, const config& c) {
    const double x = static_cast<double>(sp.integer(c, "x"));
    const double y = static_cast<double>(sp.integer(c, "y"));
    const double z = std::log2(static_cast<double>(sp.integer(c, "z")));
    return (1 + (x - 11) * (x - 11)) * (1 + (y - 5) * (y - 5)) + (z - 3) * (z - 3);
  };
  CHECK(grouped(s, coupled) == groups{{0, 1}, {2}, {3}});
}

TEST_CASE("auto[interaction_groups=true] adds the groups arm: contract, credit, reproducible") {
  const auto s = bowl_space();
  auto st = make_strategy("auto[interaction_groups=true;lead=10]");
  const auto* a = dynamic_cast<const detail::auto_search*>(st.get());
  REQUIRE(a != nullptr);
  CHECK(a->arm_names() == std::vector<std::string>{"bo", "ga", "local", "groups"});
  const auto run = drive(*st, s, bowl, 120, 2, 5);
  CHECK(run.problems.empty());
  const std::set<std::string> sources(run.sources.begin(), run.sources.end());
  CHECK(sources.contains("auto/groups"));
  auto again = make_strategy("auto[interaction_groups=true;lead=10]");
  CHECK(drive(*again, s, bowl, 120, 2, 5).proposals == run.proposals);
  // Off by default: the arms as they were.
  const auto made = make_strategy("auto");
  const auto* plain = dynamic_cast<const detail::auto_search*>(made.get());
  REQUIRE(plain != nullptr);
  CHECK(plain->arm_names() == std::vector<std::string>{"bo", "ga", "local"});
  CHECK(message_of([] { (void)make_strategy("auto[interaction_threshold=-1]"); }) ==
        "strategy 'auto[interaction_threshold=-1]': interaction_threshold: must be "
        "finite and >= 0 (got -1)");
}
