// tessel/did_you_mean.hpp: "did you mean" hints for misspelt names, by edit
// distance: the DSL's unknown names, a simulator workload's knobs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessel {

/// The candidate closest to `name` by edit distance (Levenshtein plus
/// adjacent swaps), or "" when none is close: at most 1 edit for names of up
/// to 4 bytes, at most 2 for longer ones, always fewer than the name's
/// length. Ties go to the earliest candidate; `name` itself is skipped.
[[nodiscard]] std::string closest_name(std::string_view name,
                                       const std::vector<std::string>& candidates);

/// "did you mean 'x'?" for closest_name(name, candidates), or "".
[[nodiscard]] std::string did_you_mean(std::string_view name,
                                       const std::vector<std::string>& candidates);

}  // namespace tessel
