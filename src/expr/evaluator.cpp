#include "expr/evaluator.hpp"

#include <tessel/error.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <string>

namespace tessel::detail {
namespace {

[[noreturn]] void malformed(const std::string& what) {
  diagnostic d;
  d.message = "malformed expression: " + what;
  throw space_error({d});
}

permutation_table make_table(const domain& dom) {
  permutation_table t;
  t.n = dom.labels.size();
  t.element_ids = dom.element_ids;
  t.positions.resize(dom.size() * t.n);
  t.elements.resize(dom.size() * t.n);
  for (std::size_t rank = 0; rank < dom.size(); ++rank) {
    const auto order = dom.permutation(rank);
    for (std::size_t pos = 0; pos < t.n; ++pos) {
      t.elements[rank * t.n + pos] = static_cast<std::uint8_t>(order[pos]);
      t.positions[rank * t.n + order[pos]] = static_cast<std::uint8_t>(pos);
    }
  }
  return t;
}

// The semantics of the operators (tessel/expr.hpp, docs/language.md): each
// returns false when the operation fails, with the reason in `why`.
using i64 = std::int64_t;

/// Floor division, as Python's //.
inline bool floor_divide(i64& a, i64 b, eval_status& why) {
  if (b == 0) return (why = eval_status::division_by_zero), false;
  if (b == -1 && a == INT64_MIN) return (why = eval_status::overflow), false;
  const i64 q = a / b;
  a = q - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
  return true;
}

/// The modulo that matches floor division: the result has the divisor's sign.
inline bool floor_modulo(i64& a, i64 b, eval_status& why) {
  if (b == 0) return (why = eval_status::division_by_zero), false;
  if (b == -1) return (a = 0), true;
  i64 r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  a = r;
  return true;
}

/// a / b rounded up: the floor plus one when b does not divide a (never
/// overflows past the floor's own overflow).
inline bool ceil_divide(i64& a, i64 b, eval_status& why) {
  i64 r = a;
  if (!floor_modulo(r, b, why) || !floor_divide(a, b, why)) return false;
  a += r != 0 ? 1 : 0;
  return true;
}

inline bool binary(expr_op op, i64& a, i64 b, eval_status& why) {
  switch (op) {
    case expr_op::add:
      if (__builtin_add_overflow(a, b, &a)) return (why = eval_status::overflow), false;
      return true;
    case expr_op::subtract:
      if (__builtin_sub_overflow(a, b, &a)) return (why = eval_status::overflow), false;
      return true;
    case expr_op::multiply:
      if (__builtin_mul_overflow(a, b, &a)) return (why = eval_status::overflow), false;
      return true;
    case expr_op::divide: return floor_divide(a, b, why);
    case expr_op::modulo: return floor_modulo(a, b, why);
    case expr_op::ceil_div: return ceil_divide(a, b, why);
    case expr_op::equal: a = a == b; return true;
    case expr_op::not_equal: a = a != b; return true;
    case expr_op::less: a = a < b; return true;
    case expr_op::less_equal: a = a <= b; return true;
    case expr_op::greater: a = a > b; return true;
    case expr_op::greater_equal: a = a >= b; return true;
    case expr_op::min: a = std::min(a, b); return true;
    case expr_op::max: a = std::max(a, b); return true;
    default: break;  // unreachable: compile emits no other operator here
  }
  return (why = eval_status::overflow), false;
}

/// The operators compile() emits as one instruction after their operands.
bool is_unary(expr_op op) {
  switch (op) {
    case expr_op::negate:
    case expr_op::logical_not:
    case expr_op::log2:
    case expr_op::pow2:
    case expr_op::is_pow2: return true;
    default: return false;
  }
}

bool is_binary(expr_op op) {
  switch (op) {
    case expr_op::add:
    case expr_op::subtract:
    case expr_op::multiply:
    case expr_op::divide:
    case expr_op::modulo:
    case expr_op::ceil_div:
    case expr_op::equal:
    case expr_op::not_equal:
    case expr_op::less:
    case expr_op::less_equal:
    case expr_op::greater:
    case expr_op::greater_equal: return true;
    default: return false;
  }
}

}  // namespace

evaluator::evaluator(const std::vector<parameter>& parameters, const std::vector<let_value>& lets)
    : parameters_(&parameters), lets_(&lets), perms_(parameters.size()) {
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (parameters[i].dom.kind == param_kind::permutation)
      perms_[i] = make_table(parameters[i].dom);
}

program evaluator::compile(const expr& e) const {
  program p;
  emit(e, p, 1);
  std::sort(p.inputs.begin(), p.inputs.end());
  p.inputs.erase(std::unique(p.inputs.begin(), p.inputs.end()), p.inputs.end());
  return p;
}

bool evaluator::is_truth_value(const expr& e) const {
  switch (e->op) {
    case expr_op::literal: return e->value == 0 || e->value == 1;
    case expr_op::param: {
      const auto index = static_cast<std::size_t>(e->value);
      if (e->value < 0 || index >= parameters_->size()) return false;
      const auto& values = (*parameters_)[index].dom.values;
      return std::all_of(values.begin(), values.end(), [](i64 v) { return v == 0 || v == 1; });
    }
    case expr_op::let: {
      const auto index = static_cast<std::size_t>(e->value);
      return e->value >= 0 && index < lets_->size() && (*lets_)[index].value &&
             is_truth_value((*lets_)[index].value);
    }
    // every other node's type is its operator's result type (expr.cpp)
    default: return e->type == value_type::boolean;
  }
}

void evaluator::emit_truth(const expr& e, program& p, std::size_t depth) const {
  emit(e, p, depth);
  if (is_truth_value(e)) return;
  p.stack_size = std::max(p.stack_size, depth + 1);
  p.code.push_back({expr_op::literal, 0, 0, 0});
  p.code.push_back({expr_op::not_equal, 0, 0, 0});
}

void evaluator::emit(const expr& e, program& p, std::size_t depth) const {
  if (!e) malformed("null node");
  p.stack_size = std::max(p.stack_size, depth);
  auto push = [&](instruction i) { p.code.push_back(i); };
  auto param_of = [&](const expr& operand) -> std::size_t {
    if (!operand || operand->op != expr_op::param) malformed("permutation query needs a parameter");
    const auto index = static_cast<std::size_t>(operand->value);
    if (operand->value < 0 || index >= perms_.size() || perms_[index].n == 0)
      malformed("permutation query on a non-permutation");
    p.inputs.push_back(index);
    return index;
  };
  switch (e->op) {
    case expr_op::literal: push({expr_op::literal, 0, e->value, 0}); return;
    case expr_op::param: {
      const auto index = static_cast<std::size_t>(e->value);
      if (e->value < 0 || index >= parameters_->size()) malformed("parameter index out of range");
      p.inputs.push_back(index);
      push({expr_op::param, static_cast<std::int32_t>(index), 0, 0});
      return;
    }
    case expr_op::let: {
      const auto index = static_cast<std::size_t>(e->value);
      if (e->value < 0 || index >= lets_->size()) malformed("let index out of range");
      emit((*lets_)[index].value, p, depth);
      return;
    }
    case expr_op::logical_and:
    case expr_op::logical_or: {
      if (e->args.size() != 2) malformed("and/or need two operands");
      emit_truth(e->args[0], p, depth);
      const auto jump = p.code.size();
      push({e->op, 0, 0, 0});
      emit_truth(e->args[1], p, depth);
      p.code[jump].a = static_cast<std::int32_t>(p.code.size());
      return;
    }
    case expr_op::min:
    case expr_op::max: {
      if (e->args.empty()) malformed("min/max need operands");
      emit(e->args[0], p, depth);
      for (std::size_t i = 1; i < e->args.size(); ++i) {
        emit(e->args[i], p, depth + 1);
        push({e->op, 0, 0, 0});
      }
      return;
    }
    case expr_op::in_set: {
      if (e->args.size() != 1) malformed("in needs one operand");
      emit(e->args[0], p, depth);
      auto members = e->set;
      std::sort(members.begin(), members.end());
      p.sets.push_back(std::move(members));
      push({expr_op::in_set, static_cast<std::int32_t>(p.sets.size() - 1), 0, 0});
      return;
    }
    case expr_op::position:
    case expr_op::before: {
      if (e->args.size() != 1) malformed("pos/before need one permutation");
      const auto index = param_of(e->args[0]);
      const auto n = static_cast<std::int64_t>(perms_[index].n);
      const bool is_before = e->op == expr_op::before;
      const std::int64_t first = is_before ? (e->set.size() == 2 ? e->set[0] : -1) : e->value;
      const std::int64_t second = is_before ? (e->set.size() == 2 ? e->set[1] : -1) : 0;
      if (first < 0 || first >= n || second < 0 || second >= n)
        malformed("permutation element out of range");
      push({expr_op::param, static_cast<std::int32_t>(index), 0, 0});
      push({e->op, static_cast<std::int32_t>(index), first, second});
      return;
    }
    case expr_op::element_at: {
      if (e->args.size() != 2) malformed("p[i] needs a permutation and a position");
      const auto index = param_of(e->args[0]);
      push({expr_op::param, static_cast<std::int32_t>(index), 0, 0});
      emit(e->args[1], p, depth + 1);
      push({expr_op::element_at, static_cast<std::int32_t>(index), 0, 0});
      return;
    }
    default: {
      const std::size_t n = is_unary(e->op) ? 1 : is_binary(e->op) ? 2 : 0;
      if (n == 0) malformed("unknown operator");
      if (e->args.size() != n) malformed("wrong number of operands");
      for (std::size_t i = 0; i < n; ++i) emit(e->args[i], p, depth + i);
      push({e->op, 0, 0, 0});
      return;
    }
  }
}

eval_result evaluator::run(const program& p, const std::int64_t* values) const {
  constexpr std::size_t small = 32;
  std::array<std::int64_t, small> fixed{};
  std::vector<std::int64_t> heap;
  std::int64_t* stack = fixed.data();
  if (p.stack_size > small) {
    heap.resize(p.stack_size);
    stack = heap.data();
  }
  std::size_t top = 0;  // number of values on the stack
  eval_status why = eval_status::ok;
  const auto* code = p.code.data();
  const std::size_t size = p.code.size();
  for (std::size_t pc = 0; pc < size; ++pc) {
    const instruction& in = code[pc];
    std::int64_t& x = stack[top - (top > 0 ? 1 : 0)];
    switch (in.op) {
      case expr_op::literal: stack[top++] = in.imm; break;
      case expr_op::param: stack[top++] = values[in.a]; break;
      case expr_op::negate:
        if (__builtin_sub_overflow(0, x, &x)) return {eval_status::overflow, 0};
        break;
      case expr_op::logical_not: x = x == 0; break;
      case expr_op::logical_and:  // x is 0 or 1
        if (x == 0)
          pc = static_cast<std::size_t>(in.a) - 1;
        else
          --top;
        break;
      case expr_op::logical_or:
        if (x != 0)
          pc = static_cast<std::size_t>(in.a) - 1;
        else
          --top;
        break;
      case expr_op::log2:
        if (x <= 0) return {eval_status::log2_domain, 0};
        x = 63 - std::countl_zero(static_cast<std::uint64_t>(x));
        break;
      case expr_op::pow2:
        if (x < 0 || x > 62) return {eval_status::pow2_domain, 0};
        x = std::int64_t{1} << x;
        break;
      case expr_op::is_pow2: x = x > 0 && std::has_single_bit(static_cast<std::uint64_t>(x)); break;
      case expr_op::in_set: {
        const auto& members = p.sets[static_cast<std::size_t>(in.a)];
        x = std::binary_search(members.begin(), members.end(), x);
        break;
      }
      case expr_op::position: {
        const auto& t = perms_[static_cast<std::size_t>(in.a)];
        x = t.positions[static_cast<std::size_t>(x) * t.n + static_cast<std::size_t>(in.imm)];
        break;
      }
      case expr_op::before: {
        const auto& t = perms_[static_cast<std::size_t>(in.a)];
        const auto* pos = &t.positions[static_cast<std::size_t>(x) * t.n];
        x = pos[in.imm] < pos[in.imm2];
        break;
      }
      case expr_op::element_at: {
        const auto& t = perms_[static_cast<std::size_t>(in.a)];
        const std::int64_t at = stack[--top];
        std::int64_t& rank = stack[top - 1];
        if (at < 0 || at >= static_cast<std::int64_t>(t.n))
          return {eval_status::index_out_of_range, 0};
        rank = t.element_ids[t.elements[static_cast<std::size_t>(rank) * t.n +
                                        static_cast<std::size_t>(at)]];
        break;
      }
      default: {  // binary operators: b on top, a below
        const std::int64_t b = stack[--top];
        if (!binary(in.op, stack[top - 1], b, why)) return {why, 0};
      }
    }
  }
  return {eval_status::ok, stack[0]};
}

}  // namespace tessel::detail
