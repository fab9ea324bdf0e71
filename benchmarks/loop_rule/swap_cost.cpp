// benchmarks/loop_rule/swap_cost.cpp: what the cpu loader's timed loop adds
// per call (backends/cpu/loader.cpp, docs/gate.md "Round seven"): one
// planned exchange of two elements per input, then the kernel called through
// a pointer (here a no-op). Not built by CMake; by hand:
//   g++ -O2 -std=c++20 -Iinclude benchmarks/loop_rule/swap_cost.cpp -o swap_cost
//   for r in 1 2 3; do ./swap_cost 0 4096 2; ./swap_cost 1 4096 2; done
// Arguments: 1 with the exchanges (0 without), elements per input, inputs.
// Prints the best of 5 loops of 10^6 calls, in ns per call.
#include <tessel/loop_rule.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct exchange {
  std::size_t a = 0, b = 0;
};

__attribute__((noinline)) void kernel(float* x) { asm volatile("" : : "r"(x) : "memory"); }

}  // namespace

int main(int argc, char** argv) {
  const bool swap = argc > 1 && argv[1][0] == '1';
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4096;
  const std::size_t inputs = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  const std::size_t iters = 1000000;
  std::vector<std::vector<float>> in(inputs, std::vector<float>(n));
  for (auto& v : in)
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  std::vector<exchange> plan(iters * inputs);
  tessel::loop_rule::stream s(5);
  for (auto& e : plan) {
    e.a = s.next() % n;
    e.b = s.next() % n;
  }
  void (*volatile k)(float*) = kernel;
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t c = 0; c < iters; ++c) {
      if (swap)
        for (std::size_t i = 0; i < inputs; ++i) {
          const exchange& e = plan[c * inputs + i];
          float* p = in[i].data();
          const float t = p[e.a];
          p[e.a] = p[e.b];
          p[e.b] = t;
        }
      k(in[0].data());
    }
    const double ns = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                      static_cast<double>(iters) * 1e9;
    if (ns < best) best = ns;
  }
  std::printf("%s n=%zu inputs=%zu: %.2f ns per call\n", swap ? "swap" : "none", n, inputs, best);
}
