// src/cli/format.hpp: how the tool writes numbers and domains for people.
#pragma once

#include <tessel/space.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel::cli {

/// 1234567 -> "1,234,567".
[[nodiscard]] std::string with_separators(std::uint64_t number);

/// A fraction in [0, 1] as a percentage with useful precision: "100%",
/// "12.5%", "0.42%", "0.0013%".
[[nodiscard]] std::string percent(double fraction);

/// Milliseconds with three significant digits: "0.0412 ms", "12.3 ms", "1,234 ms".
[[nodiscard]] std::string milliseconds(double ms);

/// A short, faithful view of a domain: "128 .. 4096 step 128", "pow2(128 .. 2048)",
/// "{sbuf, hbm}", "{1, 3, 7, ..., 99}" (at most `max_items` values), "perm(m, n, k)".
[[nodiscard]] std::string domain_preview(const domain& dom, std::size_t max_items = 6);

}  // namespace tessel::cli
