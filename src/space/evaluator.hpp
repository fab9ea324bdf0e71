// Compiles expression trees to a flat stack program and runs it on the
// integer values of a (partial) config. Private to the space engine.
#pragma once

#include <tessel/space.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::detail {

enum class opcode : std::uint8_t {
  push,
  load,
  negate,
  logical_not,
  to_bool,
  add,
  subtract,
  multiply,
  divide,
  modulo,
  equal,
  not_equal,
  less,
  less_equal,
  greater,
  greater_equal,
  min,
  max,
  ceil_div,
  log2,
  pow2,
  is_pow2,
  in_set,
  position,
  before,
  element_at,
  jump_if_false,
  jump_if_true,
  pop,
};

struct instruction {
  opcode op = opcode::push;
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
  /// Precomputes the permutation tables of `def`. Thread-safe once built.
  explicit evaluator(const space::definition& def);

  /// Compiles `e`, inlining lets. Throws space_error on a malformed tree
  /// (index out of range, a permutation query on a non-permutation).
  [[nodiscard]] program compile(const expr& e) const;

  /// Runs `p` on `values` (one per parameter: the index's domain value).
  /// nullopt when evaluation fails (division by zero, overflow, ...).
  [[nodiscard]] std::optional<std::int64_t> run(const program& p, const std::int64_t* values) const;

 private:
  void emit(const expr& e, program& p, std::size_t depth) const;
  const space::definition* def_;
  std::vector<permutation_table> perms_;  ///< indexed by parameter; n == 0 if not a permutation
};

}  // namespace tessel::detail
