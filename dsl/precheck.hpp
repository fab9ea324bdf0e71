// dsl/precheck.hpp: a lexical scan run before the recursive-descent parser,
// so that no input can crash it:
// - brackets nest at most max_nesting deep, and a run of prefix operators
//   (`- - - x`, `not not x`) is at most as long, so the stack is bounded;
// - bytes outside ASCII appear only in comments and string literals (the
//   grammar's character classes are defined on ASCII only).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::dsl {

inline constexpr std::size_t max_nesting = 64;

struct precheck_problem {
  std::size_t offset = 0;
  std::string message;
  std::string hint;
};

/// The first problem of `text`, or nullopt.
[[nodiscard]] std::optional<precheck_problem> precheck(std::string_view text);

}  // namespace tessel::dsl
