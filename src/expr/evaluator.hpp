// The one evaluator of tessel expressions (tessel/expr.hpp): compiles a tree
// to a flat stack program and runs it on the integer values of a (partial)
// config. The space engine runs it on every check; tessel::evaluate and
// tessel::fold (the DSL's constant folding) run it on constant trees.
// Private to the core.
#pragma once

#include <tessel/space.hpp>

#include <cstdint>
#include <vector>

namespace tessel::detail {

/// One step of a program. Its operation is an expression operator:
/// - literal pushes `imm`; param pushes the value of parameter `a`;
/// - unary and binary operators replace their operands (on top of the
///   stack) with the result; min and max take two (n-ary ones are chained);
/// - in_set tests the top against sorted set `a`; position and before read
///   permutation parameter `a` (its rank on top) for element `imm` (and
///   `imm2`); element_at pops the position and reads permutation `a`;
/// - logical_and / logical_or are the short-circuit test after the left
///   operand (0/1 on top): jump to `a` keeping it when it decides the
///   result, else pop it and go on to the right operand.
struct instruction {
  expr_op op = expr_op::literal;
  std::int32_t a = 0;     ///< parameter index, set index or jump target
  std::int64_t imm = 0;   ///< literal, element index
  std::int64_t imm2 = 0;  ///< second element index (before)
};

/// A compiled expression: straight-line code with forward jumps for the
/// short-circuit operators. `inputs` lists the parameters it reads (through
/// lets too), sorted and unique.
struct program {
  std::vector<instruction> code;
  std::vector<std::vector<std::int64_t>> sets;  ///< sorted members of in_set
  std::vector<std::size_t> inputs;
  std::size_t stack_size = 0;
};

/// Per permutation parameter: positions[rank * n + element] and
/// elements[rank * n + position] (element indices), plus element symbol ids.
struct permutation_table {
  std::size_t n = 0;
  std::vector<std::uint8_t> positions;
  std::vector<std::uint8_t> elements;
  std::vector<std::int64_t> element_ids;
};

class evaluator {
 public:
  /// Precomputes the permutation tables of `parameters`; keeps references to
  /// both vectors, which must outlive it. Thread-safe once built.
  evaluator(const std::vector<parameter>& parameters, const std::vector<let_value>& lets);

  /// Compiles `e`, inlining lets. Throws space_error on a malformed tree
  /// (index out of range, a permutation query on a non-permutation).
  [[nodiscard]] program compile(const expr& e) const;

  /// Runs `p` on `values` (one per parameter: the index's domain value; may
  /// be null when `p` reads none).
  [[nodiscard]] eval_result run(const program& p, const std::int64_t* values) const;

 private:
  void emit(const expr& e, program& p, std::size_t depth) const;
  /// Emits `e` so that it leaves 0 or 1 (an and/or operand).
  void emit_truth(const expr& e, program& p, std::size_t depth) const;
  [[nodiscard]] bool is_truth_value(const expr& e) const;
  const std::vector<parameter>* parameters_;
  const std::vector<let_value>* lets_;
  std::vector<permutation_table> perms_;  ///< indexed by parameter; n == 0 if not a permutation
};

}  // namespace tessel::detail
