// class15_test.cpp: round ten (b), kernels that recompute only what changed
// (docs/gate.md, "Round ten (b)"). The cpu loader's timing loop changes every
// input between calls; a kernel that keeps its previous inputs and outputs in
// its process, diffs the new inputs against them and redoes only the outputs
// the changed elements reach is right on every call. Until this round the
// loop exchanged two elements per input per call, so such a matmul redid two
// rows and two columns of C and was timed far below the honest one. Now each
// call's changes also sweep a diagonal of every input, which reaches every
// row and column: the incremental matmul redoes everything and is timed no
// faster than the honest one. The kernels are real kernels
// (programs/increment_kernels.cpp), compiled and run by the backend as a
// user's kernel is; each counts, at its process's exit, the rows and
// columns a call's changes reached.
#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "redteam_log.hpp"
#include "temp_folder.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace {

using tessel::status;
using tessel::testing::lines_of;
using tessel::testing::temp_folder;

const std::string kernel_file =
    std::string(TESSEL_SOURCE_DIR) + "/tests/gate/programs/increment_kernels.cpp";

struct shape_case {
  std::string reference, inputs, outputs, space;
};

/// A 96 x 96 x 96 fp32 matmul, C = A B.
const shape_case matmul{"matmul_reference", "A:MxK,B:KxN", "C:MxN",
                        "space mm { const M = 96  const K = 96  const N = 96  param v : {1} }"};
/// A 512 x 512 fp32 transpose.
const shape_case transpose{"transpose_reference", "A:RxC", "B:CxR",
                           "space tr { const R = 512  const C = 512  param v : {1} }"};

/// What an incremental kernel counted in its timing process (its log line:
/// "NAME calls N full F rows_min R cols_min Q changed E").
struct counted {
  long long calls = 0, full = 0, rows_min = -1, cols_min = -1, changed = 0;
};

struct run {
  tessel::measurement m;
  counted timing;  // the process with the most calls: the timing's
};

/// Evaluates `function` of increment_kernels.cpp on the cpu backend, gated,
/// as a user's kernel with its reference.
run evaluate(const shape_case& c, const std::string& function) {
  const temp_folder logs;
  const auto log = logs.path() / "log";
  tessel::cpu_options o;
  o.kernel = kernel_file + ":" + function;
  o.reference = kernel_file + ":" + c.reference;
  o.inputs = c.inputs;
  o.outputs = c.outputs;
  o.flags = "-O2";
  o.cache_dir = TESSEL_CPU_TEST_CACHE;
  o.cpus = "off";  // a shared test machine
  o.racing = {5, 10, 0.0, 0.02, 2.0};
  o.min_sample_s = 1e-3;
  o.run_timeout_s = 30;
  o.environment["TESSEL_REDTEAM_LOG"] = log.string();
  o.gate_settings.secret = 15;
  const auto s = tessel::parse_space(c.space);
  tessel::cpu_backend b(o);
  b.prepare(s);
  run r;
  for (const auto& one : s.configs()) r.m = b.evaluate(s, one);  // one config
  for (const auto& line : lines_of(log)) {
    std::istringstream in(line);
    std::string name, word;
    counted k;
    in >> name >> word >> k.calls >> word >> k.full >> word >> k.rows_min >> word >> k.cols_min >>
        word >> k.changed;
    if (k.calls > r.timing.calls) r.timing = k;
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("class 15: an incremental matmul recomputes every row and column, and gains nothing") {
  // It redoes the rows of C whose row of A changed and the columns whose
  // column of B changed. Under the old loop rule (main, 072fae5) a call
  // changed 2 elements of A and 2 of B: it redid 2 rows and 2 columns of 96
  // and was timed at a small fraction of the honest kernel's time. Now every
  // call's changes reach all 96 rows of A and all 96 columns of B. Honest
  // and incremental interleaved, three times each: the ratio of medians.
  std::vector<double> honest, incremental;
  counted timing;
  for (int round = 0; round < 3; ++round) {
    const run h = evaluate(matmul, "inc_matmul_honest");
    INFO(h.m.message);
    REQUIRE(h.m.ok());
    honest.push_back(h.m.objective);
    const run i = evaluate(matmul, "inc_matmul");
    INFO(i.m.message);
    REQUIRE(i.m.ok());  // right: it passes, at the time of its work
    incremental.push_back(i.m.objective);
    timing = i.timing;
    REQUIRE(timing.calls > timing.full);
    CHECK(timing.rows_min == 96);  // every call: every row of A changed
    CHECK(timing.cols_min == 96);  // and every column of B
  }
  const double ratio = median(incremental) / median(honest);
  MESSAGE("incremental / honest, ratio of medians: "
          << ratio << " (honest " << median(honest) * 1e6 << " us, incremental "
          << median(incremental) * 1e6 << " us); " << timing.calls << " calls, elements changed "
          << timing.changed);
  CHECK(ratio > 0.5);  // it redoes all of C, twice: about 2 (old rule: about 0.1)
}

TEST_CASE("class 15: an incremental transpose's changes reach every row and column of its input") {
  // It writes only the elements of B whose element of A changed, after a
  // diff of A against its kept copy (one pass). A transpose is linear in its
  // input: the diff costs a pass over it, so its gain is bounded by the diff
  // (docs/gate.md, "Round ten (b)": not closed). What the rule now makes it
  // do: every call's changes reach all 512 rows and all 512 columns of A,
  // at least 512 elements a call (main: 2 to 4 elements, 1 to 2 rows).
  const run h = evaluate(transpose, "inc_transpose_honest");
  INFO(h.m.message);
  REQUIRE(h.m.ok());
  const run i = evaluate(transpose, "inc_transpose");
  INFO(i.m.message);
  REQUIRE(i.m.ok());
  const counted& t = i.timing;
  REQUIRE(t.calls > t.full);
  MESSAGE("incremental / honest: "
          << i.m.objective / h.m.objective << " (honest " << h.m.objective * 1e9
          << " ns, incremental " << i.m.objective * 1e9 << " ns); elements changed per call "
          << static_cast<double>(t.changed) / static_cast<double>(t.calls - t.full));
  CHECK(t.rows_min == 512);
  CHECK(t.cols_min == 512);
  CHECK(t.changed >= 512 * (t.calls - t.full));
}
