#include "space/evaluator.hpp"

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

opcode opcode_of(expr_op op) {
  switch (op) {
    case expr_op::negate: return opcode::negate;
    case expr_op::logical_not: return opcode::logical_not;
    case expr_op::add: return opcode::add;
    case expr_op::subtract: return opcode::subtract;
    case expr_op::multiply: return opcode::multiply;
    case expr_op::divide: return opcode::divide;
    case expr_op::modulo: return opcode::modulo;
    case expr_op::equal: return opcode::equal;
    case expr_op::not_equal: return opcode::not_equal;
    case expr_op::less: return opcode::less;
    case expr_op::less_equal: return opcode::less_equal;
    case expr_op::greater: return opcode::greater;
    case expr_op::greater_equal: return opcode::greater_equal;
    case expr_op::min: return opcode::min;
    case expr_op::max: return opcode::max;
    case expr_op::ceil_div: return opcode::ceil_div;
    case expr_op::log2: return opcode::log2;
    case expr_op::pow2: return opcode::pow2;
    case expr_op::is_pow2: return opcode::is_pow2;
    default: malformed("operator has no direct opcode");
  }
}

std::size_t arity(expr_op op) {
  switch (op) {
    case expr_op::negate:
    case expr_op::logical_not:
    case expr_op::log2:
    case expr_op::pow2:
    case expr_op::is_pow2: return 1;
    default: return 2;
  }
}

// Floor division and the matching modulo, as Python's // and %.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

evaluator::evaluator(const space::definition& def) : def_(&def), perms_(def.parameters.size()) {
  for (std::size_t i = 0; i < def.parameters.size(); ++i)
    if (def.parameters[i].dom.kind == param_kind::permutation)
      perms_[i] = make_table(def.parameters[i].dom);
}

program evaluator::compile(const expr& e) const {
  program p;
  emit(e, p, 1);
  std::sort(p.inputs.begin(), p.inputs.end());
  p.inputs.erase(std::unique(p.inputs.begin(), p.inputs.end()), p.inputs.end());
  return p;
}

void evaluator::emit(const expr& e, program& p, std::size_t depth) const {
  if (!e) malformed("null node");
  p.stack_size = std::max(p.stack_size, depth);
  auto push = [&](instruction i) { p.code.push_back(i); };
  auto param_of = [&](const expr& operand) -> std::size_t {
    if (!operand || operand->op != expr_op::param) malformed("permutation query needs a parameter");
    const auto index = static_cast<std::size_t>(operand->value);
    if (index >= perms_.size() || perms_[index].n == 0)
      malformed("permutation query on a non-permutation");
    p.inputs.push_back(index);
    return index;
  };
  switch (e->op) {
    case expr_op::literal: push({opcode::push, 0, e->value, 0}); return;
    case expr_op::param: {
      const auto index = static_cast<std::size_t>(e->value);
      if (e->value < 0 || index >= def_->parameters.size())
        malformed("parameter index out of range");
      p.inputs.push_back(index);
      push({opcode::load, static_cast<std::int32_t>(index), 0, 0});
      return;
    }
    case expr_op::let: {
      const auto index = static_cast<std::size_t>(e->value);
      if (e->value < 0 || index >= def_->lets.size()) malformed("let index out of range");
      emit(def_->lets[index].value, p, depth);
      return;
    }
    case expr_op::logical_and:
    case expr_op::logical_or: {
      if (e->args.size() != 2) malformed("and/or need two operands");
      emit(e->args[0], p, depth);
      push({opcode::to_bool, 0, 0, 0});
      const auto jump = p.code.size();
      push({e->op == expr_op::logical_and ? opcode::jump_if_false : opcode::jump_if_true, 0, 0, 0});
      push({opcode::pop, 0, 0, 0});
      emit(e->args[1], p, depth);
      push({opcode::to_bool, 0, 0, 0});
      p.code[jump].a = static_cast<std::int32_t>(p.code.size());
      return;
    }
    case expr_op::min:
    case expr_op::max: {
      if (e->args.empty()) malformed("min/max need operands");
      emit(e->args[0], p, depth);
      for (std::size_t i = 1; i < e->args.size(); ++i) {
        emit(e->args[i], p, depth + 1);
        push({opcode_of(e->op), 0, 0, 0});
      }
      return;
    }
    case expr_op::in_set: {
      if (e->args.size() != 1) malformed("in needs one operand");
      emit(e->args[0], p, depth);
      auto members = e->set;
      std::sort(members.begin(), members.end());
      p.sets.push_back(std::move(members));
      push({opcode::in_set, static_cast<std::int32_t>(p.sets.size() - 1), 0, 0});
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
      push({opcode::load, static_cast<std::int32_t>(index), 0, 0});
      push({is_before ? opcode::before : opcode::position, static_cast<std::int32_t>(index), first,
            second});
      return;
    }
    case expr_op::element_at: {
      if (e->args.size() != 2) malformed("p[i] needs a permutation and a position");
      const auto index = param_of(e->args[0]);
      push({opcode::load, static_cast<std::int32_t>(index), 0, 0});
      emit(e->args[1], p, depth + 1);
      push({opcode::element_at, static_cast<std::int32_t>(index), 0, 0});
      return;
    }
    default: {
      const auto n = arity(e->op);
      if (e->args.size() != n) malformed("wrong number of operands");
      for (std::size_t i = 0; i < n; ++i) emit(e->args[i], p, depth + i);
      push({opcode_of(e->op), 0, 0, 0});
      return;
    }
  }
}

std::optional<std::int64_t> evaluator::run(const program& p, const std::int64_t* values) const {
  constexpr std::size_t small = 32;
  std::array<std::int64_t, small> fixed{};
  std::vector<std::int64_t> heap;
  std::int64_t* stack = fixed.data();
  if (p.stack_size > small) {
    heap.resize(p.stack_size);
    stack = heap.data();
  }
  std::size_t top = 0;  // number of values on the stack
  const auto* code = p.code.data();
  const std::size_t size = p.code.size();
  for (std::size_t pc = 0; pc < size; ++pc) {
    const instruction& in = code[pc];
    std::int64_t& x = stack[top - (top > 0 ? 1 : 0)];
    switch (in.op) {
      case opcode::push: stack[top++] = in.imm; break;
      case opcode::load: stack[top++] = values[in.a]; break;
      case opcode::negate:
        if (__builtin_sub_overflow(0, x, &x)) return std::nullopt;
        break;
      case opcode::logical_not: x = x == 0; break;
      case opcode::to_bool: x = x != 0; break;
      case opcode::pop: --top; break;
      case opcode::jump_if_false:
        if (x == 0) pc = static_cast<std::size_t>(in.a) - 1;
        break;
      case opcode::jump_if_true:
        if (x != 0) pc = static_cast<std::size_t>(in.a) - 1;
        break;
      case opcode::log2:
        if (x <= 0) return std::nullopt;
        x = 63 - std::countl_zero(static_cast<std::uint64_t>(x));
        break;
      case opcode::pow2:
        if (x < 0 || x > 62) return std::nullopt;
        x = std::int64_t{1} << x;
        break;
      case opcode::is_pow2: x = x > 0 && std::has_single_bit(static_cast<std::uint64_t>(x)); break;
      case opcode::in_set: {
        const auto& members = p.sets[static_cast<std::size_t>(in.a)];
        x = std::binary_search(members.begin(), members.end(), x);
        break;
      }
      case opcode::position: {
        const auto& t = perms_[static_cast<std::size_t>(in.a)];
        x = t.positions[static_cast<std::size_t>(x) * t.n + static_cast<std::size_t>(in.imm)];
        break;
      }
      case opcode::before: {
        const auto& t = perms_[static_cast<std::size_t>(in.a)];
        const auto* pos = &t.positions[static_cast<std::size_t>(x) * t.n];
        x = pos[in.imm] < pos[in.imm2];
        break;
      }
      case opcode::element_at: {
        const auto& t = perms_[static_cast<std::size_t>(in.a)];
        const std::int64_t at = stack[--top];
        std::int64_t& rank = stack[top - 1];
        if (at < 0 || at >= static_cast<std::int64_t>(t.n)) return std::nullopt;
        rank = t.element_ids[t.elements[static_cast<std::size_t>(rank) * t.n +
                                        static_cast<std::size_t>(at)]];
        break;
      }
      default: {  // binary operators: b on top, a below
        const std::int64_t b = stack[--top];
        std::int64_t& a = stack[top - 1];
        switch (in.op) {
          case opcode::add:
            if (__builtin_add_overflow(a, b, &a)) return std::nullopt;
            break;
          case opcode::subtract:
            if (__builtin_sub_overflow(a, b, &a)) return std::nullopt;
            break;
          case opcode::multiply:
            if (__builtin_mul_overflow(a, b, &a)) return std::nullopt;
            break;
          case opcode::divide:
            if (b == 0 || (b == -1 && a == INT64_MIN)) return std::nullopt;
            a = floor_div(a, b);
            break;
          case opcode::modulo:
            if (b == 0) return std::nullopt;
            a = b == -1 ? 0 : floor_mod(a, b);
            break;
          case opcode::ceil_div:
            if (b == 0 || a == INT64_MIN || (b == -1 && a == INT64_MIN)) return std::nullopt;
            a = -floor_div(-a, b);
            break;
          case opcode::equal: a = a == b; break;
          case opcode::not_equal: a = a != b; break;
          case opcode::less: a = a < b; break;
          case opcode::less_equal: a = a <= b; break;
          case opcode::greater: a = a > b; break;
          case opcode::greater_equal: a = a >= b; break;
          case opcode::min: a = std::min(a, b); break;
          case opcode::max: a = std::max(a, b); break;
          default: return std::nullopt;
        }
      }
    }
  }
  return top == 1 ? std::optional<std::int64_t>(stack[0]) : std::nullopt;
}

}  // namespace tessel::detail
