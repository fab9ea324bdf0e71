#include "fold.hpp"

#include <algorithm>
#include <limits>

namespace tessel::dsl {

namespace {

using i64 = std::int64_t;

fold_result ok(i64 value) { return {fold_status::ok, value}; }
fold_result failed(fold_status status) { return {status, 0}; }

fold_result floor_divide(i64 a, i64 b) {
  if (b == 0) return failed(fold_status::division_by_zero);
  if (a == std::numeric_limits<i64>::min() && b == -1) return failed(fold_status::overflow);
  i64 q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return ok(q);
}

fold_result python_modulo(i64 a, i64 b) {
  if (b == 0) return failed(fold_status::division_by_zero);
  if (b == -1) return ok(0);
  i64 r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return ok(r);
}

fold_result ceil_divide(i64 a, i64 b) {
  auto q = floor_divide(a, b);
  if (q.status != fold_status::ok) return q;
  return ok(q.value + (python_modulo(a, b).value != 0 ? 1 : 0));
}

fold_result add(i64 a, i64 b) {
  i64 r = 0;
  if (__builtin_add_overflow(a, b, &r)) return failed(fold_status::overflow);
  return ok(r);
}

fold_result subtract(i64 a, i64 b) {
  i64 r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return failed(fold_status::overflow);
  return ok(r);
}

fold_result multiply(i64 a, i64 b) {
  i64 r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return failed(fold_status::overflow);
  return ok(r);
}

fold_result arithmetic(expr_op op, i64 a, i64 b) {
  switch (op) {
    case expr_op::add: return add(a, b);
    case expr_op::subtract: return subtract(a, b);
    case expr_op::multiply: return multiply(a, b);
    case expr_op::divide: return floor_divide(a, b);
    case expr_op::modulo: return python_modulo(a, b);
    case expr_op::ceil_div: return ceil_divide(a, b);
    default: break;
  }
  return failed(fold_status::overflow);
}

fold_result unary(expr_op op, i64 a) {
  switch (op) {
    case expr_op::negate:
      if (a == std::numeric_limits<i64>::min()) return failed(fold_status::overflow);
      return ok(-a);
    case expr_op::logical_not: return ok(a == 0 ? 1 : 0);
    case expr_op::is_pow2: return ok(a > 0 && (a & (a - 1)) == 0 ? 1 : 0);
    case expr_op::pow2:
      if (a < 0 || a > 62) return failed(fold_status::pow2_domain);
      return ok(i64{1} << a);
    case expr_op::log2: {
      if (a <= 0) return failed(fold_status::log2_domain);
      i64 bits = 0;
      while ((a >>= 1) != 0) ++bits;
      return ok(bits);
    }
    default: break;
  }
  return failed(fold_status::overflow);
}

fold_result compare(expr_op op, i64 a, i64 b) {
  switch (op) {
    case expr_op::equal: return ok(a == b);
    case expr_op::not_equal: return ok(a != b);
    case expr_op::less: return ok(a < b);
    case expr_op::less_equal: return ok(a <= b);
    case expr_op::greater: return ok(a > b);
    case expr_op::greater_equal: return ok(a >= b);
    case expr_op::logical_and: return ok(a != 0 && b != 0);
    case expr_op::logical_or: return ok(a != 0 || b != 0);
    default: break;
  }
  return arithmetic(op, a, b);
}

}  // namespace

fold_result fold(expr_op op, std::span<const std::int64_t> args) {
  if (op == expr_op::min && !args.empty()) return ok(*std::min_element(args.begin(), args.end()));
  if (op == expr_op::max && !args.empty()) return ok(*std::max_element(args.begin(), args.end()));
  if (args.size() == 1) return unary(op, args[0]);
  if (args.size() == 2) return compare(op, args[0], args[1]);
  return failed(fold_status::overflow);
}

const char* describe(fold_status status) {
  switch (status) {
    case fold_status::division_by_zero: return "division by zero";
    case fold_status::overflow: return "integer overflow";
    case fold_status::log2_domain: return "log2 of a value <= 0";
    case fold_status::pow2_domain: return "pow2 of a value outside 0 .. 62";
    case fold_status::ok: break;
  }
  return "ok";
}

}  // namespace tessel::dsl

namespace tessel::dsl {

expr make_folded(expr_op op, std::vector<expr> args) {
  std::vector<std::int64_t> values;
  for (const auto& arg : args) {
    if (arg->op != expr_op::literal) return make_op(op, std::move(args));
    values.push_back(arg->value);
  }
  auto result = fold(op, values);
  expr unfolded = make_op(op, std::move(args));
  if (result.status != fold_status::ok) return unfolded;
  return make_literal(result.value, unfolded->type);
}

}  // namespace tessel::dsl
