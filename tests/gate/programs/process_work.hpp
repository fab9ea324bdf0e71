// process_work.hpp: what the kernels of process_kernels.cpp share (round
// thirteen on): the work a call does (TESSEL_US microseconds of its thread's
// CPU time, then y = 2 x), the log they write ($TESSEL_REDTEAM_LOG) and a
// trick run on a kernel's first call only. Compiled with them by the cpu
// backend at test time (a quoted include, listed in each build's manifest,
// as redteam_tricks.hpp is).
#pragma once

#include <tessel/cpu_kernel.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

#include "redteam_tricks.hpp"

#ifndef TESSEL_US
#define TESSEL_US 200
#endif

namespace {

using tessel_redteam::note;

/// Logs this process's seccomp mode, once.
void note_seccomp() {
  static const bool noted = [] {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Seccomp:", 0) == 0)
        note("seccomp " + std::to_string(std::atoi(line.c_str() + 8)));
    return true;
  }();
  (void)noted;
}

/// `us` microseconds of this thread's CPU time (work: a thread that is not
/// running does none of it).
void spin(double us) {
  const auto now = [] {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  for (const double start = now(); now() - start < us * 1e-6;) {
  }
}

/// Part `part` of `parts` of the work: its share of the spin, then its
/// share of y = 2 x.
void share(const float* x, float* y, std::int64_t n, int part, int parts) {
  spin(static_cast<double>(TESSEL_US) / parts);
  for (std::int64_t i = n * part / parts; i < n * (part + 1) / parts; ++i) y[i] = 2 * x[i];
}

void work(const tessel::cpu::kernel_args& a) {
  note_seccomp();
  share(a.in(0).as<float>(), a.out(0).as<float>(), a.in(0).elements(), 0, 1);
}

std::string error_text(int e) { return std::strerror(e); }

/// Calls `tried` on the caller's first call only (each caller's own: the
/// type of a lambda is its own).
template <class Try>
void on_first_call(Try tried) {
  static const bool done = (tried(), true);
  (void)done;
}

}  // namespace
