// examples/tune_callback.cpp: tuning a C++ function from C++.
//
// The space is written in the .tsl language inline; the "kernel" is a blocked
// matrix transpose on the host, timed for real through the callback backend;
// the study searches with the default `auto` strategy, stores every trial in
// a study file, and prints Ceres-style reports.
//
//   build/release/examples/tune_callback [study.tessel.db]
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/storage.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>

#include <chrono>
#include <iostream>
#include <vector>

namespace {

constexpr const char* space_text = R"(
space transpose {
  const n = 1024
  param block_rows : pow2(1 .. 256) = 16
  param block_cols : pow2(1 .. 256) = 16
  param order      : perm(rows, cols)
  require block_rows * block_cols <= 4096 "a block must fit in L1"
}
)";

/// Blocked out-of-place transpose of an n x n matrix; returns seconds (best of 3).
double transpose_seconds(std::int64_t n, std::int64_t br, std::int64_t bc, bool rows_first) {
  std::vector<float> in(static_cast<std::size_t>(n * n), 1.0f), out(in.size());
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i0 = 0; i0 < n; i0 += rows_first ? br : bc)
      for (std::int64_t j0 = 0; j0 < n; j0 += rows_first ? bc : br) {
        const auto [r0, c0] = rows_first ? std::pair{i0, j0} : std::pair{j0, i0};
        for (std::int64_t i = r0; i < std::min(r0 + br, n); ++i)
          for (std::int64_t j = c0; j < std::min(c0 + bc, n); ++j)
            out[static_cast<std::size_t>(j * n + i)] = in[static_cast<std::size_t>(i * n + j)];
      }
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best + out[1] * 0.0;  // keep the result alive
}

}  // namespace

int main(int argc, char** argv) {
  const tessel::space space = tessel::parse_space(space_text);
  std::cout << "space '" << space.name() << "': " << space.count() << " valid configs\n";

  auto backend = std::make_shared<tessel::callback_backend>([&space](const tessel::config& c) {
    return transpose_seconds(*space.evaluate(c, "n"), space.integer(c, "block_rows"),
                             space.integer(c, "block_cols"),
                             space.value_of(c, "order").order.front() == "rows");
  });

  std::shared_ptr<tessel::study_store> db;
  if (argc > 1) db = tessel::open_store(argv[1]);

  tessel::study::options options;
  options.seed = 7;
  options.resume = true;  // a file from an earlier run: continue its study
  tessel::study study(space, backend, tessel::make_strategy("auto"), options, db);
  const auto summary = study.run(tessel::stop::evaluations(60) || tessel::stop::no_improvement(25));
  std::cout << summary.full_report();
  return 0;
}
