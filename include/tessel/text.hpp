// tessel/text.hpp: how the outer layer writes numbers for people (the
// `tessel` tool's tables, the model reports). Part of tessel::driver.
#pragma once

#include <cstdint>
#include <string>

namespace tessel {

/// 1234567 -> "1,234,567".
[[nodiscard]] std::string with_separators(std::uint64_t number);

/// A fraction in [0, 1] as a percentage with useful precision: "100%",
/// "12.5%", "0.42%", "0.0013%".
[[nodiscard]] std::string percent(double fraction);

/// Milliseconds with three significant digits: "0.0412 ms", "12.3 ms", "1,234 ms".
[[nodiscard]] std::string milliseconds(double ms);

/// Seconds written as milliseconds(): 0.0123 -> "12.3 ms".
[[nodiscard]] std::string seconds_as_ms(double seconds);

}  // namespace tessel
