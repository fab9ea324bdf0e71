// dsl/file.hpp: a whole .tsl text checked: parse, targets, the selected
// target, --set overrides, then every space. All problems of the text are
// collected and thrown together as one space_error.
#pragma once

#include "source.hpp"

#include <tessel/dsl.hpp>

#include <vector>

namespace tessel::dsl {

struct checked_file {
  std::vector<target> targets;            ///< declared targets, file order
  std::vector<space::definition> spaces;  ///< checked spaces, file order
};

/// Checks `src` against `options`. With `spaces` false only the targets are
/// checked (and the selected target, overrides and spaces are ignored).
/// Throws space_error with every diagnostic found.
[[nodiscard]] checked_file check_file(const source& src, const parse_options& options,
                                      bool spaces = true);

}  // namespace tessel::dsl
