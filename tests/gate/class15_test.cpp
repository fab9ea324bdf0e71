// class15_test.cpp: round ten (b), kernels that recompute only what changed
// (docs/gate.md, "Round ten (b)"). The cpu loader's timing loop changes every
// input between calls; a kernel that keeps its previous inputs and outputs in
// its process, diffs the new inputs against them and redoes only the outputs
// the changed elements reach is right on every call. Until this round the
// loop exchanged two elements per input per call, so such a matmul redid two
// rows and two columns of C and was timed far below the honest one. Now each
// call's changes also sweep a diagonal of every input, which reaches every
// row and column: the incremental matmul redoes everything and is timed no
// faster than the honest one. Round eleven gives each call its inputs with
// every row rotated by an offset of its own, so nearly every element
// changes between calls: a transpose that writes only what changed, and a
// matmul updated by each changed element, gain nothing either. The kernels
// are real kernels (programs/increment_kernels.cpp), compiled and run by the
// backend as a user's kernel is; the incremental ones count, at their
// process's exit, the rows and columns a call's changes reached.
#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "redteam_log.hpp"
#include "temp_folder.hpp"
#include "work_dir.hpp"

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

/// Evaluates `function` of increment_kernels.cpp on the cpu backend, gated
/// under `secret`, as a user's kernel with its reference.
run evaluate(const shape_case& c, const std::string& function, std::uint64_t secret = 15) {
  const temp_folder logs;
  const auto log = kernel_log(logs);
  tessel::cpu_options o;
  o.kernel = kernel_file + ":" + function;
  o.reference = kernel_file + ":" + c.reference;
  o.inputs = c.inputs;
  o.outputs = c.outputs;
  o.flags = "-O2";
  o.cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);
  o.cpus = "off";  // a shared test machine
  o.racing = {5, 10, 0.0, 0.02, 2.0};
  o.min_sample_s = 1e-3;
  o.run_timeout_s = 30;
  o.environment["TESSEL_REDTEAM_LOG"] = log.string();
  o.gate_settings.secret = secret;
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

/// An honest kernel and its cheat, interleaved, once under each of
/// `secrets` (secret 15, three times, by default): the cheat's
/// median objective over the honest one's (of the runs the gate passed),
/// its last run, the runs the gate rejected (`caught`; `rejected_right`:
/// each as suspicious or incorrect) and what was measured, as text.
struct compared {
  double ratio = 0;
  run cheat;
  int caught = 0;
  bool rejected_right = true;
  std::string text;
};

compared compare(const shape_case& c, const std::string& honest_function,
                 const std::string& cheat_function,
                 const std::vector<std::uint64_t>& secrets = {15, 15, 15}) {
  std::vector<double> honest, cheat;
  compared out;
  for (const std::uint64_t secret : secrets) {
    const run h = evaluate(c, honest_function, secret);
    INFO(h.m.message);
    REQUIRE(h.m.ok());
    honest.push_back(h.m.objective);
    out.cheat = evaluate(c, cheat_function, secret);
    if (out.cheat.m.ok()) {
      cheat.push_back(out.cheat.m.objective);
    } else {
      ++out.caught;
      out.rejected_right = out.rejected_right && (out.cheat.m.status == status::suspicious ||
                                                  out.cheat.m.status == status::incorrect);
    }
  }
  out.ratio = cheat.empty() ? 0 : median(cheat) / median(honest);
  out.text =
      fmt::format("{} / {}: {} (honest {:.1f} us, {} {:.1f} us; caught in {} of {} rounds)",
                  cheat_function, honest_function, out.ratio, median(honest) * 1e6, cheat_function,
                  cheat.empty() ? 0.0 : median(cheat) * 1e6, out.caught, secrets.size());
  return out;
}

}  // namespace

TEST_CASE("class 15: an incremental matmul recomputes every row and column, and gains nothing") {
  // It redoes the rows of C whose row of A changed and the columns whose
  // column of B changed. Under the old loop rule (main, 072fae5) a call
  // changed 2 elements of A and 2 of B: it redid 2 rows and 2 columns of 96
  // and was timed at a small fraction of the honest kernel's time. Now every
  // call's changes reach all 96 rows of A and all 96 columns of B. Honest
  // and incremental interleaved, three times each: the ratio of medians.
  const compared c = compare(matmul, "inc_matmul_honest", "inc_matmul");
  INFO(c.cheat.m.message);
  REQUIRE(c.caught == 0);  // right: it passes, at the time of its work
  const counted& timing = c.cheat.timing;
  REQUIRE(timing.calls > timing.full);
  CHECK(timing.rows_min == 96);  // every call: every row of A changed
  CHECK(timing.cols_min == 96);  // and every column of B
  MESSAGE(c.text << "; " << timing.calls << " calls, elements changed " << timing.changed);
  CHECK(c.ratio > 0.5);  // it redoes all of C, twice: about 2 (old rule: about 0.1)
}

TEST_CASE(
    "class 15: an incremental transpose finds nearly every element changed, and gains "
    "nothing") {
  // It writes only the elements of B whose element of A changed, after a
  // diff of A against its kept copy (one pass). Round ten (b)'s rule
  // changed about 1,026 elements of 262,144 a call, reaching every row and
  // column: the kernel's diff and the copy of its kept B were sequential,
  // the honest loop's writes strided, and it was timed at 0.109 of the
  // honest kernel's time. Now each call is given its input with every row
  // rotated by an offset of its own (docs/gate.md, "Round eleven"): the
  // diff finds nearly every element changed, and the kernel writes them
  // all, strided, after its diff.
  const compared c = compare(transpose, "inc_transpose_honest", "inc_transpose");
  INFO(c.cheat.m.message);
  REQUIRE(c.caught == 0);  // right: it passes, at the time of its work
  const counted& t = c.cheat.timing;
  REQUIRE(t.calls > t.full);
  const double per_call = static_cast<double>(t.changed) / static_cast<double>(t.calls - t.full);
  MESSAGE(c.text << "; elements changed per call " << per_call << " of " << 512 * 512);
  CHECK(t.rows_min == 512);
  CHECK(t.cols_min == 512);
  CHECK(per_call >= 0.25 * 512 * 512);  // round ten (b): 1,026
  CHECK(c.ratio > 0.5);                 // round ten (b): 0.109
}

TEST_CASE("class 15: a matmul updated by each changed element does the work of two, or is caught") {
  // C' = C + (A' - A) B + A' (B' - B): each changed element of A adds a
  // multiple of a row of B to C, each changed element of B a multiple of a
  // column of A. Under round ten (b)'s rule about 194 elements of each
  // input changed a call, and it was timed at 0.055 to 0.087 of the honest
  // kernel's time under three of five secrets (docs/gate.md, "Round ten
  // (b)"). Now nearly every element changes: it does about M K N per input,
  // twice the honest work (or its rounding drifts past the bound and it is
  // caught). Under secrets 2, 3 and 4, where it passed before (under 1 and
  // 15 its timed set is an `outliers` one, where its drift was caught).
  const compared c = compare(matmul, "inc_matmul_honest", "inc_matmul_delta", {2, 3, 4});
  MESSAGE(c.text);
  INFO(c.cheat.m.message);
  CHECK(c.rejected_right);
  if (c.caught < 3) CHECK(c.ratio > 0.5);
}
