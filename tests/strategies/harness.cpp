#include "harness.hpp"

#include "../core/space_fixtures.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::testing {

void fake_context::finish(const trial& t) {
  ++finished_;
  if (t.result.ok() && (!best_ || t.result.objective < best_->result.objective)) best_ = t;
}

run_record drive(strategy& st, const space& s, const objective_fn& f, std::size_t budget,
                 std::size_t batch, std::uint64_t seed, std::optional<double> target,
                 const std::vector<std::uint64_t>& pre_known,
                 const std::function<void(fake_context&)>& prepare) {
  fake_context context(s);
  if (prepare) prepare(context);
  for (auto key : pre_known) context.mark_known(key);
  run_record record;
  st.start(s, seed);
  std::uint64_t id = 0;
  while (record.proposals.size() < budget) {
    const std::size_t asked = std::min(batch, budget - record.proposals.size());
    const auto configs = st.propose(asked, context);
    if (configs.empty()) {
      record.ran_dry = true;
      break;
    }
    if (configs.size() > asked) record.problems.emplace_back("proposed more than asked");
    std::vector<trial> trials;
    for (const auto& c : configs) {
      if (!s.is_valid(c)) {
        record.problems.push_back("invalid: " + s.why_invalid(c));
        continue;
      }
      const auto key = s.key(c);
      if (context.known(key)) record.problems.push_back("known or repeated: " + s.to_json(c));
      context.mark_known(key);
      record.proposals.push_back(c);
      record.sources.push_back(st.source_of(key));
      trial t;
      t.id = ++id;
      t.config = c;
      t.key = key;
      t.provenance.source = record.sources.back();
      trials.push_back(std::move(t));
    }
    for (auto& t : trials) {
      t.state = trial_state::finished;
      if (auto y = f(s, t.config)) {
        t.result.status = status::ok;
        t.result.objective = *y;
        if (!record.best || *y < *record.best) {
          record.best = *y;
          record.evaluations_to_best = t.id;
        }
      } else {
        t.result.status = status::compile_error;
        t.result.message = "does not build";
      }
      context.finish(t);
      st.observe(t);
    }
    if (target && record.best && *record.best <= *target) break;
  }
  return record;
}

// --- spaces ---------------------------------------------------------------------

space bowl_space() {
  space::definition def;
  def.name = "bowl";
  std::vector<std::int64_t> sixteen;
  for (std::int64_t v = 0; v < 16; ++v) sixteen.push_back(v);
  def.parameters.push_back(param("x", integers(sixteen)));
  def.parameters.push_back(param("y", integers(sixteen)));
  auto z = integers({1, 2, 4, 8, 16, 32, 64});
  z.log_scale = true;
  def.parameters.push_back(param("z", z));
  def.parameters.push_back(param("order", permutation(def, {"a", "b", "c"})));
  require(def, op(expr_op::less_equal, op(expr_op::add, ref(def, "x"), ref(def, "y")), lit(24)),
          "x + y <= 24");
  return space(std::move(def));
}

namespace {

/// Inversions of `order` (element names) against the target order.
int inversions(const std::vector<std::string>& order, const std::vector<std::string>& target) {
  std::vector<std::size_t> pos;
  pos.reserve(order.size());
  for (const auto& e : order)
    pos.push_back(
        static_cast<std::size_t>(std::find(target.begin(), target.end(), e) - target.begin()));
  int count = 0;
  for (std::size_t i = 0; i < pos.size(); ++i)
    for (std::size_t j = i + 1; j < pos.size(); ++j) count += pos[i] > pos[j] ? 1 : 0;
  return count;
}

double square(double v) { return v * v; }

}  // namespace

std::optional<double> bowl(const space& s, const config& c) {
  const auto x = static_cast<double>(s.integer(c, "x"));
  const auto y = static_cast<double>(s.integer(c, "y"));
  const double z = std::log2(static_cast<double>(s.integer(c, "z")));
  const int inv = inversions(s.value_of(c, "order").order, {"c", "a", "b"});
  return 1 + square(x - 11) + square(y - 5) + square(z - 3) + 2 * inv;
}

std::optional<double> bowl_with_failures(const space& s, const config& c) {
  if (s.integer(c, "x") >= 13) return std::nullopt;
  return bowl(s, c);
}

space conditional_space() {
  space::definition def;
  def.name = "conditional";
  def.parameters.push_back(param("home", symbols(def, {"sbuf", "hbm"})));
  auto prefetch = param("prefetch", booleans());
  prefetch.when =
      op(expr_op::equal, ref(def, "home"), make_literal(def.intern("hbm"), value_type::symbol));
  def.parameters.push_back(std::move(prefetch));
  def.parameters.push_back(param("tile", integers({1, 2, 4, 8})));
  def.parameters.push_back(param("order", permutation(def, {"m", "n", "k"})));
  require(
      def,
      make_op(expr_op::logical_not, {op(expr_op::logical_and,
                                        op(expr_op::equal, ref(def, "home"),
                                           make_literal(def.intern("sbuf"), value_type::symbol)),
                                        op(expr_op::equal, ref(def, "tile"), lit(8)))}),
      "not (home == sbuf and tile == 8)");
  return space(std::move(def));
}

std::optional<double> conditional_objective(const space& s, const config& c) {
  const auto home = s.value_of(c, "home").symbol;
  const auto prefetch = s.value_of(c, "prefetch");
  const auto tile = static_cast<double>(s.integer(c, "tile"));
  double y =
      10 + square(std::log2(tile) - 2) + inversions(s.value_of(c, "order").order, {"k", "m", "n"});
  y += home == "hbm" ? (prefetch.integer != 0 ? 0 : 2) : 1;
  return y;
}

trial finished_trial(const space& s, const config& c, std::optional<double> objective,
                     double cost) {
  trial t;
  t.config = c;
  t.key = s.key(c);
  t.state = trial_state::finished;
  t.result = objective ? measurement::success(*objective)
                       : measurement::failure(status::compile_error, "does not build");
  t.result.cost.run_s = cost;
  return t;
}

}  // namespace tessel::testing
