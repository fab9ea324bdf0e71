// examples/gated_callback.cpp: tuning a C++ kernel that tessel checks.
//
// The kernel is a tiled matrix product on the host, with a bug: a tile that
// does not divide the size drops the tail (as a hasty schedule might). It
// runs as a *gated* callback: tessel hands it the gate's hidden inputs,
// times every call itself and compares every call's outputs with the
// reference, so the buggy tilings end as `incorrect` and never as the
// fastest (docs/backends.md, "Gated callbacks"; docs/gate.md).
//
//   build/release/examples/gated_callback
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>

#include <iostream>
#include <vector>

namespace {

constexpr const char* space_text = R"(
space matmul {
  const M = 96  const N = 96  const K = 96
  param tile : {8, 16, 24, 32, 64}
  let flops = 2 * M * N * K
}
)";

/// C = A B, tiled over rows and columns; a tile that does not divide the
/// size leaves the tail rows and columns zero (the bug the gate catches).
std::vector<double> tiled_product(const std::vector<double>& a, const std::vector<double>& b,
                                  std::int64_t n, std::int64_t tile) {
  std::vector<float> c(static_cast<std::size_t>(n * n), 0.0f);
  for (std::int64_t i0 = 0; i0 + tile <= n; i0 += tile)
    for (std::int64_t j0 = 0; j0 + tile <= n; j0 += tile)
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = i0; i < i0 + tile; ++i) {
          const auto aik = static_cast<float>(a[static_cast<std::size_t>(i * n + k)]);
          for (std::int64_t j = j0; j < j0 + tile; ++j)
            c[static_cast<std::size_t>(i * n + j)] +=
                aik * static_cast<float>(b[static_cast<std::size_t>(k * n + j)]);
        }
  return {c.begin(), c.end()};
}

}  // namespace

int main() {
  tessel::parse_options on_host;
  on_host.target = "cpu";  // the time floor is the host's (measured once)
  const tessel::space space = tessel::parse_space(space_text, on_host);

  tessel::callback_gate gate;
  gate.inputs = "A:MxK,B:KxN";
  gate.outputs = "C:MxN";
  gate.flops = "flops";
  gate.reference = [](const std::vector<std::vector<double>>& in) -> tessel::output_values {
    std::vector<double> c(96 * 96, 0.0);
    for (std::size_t i = 0; i < 96; ++i)
      for (std::size_t k = 0; k < 96; ++k)
        for (std::size_t j = 0; j < 96; ++j) c[i * 96 + j] += in[0][i * 96 + k] * in[1][k * 96 + j];
    return {c};
  };
  auto backend = std::make_shared<tessel::callback_backend>(
      [](const tessel::space& s, const tessel::config& c,
         std::span<const tessel::hidden_input> in) -> tessel::output_values {
        return {tiled_product(in[0].values(), in[1].values(), 96, s.integer(c, "tile"))};
      },
      gate);

  tessel::study::options options;
  options.seed = 3;
  tessel::study study(space, backend, tessel::make_strategy("exhaustive"), options);
  const auto summary = study.run(tessel::stop::evaluations(5));
  std::cout << summary.full_report();
  int incorrect = 0;
  for (const auto& t : study.trials())
    incorrect += t.result.status == tessel::status::incorrect ? 1 : 0;
  std::cout << incorrect << " of 5 tilings were caught computing the wrong product\n";
  return incorrect == 1 ? 0 : 1;  // tile 64 does not divide 96
}
