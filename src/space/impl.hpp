// The space engine's state, shared by the files of src/space/. Private.
#pragma once

#include "expr/evaluator.hpp"

#include <tessel/space.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::detail {

/// A node of a group's prefix tree: one value of the group's parameter at
/// this level, given the values of its ancestors. Children are contiguous in
/// the next level and ordered by domain index, so ranks follow index order.
struct tree_node {
  std::uint32_t index = 0;        ///< domain index (config::inactive for an inactive parameter)
  std::uint32_t first_child = 0;  ///< into the next level
  std::uint32_t child_count = 0;
  std::uint64_t count = 0;       ///< valid completions below (1 at the last level)
  std::uint64_t rank_begin = 0;  ///< sum of the counts of earlier siblings
};

/// A check that becomes decidable at one level of a group.
struct level_check {
  enum class kind : std::uint8_t { constraint, activity } type = kind::constraint;
  std::size_t index = 0;  ///< constraint index, or the conditional parameter's index
};

struct group_tree {
  std::vector<std::size_t> params;               ///< global parameter indices, in order
  std::vector<std::vector<level_check>> checks;  ///< per level
  std::vector<std::vector<tree_node>> levels;    ///< levels[0] are the root's children
  std::uint64_t count = 0;                       ///< valid configs of the group
  std::uint64_t stride = 1;                      ///< product of the counts of later groups
};

}  // namespace tessel::detail

namespace tessel {

struct space::impl {
  explicit impl(definition d) : def(std::move(d)), eval(def.parameters, def.lets) {}

  definition def;
  detail::evaluator eval;
  std::vector<detail::program> constraints;           ///< per constraint
  std::vector<std::optional<detail::program>> whens;  ///< per parameter
  std::vector<std::vector<std::size_t>>
      dependents;  ///< per parameter: conditional params whose `when` reads it
  std::vector<detail::group_tree> groups;
  std::vector<std::size_t> group_of;  ///< per parameter
  std::vector<constraint_stat> stats;
  std::vector<group_info> infos;
  std::vector<encoded_dimension> encoding;
  std::uint64_t count = 0;
  std::optional<std::uint64_t> cartesian;
  double log10_cartesian = 0;

  /// Domain values of `c`, one per parameter (0 for inactive ones).
  [[nodiscard]] std::vector<std::int64_t> values_of(const config& c) const;
  /// Indices in range, activity consistent with `when`, every constraint true.
  [[nodiscard]] bool valid(const config& c, std::string* why) const;
  /// Whether the `when` of parameter p holds for `values` (true if none).
  [[nodiscard]] bool active(std::size_t p, const std::int64_t* values) const;
  /// After a move, makes each conditional parameter's activity follow its
  /// `when`; nullopt when no valid config results.
  [[nodiscard]] std::optional<config> repair_conditionals(config c) const;
  [[nodiscard]] config unrank(std::uint64_t rank) const;
  [[nodiscard]] std::optional<std::uint64_t> rank_of(const config& c) const;
};

namespace detail {
/// Builds groups, trees, counts and stats into `s` (definition already checked).
void build_trees(space::impl& s);
/// Builds the numeric encoding description into `s`.
void build_encoding(space::impl& s);
}  // namespace detail

}  // namespace tessel
