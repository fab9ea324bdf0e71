// tessel/did_you_mean.hpp: "did you mean" hints for misspelt names, by edit
// distance: the DSL's unknown names, a simulator workload's knobs, strategy
// names and option keys. One rule everywhere, so every message suggests the
// same way.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

/// Optimal-string-alignment distance: Levenshtein (insert, delete,
/// substitute) plus the swap of two adjacent characters, each costing 1.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `name` by edit_distance, or "" when none is
/// close: at most 1 edit for names of up to 4 bytes, at most 2 for longer
/// ones, always fewer than the name's length. Ties go to the earliest
/// candidate; `name` itself is skipped.
[[nodiscard]] std::string closest_name(std::string_view name,
                                       std::span<const std::string_view> candidates);
[[nodiscard]] std::string closest_name(std::string_view name,
                                       const std::vector<std::string>& candidates);

/// "did you mean 'x'?" for closest_name(name, candidates), or "".
[[nodiscard]] std::string did_you_mean(std::string_view name,
                                       std::span<const std::string_view> candidates);
[[nodiscard]] std::string did_you_mean(std::string_view name,
                                       const std::vector<std::string>& candidates);

/// "unknown WHAT NAME; did you mean 'x'? (REST)" when a candidate is close,
/// else "unknown WHAT NAME: REST" (`quoted`: NAME as the message shows it):
/// an agent's unknown op, tool or argument, as the CLI's unknown options.
[[nodiscard]] std::string unknown_name(std::string_view what, std::string_view name,
                                       std::string_view quoted,
                                       const std::vector<std::string>& candidates,
                                       std::string_view rest);

}  // namespace tessel
