// benchmarks/gate_cost.cpp: what checking timed runs costs (issue 25).
//
// In-process (a gated callback's timing loop): one gate session of an honest
// tiled fp32 matmul, the references of the check's sets computed first (the
// check already paid for them), then the same timing loop of --calls calls
// three ways, side by side and interleaved: no call judged, spot-checked (the
// first, the last and about one in 8), every call judged. Each timed call has
// a set of its own (round six), whose reference the first repetition that
// judges it computes and the later ones reuse. Charged: this thread's CPU
// seconds.
// Out of process (a gated command): evaluations of an honest program, whose
// every run is judged and timed; the program's wall seconds (run_s) beside
// the gate's (gate_s: judging, and the reference program's runs).
//
//   bench_gate_cost [--sizes 64,128,256] [--calls 64] [--reps 5] [--program PATH]
#include "common.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/gate.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using tessel::bench::thread_cpu_s;

/// C = A B of n x n fp32 matrices, the spec's reference in fp64.
struct matmul_spec : tessel::gate_spec {
  explicit matmul_spec(std::int64_t size) : n(size) {}
  std::int64_t n;
  std::vector<tessel::tensor_spec> inputs() const override {
    return {{"A", {n, n}, tessel::element_type::fp32, 0},
            {"B", {n, n}, tessel::element_type::fp32, 0}};
  }
  std::vector<tessel::tensor_spec> outputs() const override {
    return {{"C", {n, n}, tessel::element_type::fp32, 0}};
  }
  tessel::probe_values reference(std::span<const tessel::input_tensor> in,
                                 const tessel::probe_points& where) const override {
    const std::vector<double> a = in[0].values(), b = in[1].values();
    std::vector<double> c(static_cast<std::size_t>(n * n), 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t j = 0; j < n; ++j)
          c[static_cast<std::size_t>(i * n + j)] +=
              a[static_cast<std::size_t>(i * n + k)] * b[static_cast<std::size_t>(k * n + j)];
    tessel::probe_values out(1);
    for (const std::int64_t flat : where[0]) out[0].push_back(c[static_cast<std::size_t>(flat)]);
    return out;
  }
};

/// The honest kernel: fp32, i-k-j order.
tessel::output_values kernel(std::span<const tessel::hidden_input> in, std::int64_t n) {
  const std::vector<double> a64 = in[0].values(), b64 = in[1].values();
  const std::vector<float> a(a64.begin(), a64.end()), b(b64.begin(), b64.end());
  std::vector<float> c(static_cast<std::size_t>(n * n), 0.0f);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < n; ++k) {
      const float aik = a[static_cast<std::size_t>(i * n + k)];
      for (std::int64_t j = 0; j < n; ++j)
        c[static_cast<std::size_t>(i * n + j)] += aik * b[static_cast<std::size_t>(k * n + j)];
    }
  return {std::vector<double>(c.begin(), c.end())};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void in_process(const std::vector<std::int64_t>& sizes, std::size_t calls, int reps) {
  fmt::print(
      "## in-process timing loop: {} calls, CPU seconds per loop (median of {}, [min, max])\n\n",
      calls, reps);
  fmt::print(
      "| n | no call judged | spot-checked | every call judged | spot / none | every / none |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  for (const std::int64_t n : sizes) {
    tessel::gate_options o;
    o.secret = 25;
    tessel::gate g(o);
    const matmul_spec spec(n);
    auto session = g.session(spec, 1);
    session.prepare_references();
    std::vector<double> none, spot, every;
    for (int r = 0; r < reps; ++r)
      for (int mode = 0; mode < 3; ++mode) {  // interleaved: the machine's drift hits all three
        const double start = thread_cpu_s();
        for (std::size_t i = 0; i < calls; ++i) {
          const std::size_t set = session.timed_set(i);
          const tessel::output_values out = kernel(session.inputs(set), n);
          if (mode == 2 || (mode == 1 && session.spot_check(i, calls)))
            (void)session.judge(set, out);
        }
        (mode == 0 ? none : mode == 1 ? spot : every).push_back(thread_cpu_s() - start);
      }
    if (!session.finish().ok())
      fmt::print("(the honest kernel failed: {})\n", session.finish().message);
    const auto cell = [](const std::vector<double>& v) {
      return fmt::format("{:.4f} [{:.4f}, {:.4f}]", median(v),
                         *std::min_element(v.begin(), v.end()),
                         *std::max_element(v.begin(), v.end()));
    };
    fmt::print("| {} | {} | {} | {} | {:.3f} | {:.3f} |\n", n, cell(none), cell(spot), cell(every),
               median(spot) / median(none), median(every) / median(none));
  }
}

void out_of_process(const std::string& program, const std::vector<std::int64_t>& sizes, int reps) {
  fmt::print(
      "\n## gated command: every run judged and timed, wall seconds per evaluation (median of "
      "{})\n\n",
      reps);
  fmt::print(
      "| n | runs | program (run_s) | gate (gate_s) | gate / program |\n|---|---|---|---|---|\n");
  for (const std::int64_t n : sizes) {
    const auto s = tessel::parse_space(fmt::format(
        "space t {{ const M = {0}  const K = {0}  const N = {0}  param tile : {{1}} }}", n));
    std::vector<double> run, gate, runs;
    for (int r = 0; r < reps; ++r) {
      const auto b = tessel::make_backend(fmt::format("command:{} honest", program),
                                          {{"gate_inputs", "A:MxK,B:KxN"},
                                           {"gate_outputs", "C:MxN"},
                                           {"gate_reference", fmt::format("{} reference", program)},
                                           {"gate_secret", std::to_string(r + 1)}});
      b->prepare(s);
      const tessel::measurement m = b->evaluate(s, s.from_json(R"({"tile": 1})"));
      if (!m.ok()) {
        fmt::print("(the honest program failed: {})\n", m.message);
        return;
      }
      run.push_back(m.cost.run_s);
      gate.push_back(m.cost.gate_s);
      runs.push_back(static_cast<double>(m.samples.size()));
    }
    fmt::print("| {} | {:.0f} | {:.3f} | {:.3f} | {:.2f} |\n", n, median(runs), median(run),
               median(gate), median(gate) / median(run));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"what checking timed runs costs: a gated timing loop and a gated command"};
  std::string sizes_text = "64,128,256", program = TESSEL_GATE_PROGRAM;
  std::size_t calls = 64;
  int reps = 5;
  bool quick = false;
  app.add_option("--sizes", sizes_text, "matrix sizes n (n x n x n products)");
  app.add_option("--calls", calls, "timed calls per loop");
  app.add_option("--reps", reps, "repetitions (medians reported)");
  app.add_option("--program", program, "the gated command (tests/gate/programs/gate_program.cpp)");
  app.add_flag("--quick", quick, "one small size, two repetitions (the smoke test)");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::int64_t> sizes;
  for (const auto& s : tessel::bench::split(quick ? "32" : sizes_text))
    sizes.push_back(std::stoll(s));
  if (quick) reps = 2;
  in_process(sizes, quick ? 16 : calls, reps);
  if (!program.empty()) out_of_process(program, sizes, reps);
  return 0;
}
