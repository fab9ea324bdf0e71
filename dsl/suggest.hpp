// dsl/suggest.hpp: "did you mean" hints by edit distance.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::dsl {

/// Optimal-string-alignment distance (Levenshtein plus adjacent swaps).
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `name`, or "" when none is close: a distance of at
/// most 1 for names of up to 4 bytes, at most 2 for longer ones, and always
/// less than the name's length. Ties go to the earliest candidate.
[[nodiscard]] std::string closest(std::string_view name,
                                  const std::vector<std::string>& candidates);

/// "did you mean 'x'?" for the closest candidate, or "".
[[nodiscard]] std::string did_you_mean(std::string_view name,
                                       const std::vector<std::string>& candidates);

}  // namespace tessel::dsl
