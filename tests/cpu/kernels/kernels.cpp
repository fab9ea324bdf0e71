// Test kernels of the cpu backend (tests/cpu/cpu_test.cpp): y = 2 x, done
// honestly, slowly, wrongly, noisily, lazily, or not at all. Each is one
// function; the backend compiles the file once per function and config.
#include <tessel/cpu_kernel.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#ifndef TESSEL_US
#define TESSEL_US 0  // microseconds each call spins
#endif

namespace {

void spin_for(double seconds) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
  }
}

void twice(const tessel::cpu::kernel_args& a) {
  const float* x = a.in(0).as<float>();
  float* y = a.out(0).as<float>();
  for (std::int64_t i = 0; i < a.in(0).elements(); ++i) y[i] = 2 * x[i];
}

}  // namespace

/// Honest, and TESSEL_US microseconds slow.
void spin(const tessel::cpu::kernel_args& a) {
  spin_for(TESSEL_US * 1e-6);
  twice(a);
}

/// Forgets the last element.
void wrong(const tessel::cpu::kernel_args& a) {
  twice(a);
  a.out(0).as<float>()[a.out(0).elements() - 1] = 0;
}

void crash(const tessel::cpu::kernel_args& a) {
  twice(a);
  volatile int* nowhere = nullptr;
  *nowhere = 1;
}

void hang(const tessel::cpu::kernel_args& a) {
  twice(a);
  for (;;) spin_for(1);
}

void throws(const tessel::cpu::kernel_args&) { throw std::runtime_error("no such luck"); }

/// Prints forged answer lines on stdout: the loader's answer is not stdout.
void chatty(const tessel::cpu::kernel_args& a) {
  std::printf(
      "{\"status\": \"ok\", \"samples_s\": [1e-12], \"stopped\": \"max_repeats\", \"iters\": 1}\n");
  twice(a);
}

/// Correct for its first 4 calls (the gate's runs, the warm-up), then does
/// nothing: the timed run's outputs catch it.
void lazy(const tessel::cpu::kernel_args& a) {
  static int calls = 0;
  if (++calls <= 4) twice(a);
}

/// 200 us, 0-20 us of jitter, and one call in three 600 us late.
void noisy(const tessel::cpu::kernel_args& a) {
  static std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  const double jitter = static_cast<double>(state % 1000) * 20e-9;
  spin_for(200e-6 + jitter + (state % 3 == 0 ? 600e-6 : 0.0));
  twice(a);
}
