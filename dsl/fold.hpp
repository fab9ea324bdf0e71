// dsl/fold.hpp: constant folding with the semantics of include/tessel/expr.hpp
// (floor division, Python modulo, failure on overflow, division by zero,
// log2 of a value <= 0, pow2 outside 0..62).
#pragma once

#include <tessel/expr.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace tessel::dsl {

enum class fold_status : std::uint8_t { ok, division_by_zero, overflow, log2_domain, pow2_domain };

struct fold_result {
  fold_status status = fold_status::ok;
  std::int64_t value = 0;
};

/// Evaluates `op` on literal `args`. Defined for negate, logical_not, the
/// arithmetic, comparison and logical operators, min, max, ceil_div, log2,
/// pow2 and is_pow2; booleans are 0/1.
[[nodiscard]] fold_result fold(expr_op op, std::span<const std::int64_t> args);

/// Why a fold failed, for a diagnostic: "division by zero", ...
[[nodiscard]] const char* describe(fold_status status);

}  // namespace tessel::dsl

namespace tessel::dsl {

/// make_op(op, args), or its literal value when every argument is a literal
/// and the fold succeeds.
[[nodiscard]] expr make_folded(expr_op op, std::vector<expr> args);

}  // namespace tessel::dsl
