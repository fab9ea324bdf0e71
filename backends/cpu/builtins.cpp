// builtins.cpp: the built-in kernels' tensors and fp64 references (builtins.hpp).
#include "cpu/builtins.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace tessel::detail {

std::int64_t kernel_constants::at(std::string_view name) const {
  const auto it = integers.find(name);
  if (it == integers.end())
    throw error(fmt::format("backend cpu: the {} kernel needs `const {} = ...` in the space",
                            kernel, name));
  return it->second;
}

std::string kernel_constants::symbol_or(std::string_view name, std::string_view fallback) const {
  const auto it = symbols.find(name);
  return it == symbols.end() ? std::string(fallback) : it->second;
}

namespace {

tensor_spec tensor(std::string name, std::vector<std::int64_t> shape,
                   element_type type = element_type::fp32) {
  return tensor_spec{std::move(name), std::move(shape), type, 0};
}

/// For each probed flat index of output 0, `value(flat)`.
template <class F>
probe_values each_probe(const probe_points& where, F value) {
  probe_values out(where.size());
  for (const auto flat : where.at(0)) out[0].push_back(value(flat));
  return out;
}

// --- gemm: C[M,N] = A[M,K] B[K,N]; A and B fp32, or bf16 with `const dtype = bf16`

element_type gemm_type(const kernel_constants& k) {
  const auto t = k.symbol_or("dtype", "fp32");
  if (t == "fp32") return element_type::fp32;
  if (t == "bf16") return element_type::bf16;
  throw error(
      fmt::format("backend cpu: the gemm kernel takes `const dtype = fp32` or bf16, not {}", t));
}

std::vector<tensor_spec> gemm_inputs(const kernel_constants& k) {
  return {tensor("A", {k.at("M"), k.at("K")}, gemm_type(k)),
          tensor("B", {k.at("K"), k.at("N")}, gemm_type(k))};
}
std::vector<tensor_spec> gemm_outputs(const kernel_constants& k) {
  return {tensor("C", {k.at("M"), k.at("N")})};
}
probe_values gemm_reference(const input_values& in, const kernel_constants& k,
                            const probe_points& where) {
  const auto n = k.at("N"), depth = k.at("K");
  return each_probe(where, [&](std::int64_t flat) {
    const auto i = flat / n, j = flat % n;
    double sum = 0;
    for (std::int64_t p = 0; p < depth; ++p)
      sum += in[0][static_cast<std::size_t>(i * depth + p)] *
             in[1][static_cast<std::size_t>(p * n + j)];
    return sum;
  });
}
double gemm_flops(const kernel_constants& k) {
  return 2.0 * static_cast<double>(k.at("M")) * static_cast<double>(k.at("N")) *
         static_cast<double>(k.at("K"));
}

// --- rmsnorm: y = x / sqrt(mean(x^2) + 1e-6) * w, rows of D

std::vector<tensor_spec> rmsnorm_inputs(const kernel_constants& k) {
  return {tensor("x", {k.at("R"), k.at("D")}), tensor("w", {k.at("D")})};
}
std::vector<tensor_spec> rows_output(const kernel_constants& k) {
  return {tensor("y", {k.at("R"), k.at("D")})};
}

/// A per-row statistic computed once per probed row.
template <class F>
probe_values by_row(const probe_points& where, std::int64_t d, F value_in_row) {
  std::unordered_map<std::int64_t, double> stat;
  return each_probe(where,
                    [&](std::int64_t flat) { return value_in_row(flat / d, flat % d, stat); });
}

probe_values rmsnorm_reference(const input_values& in, const kernel_constants& k,
                               const probe_points& where) {
  const auto d = k.at("D");
  return by_row(where, d, [&](std::int64_t r, std::int64_t j, auto& inv) {
    auto it = inv.find(r);
    if (it == inv.end()) {
      double squares = 0;
      for (std::int64_t c = 0; c < d; ++c) {
        const double v = in[0][static_cast<std::size_t>(r * d + c)];
        squares += v * v;
      }
      it = inv.emplace(r, 1.0 / std::sqrt(squares / static_cast<double>(d) + 1e-6)).first;
    }
    return in[0][static_cast<std::size_t>(r * d + j)] * it->second *
           in[1][static_cast<std::size_t>(j)];
  });
}

// --- softmax: y = exp(x - max) / sum(exp(x - max)), rows of D

std::vector<tensor_spec> softmax_inputs(const kernel_constants& k) {
  return {tensor("x", {k.at("R"), k.at("D")})};
}
probe_values softmax_reference(const input_values& in, const kernel_constants& k,
                               const probe_points& where) {
  const auto d = k.at("D");
  std::unordered_map<std::int64_t, double> max_of;
  return by_row(where, d, [&](std::int64_t r, std::int64_t j, auto& sum_of) {
    const double* row = in[0].data() + r * d;
    auto it = sum_of.find(r);
    if (it == sum_of.end()) {
      const double m = *std::max_element(row, row + d);
      double sum = 0;
      for (std::int64_t c = 0; c < d; ++c) sum += std::exp(row[c] - m);
      max_of[r] = m;
      it = sum_of.emplace(r, sum).first;
    }
    return std::exp(row[j] - max_of[r]) / it->second;
  });
}

// --- conv2d: y[i,j] = sum x[i+r, j+s] w[r,s]; x (H+R-1) x (W+S-1), w R x S, y H x W

std::vector<tensor_spec> conv2d_inputs(const kernel_constants& k) {
  return {tensor("x", {k.at("H") + k.at("R") - 1, k.at("W") + k.at("S") - 1}),
          tensor("w", {k.at("R"), k.at("S")})};
}
std::vector<tensor_spec> conv2d_outputs(const kernel_constants& k) {
  return {tensor("y", {k.at("H"), k.at("W")})};
}
probe_values conv2d_reference(const input_values& in, const kernel_constants& k,
                              const probe_points& where) {
  const auto w = k.at("W"), r = k.at("R"), s = k.at("S"), xw = w + s - 1;
  return each_probe(where, [&](std::int64_t flat) {
    const auto i = flat / w, j = flat % w;
    double sum = 0;
    for (std::int64_t a = 0; a < r; ++a)
      for (std::int64_t b = 0; b < s; ++b)
        sum += in[0][static_cast<std::size_t>((i + a) * xw + j + b)] *
               in[1][static_cast<std::size_t>(a * s + b)];
    return sum;
  });
}
double conv2d_flops(const kernel_constants& k) {
  return 2.0 * static_cast<double>(k.at("H") * k.at("W")) *
         static_cast<double>(k.at("R") * k.at("S"));
}

double no_flops(const kernel_constants&) { return 0; }

const std::vector<builtin_kernel>& table() {
  static const std::vector<builtin_kernel> kernels{
      {"conv2d", "kernels/conv2d.cpp", "conv2d", conv2d_inputs, conv2d_outputs, conv2d_reference,
       conv2d_flops},
      {"gemm", "kernels/gemm.cpp", "gemm", gemm_inputs, gemm_outputs, gemm_reference, gemm_flops},
      {"rmsnorm", "kernels/rmsnorm.cpp", "rmsnorm", rmsnorm_inputs, rows_output, rmsnorm_reference,
       no_flops},
      {"softmax", "kernels/softmax.cpp", "softmax", softmax_inputs, rows_output, softmax_reference,
       no_flops},
  };
  return kernels;
}

}  // namespace

const builtin_kernel* find_builtin(std::string_view name) {
  for (const auto& k : table())
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const auto& k : table()) names.emplace_back(k.name);
  return names;
}

}  // namespace tessel::detail
