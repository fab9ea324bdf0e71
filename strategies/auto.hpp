// Private: the `auto` strategy, an AUC bandit over other strategies
// (tessel/strategies.hpp, auto_options). Declared here so tests can look at
// its bandit. Not installed.
#pragma once

#include "strategies/auc_bandit.hpp"

#include <tessel/constraints.hpp>
#include <tessel/strategies.hpp>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tessel::detail {

class auto_search final : public strategy {
 public:
  auto_search(auto_options options, std::vector<std::unique_ptr<strategy>> arms);

  /// "auto". Each proposal's arm is source_of(key): "auto/<arm name>".
  [[nodiscard]] std::string name() const override { return "auto"; }
  /// Starts every arm with its own stream drawn from `seed`.
  void start(const space& s, std::uint64_t seed) override;
  std::vector<config> propose(std::size_t n, const search_context& context) override;
  void observe(const trial& t) override;

  /// "auto/<arm's source_of(key)>" ("auto/ga") for a proposal awaiting its
  /// result; "auto" otherwise.
  [[nodiscard]] std::string source_of(std::uint64_t key) const override;
  [[nodiscard]] const auc_bandit& bandit() const noexcept { return bandit_; }
  [[nodiscard]] const std::vector<std::string>& arm_names() const noexcept { return names_; }
  /// Proposals awaiting their results (bounded by what the study has in flight).
  [[nodiscard]] std::size_t pending() const noexcept { return owner_.size(); }
  /// Proposals vetoed by the learned rules so far.
  [[nodiscard]] std::size_t vetoed() const noexcept { return vetoed_.size(); }

 private:
  [[nodiscard]] std::optional<std::size_t> arm_of(const trial& t);
  /// Whether the learned rules veto `c` now (drawing the exploration coin).
  [[nodiscard]] bool veto(const config& c);

  auto_options options_;
  std::vector<std::unique_ptr<strategy>> arms_;
  std::vector<std::string> names_;
  auc_bandit bandit_;
  rng random_;
  double best_ = std::numeric_limits<double>::infinity();
  std::size_t proposed_ = 0;                              ///< proposals made (the lead phase)
  std::unordered_map<std::uint64_t, std::size_t> owner_;  ///< key -> arm, until observed
  std::optional<constraint_learner> rules_;               ///< options_.learn_constraints
  std::unordered_set<std::uint64_t> vetoed_;  ///< never proposed again (known to the arms)
  std::size_t observed_ = 0;
};

}  // namespace tessel::detail
