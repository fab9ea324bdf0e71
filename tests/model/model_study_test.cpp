// model_study (tessel/model.hpp) with in-test kernels: a one-kernel model is
// that kernel's study, the allocator serves the kernel that dominates the
// step, even and share split as they say, and a killed model resumes.
#include "core/space_fixtures.hpp"
#include "study/in_order.hpp"
#include "temp_folder.hpp"

#include <tessel/error.hpp>
#include <tessel/model.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// x in 1..20, default 1.
space line_space(const std::string& name) {
  space::definition def;
  def.name = name;
  std::vector<std::int64_t> xs;
  for (int i = 1; i <= 20; ++i) xs.push_back(i);
  auto p = param("x", integers(xs));
  p.default_index = 0;
  def.parameters.push_back(std::move(p));
  return space(def);
}

/// objective = base * (1 + (x - best_x)^2 / 100); roofline `roofline` x base.
class bowl final : public backend {
 public:
  bowl(double base, std::int64_t best_x, double roofline = 0)
      : base_(base), best_x_(best_x), roofline_(roofline) {}
  std::string name() const override { return "bowl"; }
  measurement evaluate(const space& s, const config& c) override {
    const double d = static_cast<double>(s.integer(c, "x") - best_x_);
    auto m = measurement::success(base_ * (1 + d * d / 100), cost{.run_s = 0.5});
    m.metrics["time_matmul_s"] = 0.75 * m.objective;
    m.metrics["flops"] = 10;
    if (roofline_ > 0) m.metrics["roofline_s"] = roofline_ * base_;
    return m;
  }
  double minimum() const { return base_; }

 private:
  double base_;
  std::int64_t best_x_;
  double roofline_;
};

/// An oracle: the expected gain of any candidate is what is left between
/// the incumbent and the true minimum, so the allocator's choice is exact.
class oracle final : public surrogate {
 public:
  explicit oracle(double minimum) : minimum_(minimum) {}
  void observe(const trial&) override {}
  bool ready() const override { return true; }
  candidate_score score(const config&, std::optional<double> incumbent) const override {
    const double left = incumbent ? std::max(0.0, *incumbent - minimum_) : 1.0;
    return {minimum_, 1.0, 1.0, left};
  }

 private:
  double minimum_;
};

std::unique_ptr<study> kernel_study(const std::string& name, std::shared_ptr<bowl> b,
                                    std::shared_ptr<study_store> db = nullptr, bool resume = false,
                                    std::size_t budget_hint = 0) {
  study::options o;
  o.window = 1;
  o.budget_hint = budget_hint;
  o.surrogate = std::make_shared<oracle>(b->minimum());
  o.resume = resume;
  return std::make_unique<study>(line_space(name), std::move(b), std::make_unique<in_order>(), o,
                                 std::move(db));
}

std::map<std::string, std::size_t> evaluations_by_kernel(const model_study& m) {
  std::map<std::string, std::size_t> out;
  for (const auto& k : m.current_summary().kernels) out[k.name] = k.evaluations;
  return out;
}

}  // namespace

TEST_CASE("step_of: calls-weighted sums, shares and categories") {
  auto a = measurement::success(2.0);
  a.metrics = {{"time_matmul_s", 1.5}, {"time_hbm_s", 0.25},   {"flops", 100},
               {"hbm_read_bytes", 8},  {"hbm_write_bytes", 2}, {"roofline_s", 1.0}};
  const auto b = measurement::success(1.0);
  const auto failed = measurement::failure(status::compile_error, "no");
  const std::vector<kernel_result> rows = {
      {"a", 3, &a}, {"b", 2, &b}, {"c", 5, &failed}, {"d", 1, nullptr}};
  const auto step = step_of(rows);
  CHECK(step.step_s == 8.0);  // 3 x 2 + 2 x 1
  CHECK(step.kernels[0].share == 0.75);
  CHECK(step.kernels[1].share == 0.25);
  CHECK(step.untimed == std::vector<std::string>{"c", "d"});
  const auto& cat = step.kernels[0].by_category;
  CHECK(cat[static_cast<std::size_t>(time_category::matmul)] == 4.5);
  CHECK(cat[static_cast<std::size_t>(time_category::hbm)] == 0.75);
  CHECK(cat[static_cast<std::size_t>(time_category::other)] == 0.75);
  CHECK(step.by_category[static_cast<std::size_t>(time_category::other)] == 2.75);
  CHECK(step.flops == 300);
  CHECK(step.hbm_bytes == 30);
  CHECK(step.roofline_s == 3);
  // a split larger than the objective is scaled back to it
  auto over = measurement::success(1.0);
  over.metrics = {{"time_matmul_s", 1.5}, {"time_stall_s", 0.5}};
  const auto scaled = categories_of(over);
  CHECK(scaled[0] == 0.75);
  CHECK(scaled[4] == 0.25);
  CHECK(scaled[5] == 0.0);
}

TEST_CASE("a model of one kernel is that kernel's study, its step calls x the best") {
  constexpr std::size_t budget = 12;
  auto alone = kernel_study("k", std::make_shared<bowl>(1.0, 9));
  const auto sum = alone->run(stop::evaluations(budget));
  std::vector<model_member> members;
  members.push_back({"k", 3, kernel_study("k", std::make_shared<bowl>(1.0, 9))});
  model_study model(std::move(members));
  const auto msum = model.run(budget);
  CHECK(msum.evaluations == budget);
  CHECK(msum.stopped == "12 evaluations done");
  const auto& trials = model.kernel_study(0).trials();
  REQUIRE(trials.size() == alone->trials().size());
  for (std::size_t i = 0; i < trials.size(); ++i) {
    CHECK(trials[i].key == alone->trials()[i].key);
    CHECK(trials[i].result.objective == alone->trials()[i].result.objective);
  }
  REQUIRE(msum.after_s);
  CHECK(*msum.after_s == 3 * sum.best->result.objective);
  CHECK(*msum.before_s == 3 * alone->trials().front().result.objective);
  CHECK(model.best_step().step_s == *msum.after_s);
  CHECK(model.first_step().step_s == *msum.before_s);
}

TEST_CASE("the allocator serves the kernel that dominates the step until it expects no gain") {
  std::vector<model_member> members;
  members.push_back({"small", 1, kernel_study("small", std::make_shared<bowl>(1.0, 15))});
  members.push_back({"big", 1000, kernel_study("big", std::make_shared<bowl>(1.0, 10))});
  model_study model(std::move(members));
  std::vector<std::size_t> order;
  while (order.size() < 25) order.push_back(*model.step());
  // each kernel's baseline first, in model order
  CHECK(order[0] == 0);
  CHECK(order[1] == 1);
  // then the big kernel until its best is its minimum (x = 10, ranks 2..10
  // after the baseline x = 1: its last gain, 1000 x 0.01, still beats the
  // small kernel's 1 x 1.96), and only then the small one
  const auto first_small = std::find(order.begin() + 2, order.end(), 0u) - order.begin();
  CHECK(first_small == 11);
  CHECK(model.kernel_study(1).best()->result.objective == 1.0);
  const auto by = evaluations_by_kernel(model);
  CHECK(by.at("big") == 10);
  CHECK(by.at("small") == 15);
}

TEST_CASE("the allocator's floor: every kernel its share first, then the dominant one") {
  // budget hints of 8 per kernel and a floor of half: 4 evaluations each,
  // round robin, before the utility serves the big kernel
  auto two = [] {
    std::vector<model_member> members;
    members.push_back(
        {"small", 1, kernel_study("small", std::make_shared<bowl>(1.0, 15), nullptr, false, 8)});
    members.push_back(
        {"big", 1000, kernel_study("big", std::make_shared<bowl>(1.0, 10), nullptr, false, 8)});
    return members;
  };
  model_study model(two(), {.floor_fraction = 0.5});
  std::vector<std::size_t> order;
  while (order.size() < 12) order.push_back(*model.step());
  CHECK(order == std::vector<std::size_t>{0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1});
  // no floor: the big kernel from its second evaluation on
  model_study greedy(two(), {.floor_fraction = 0});
  order.clear();
  while (order.size() < 6) order.push_back(*greedy.step());
  CHECK(order == std::vector<std::size_t>{0, 1, 1, 1, 1, 1});
  CHECK_THROWS_AS(model_study(two(), {.floor_fraction = 1.5}), options_error);
}

TEST_CASE("the allocator stops serving a kernel at its roofline") {
  std::vector<model_member> members;
  // 'big' starts at its roofline: there is nothing left to gain there
  members.push_back({"big", 100, kernel_study("big", std::make_shared<bowl>(1.0, 1, 1.0))});
  members.push_back({"small", 1, kernel_study("small", std::make_shared<bowl>(1.0, 15))});
  model_study model(std::move(members));
  for (int i = 0; i < 8; ++i) (void)model.step();
  CHECK(evaluations_by_kernel(model) ==
        std::map<std::string, std::size_t>{{"big", 1}, {"small", 7}});
  CHECK(model.current_summary().kernels[0].last_score == 0.0);
}

TEST_CASE("even and share allocations split the evaluations as they say") {
  auto three = [] {
    std::vector<model_member> members;
    members.push_back({"a", 1, kernel_study("a", std::make_shared<bowl>(1.0, 20))});
    members.push_back({"b", 2, kernel_study("b", std::make_shared<bowl>(1.0, 20))});
    members.push_back({"c", 1, kernel_study("c", std::make_shared<bowl>(5.0, 20))});
    return members;
  };
  model_study even(three(), {.policy = allocation::even});
  (void)even.run(10);
  CHECK(evaluations_by_kernel(even) ==
        std::map<std::string, std::size_t>{{"a", 4}, {"b", 3}, {"c", 3}});
  // baselines: a 1.36, b 2 x 1.36, c 5 x 1.36: shares 1/8, 2/8, 5/8
  model_study share(three(), {.policy = allocation::share});
  (void)share.run(16);
  CHECK(evaluations_by_kernel(share) ==
        std::map<std::string, std::size_t>{{"a", 2}, {"b", 4}, {"c", 10}});
}

TEST_CASE("model_study refuses what cannot be a model") {
  std::vector<model_member> none;
  CHECK_THROWS_WITH_AS(model_study(std::move(none)),
                       "model_study: a model needs at least one kernel", error);
  std::vector<model_member> twice;
  twice.push_back({"k", 1, kernel_study("k", std::make_shared<bowl>(1.0, 2))});
  twice.push_back({"k", 1, kernel_study("k", std::make_shared<bowl>(1.0, 2))});
  CHECK_THROWS_WITH_AS(model_study(std::move(twice)), "model_study: two kernels are named 'k'",
                       error);
  std::vector<model_member> zero;
  zero.push_back({"k", 0, kernel_study("k", std::make_shared<bowl>(1.0, 2))});
  CHECK_THROWS_WITH_AS(model_study(std::move(zero)),
                       "model_study: kernel 'k' runs 0 times per step; at least 1", error);
  CHECK(parse_allocation("share") == allocation::share);
  CHECK(!parse_allocation("fair"));
}

TEST_CASE("a killed model resumes: finished trials kept, pending candidates evaluated first") {
  const temp_folder folder;
  const auto& dir = folder.path();
  auto open = [&](bool resume) {
    std::vector<model_member> members;
    for (const auto* name : {"a", "b"}) {
      auto db = std::make_shared<sqlite_store>(dir / (std::string(name) + ".db"));
      members.push_back({name, name[0] == 'a' ? 10 : 1,
                         kernel_study(name, std::make_shared<bowl>(1.0, 12), db, resume)});
    }
    return model_study(std::move(members));
  };
  std::vector<std::pair<std::size_t, std::uint64_t>> finished_before, pending_before;
  {
    auto model = open(false);
    (void)model.run(7);
    // a kernel holds a candidate asked for and not evaluated: the kill leaves it running
    for (std::size_t k = 0; k < 2; ++k)
      for (const auto& t : model.kernel_study(k).trials())
        (t.state == trial_state::finished ? finished_before : pending_before)
            .emplace_back(k, t.key);
  }  // killed: nothing more is written
  CHECK(!pending_before.empty());
  auto model = open(true);
  CHECK(model.current_summary().evaluations == 7);
  const auto sum = model.run(12);
  CHECK(sum.evaluations == 12);
  std::vector<std::pair<std::size_t, std::uint64_t>> finished_after;
  std::size_t unfinished = 0;
  for (std::size_t k = 0; k < 2; ++k)
    for (const auto& t : model.kernel_study(k).trials())
      if (t.state == trial_state::finished)
        finished_after.emplace_back(k, t.key);
      else
        ++unfinished;
  CHECK(unfinished <= 2);  // at most one pending candidate per kernel
  CHECK(finished_after.size() == 12);
  auto finished = [&](const std::pair<std::size_t, std::uint64_t>& k) {
    return std::find(finished_after.begin(), finished_after.end(), k) != finished_after.end();
  };
  for (const auto& k : finished_before) CHECK(finished(k));
  for (const auto& k : pending_before) CHECK(finished(k));
}
