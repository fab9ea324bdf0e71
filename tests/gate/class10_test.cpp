// class10_test.cpp: round five, cheats of kinds no earlier round had, aimed
// at the ways an agent writing NKI-style kernels cuts corners: softmax
// without its max, a low-order exp or rsqrt, terms below a cutoff dropped, a
// sum that stops once it "converges", one max or norm for every row, epsilon
// left out, a block skipped when its first elements are zero, the padding
// found in the first row and skipped in all, the tail left from the previous
// call, a transpose when the shape is square, argmax ties broken the other
// way, stochastic rounding, a gated command that reports a previous run's
// time, and a gated callback that memoises its outputs (round six: it, and
// a gated command that memoises on disk, gain nothing now). The row cheats run
// against the cpu backend's built-in softmax and rmsnorm specs (fp32) and
// the simulator's softmax (bf16), the specs a user meets. Each asserts
// today's verdict beside honest controls (docs/gate.md, "Round five").
#include "matmul_kernel.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/gate.hpp>
#include <tessel/target.hpp>

#include "cpu/builtins.hpp"
#include "cpu_spec.hpp"
#include "sim/machine.hpp"
#include "sim/workload.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using namespace tessel;
using namespace tessel::testing;

constexpr std::uint64_t secrets[] = {3, 5, 7};

// --- the specs a user meets --------------------------------------------------------

/// The simulator's functional spec of an example space's default config.
std::unique_ptr<tessel::sim::functional_kernel> sim_spec(
    const std::string& example, std::map<std::string, std::string, std::less<>> set) {
  tessel::parse_options options;
  options.target = "trn2";
  options.overrides = std::move(set);
  const tessel::space s =
      tessel::load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/" + example + ".tsl", options);
  const auto config = s.default_config();
  REQUIRE(config);
  auto kernel = tessel::sim::workload_for_space(s, "")->functional(
      s, *config, tessel::sim::resolve_machine(*tessel::builtin_target("trn2")));
  REQUIRE(kernel);
  return kernel;
}

/// idx[r] = the first index of row r's largest x (argmax, ties to the first: numpy's).
struct argmax_spec : tessel::gate_spec {
  std::int64_t rows = 64, cols = 96;
  std::vector<tessel::tensor_spec> inputs() const override {
    return {{"x", {rows, cols}, element_type::fp32}};
  }
  std::vector<tessel::tensor_spec> outputs() const override {
    return {{"idx", {rows}, element_type::int32}};
  }
  tessel::probe_values reference(std::span<const tessel::input_tensor> in,
                                 const tessel::probe_points& where) const override {
    tessel::probe_values out(1);
    for (const std::int64_t r : where[0]) {
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < cols; ++c)
        if (in[0].at(r, c) > in[0].at(r, best)) best = c;
      out[0].push_back(static_cast<double>(best));
    }
    return out;
  }
};

// --- row kernels: softmax ----------------------------------------------------------

/// How a softmax cheat departs from the honest schedule (fp32 exp and sums,
/// the row's max subtracted, one division, rounded to the output type).
enum class softmax_cut : unsigned char {
  none,
  no_max,      ///< exp(x) / sum exp(x): the max never subtracted
  poly_exp,    ///< 2^f by a degree-2 polynomial after range reduction (0.2% off)
  cutoff,      ///< terms with x - max < -12 dropped (they "cannot matter")
  early_stop,  ///< the sum stops when a chunk of 32 adds less than 2^-20 of it
  global_max,  ///< one max for the whole tensor (every row shares it)
};

float poly_exp(float x) {
  // e^x = 2^(x log2 e) = 2^n 2^f, f in [0, 1): 2^f ~ 1 + 0.6565 f + 0.3435 f^2.
  const float y = x * 1.44269504F;
  const float n = std::floor(y), f = y - n;
  if (n < -126) return 0;
  return std::ldexp(1 + f * (0.6565F + 0.3435F * f), static_cast<int>(n));
}

struct softmax_kernel : gated_kernel {
  softmax_kernel(std::int64_t r, std::int64_t d, element_type out, softmax_cut c)
      : rows(r), cols(d), type(out), cut(c) {}
  std::int64_t rows, cols;
  element_type type;
  softmax_cut cut;
  output_values run(std::span<const hidden_input> in) const override {
    const std::vector<double> x = in[0].values();
    std::vector<double> y(x.size());
    float global = -std::numeric_limits<float>::infinity();
    for (const double v : x) global = std::max(global, static_cast<float>(v));
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* row = x.data() + r * cols;
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<float>(row[c]));
      if (cut == softmax_cut::no_max) m = 0;
      if (cut == softmax_cut::global_max) m = global;
      std::vector<float> e(static_cast<std::size_t>(cols));
      for (std::int64_t c = 0; c < cols; ++c) {
        const float z = static_cast<float>(row[c]) - m;
        float v = cut == softmax_cut::poly_exp ? poly_exp(z) : std::exp(z);
        if (cut == softmax_cut::cutoff && z < -12) v = 0;
        e[static_cast<std::size_t>(c)] = v;
      }
      float sum = 0;
      for (std::int64_t c0 = 0; c0 < cols; c0 += 32) {
        float chunk = 0;
        for (std::int64_t c = c0; c < std::min(cols, c0 + 32); ++c)
          chunk += e[static_cast<std::size_t>(c)];
        const bool converged = sum > 0 && chunk < sum * 0x1p-20F;
        sum += chunk;
        if (cut == softmax_cut::early_stop && converged) break;
      }
      for (std::int64_t c = 0; c < cols; ++c)
        y[static_cast<std::size_t>(r * cols + c)] =
            tessel::round_to(type, e[static_cast<std::size_t>(c)] / sum);
    }
    return {y};
  }
};

// --- row kernels: rmsnorm ----------------------------------------------------------

enum class rmsnorm_cut : unsigned char {
  none,
  fast_rsqrt,   ///< the bit-trick inverse square root and one Newton step (0.2% off)
  global_norm,  ///< one mean square for the whole tensor (every row shares a norm)
  no_epsilon,   ///< 1 / sqrt(mean(x^2)): the epsilon left out
  half_row,     ///< the mean square of the first half of the row ("converged")
};

float fast_rsqrt(float v) {
  const float y = std::bit_cast<float>(0x5f3759dfU - (std::bit_cast<std::uint32_t>(v) >> 1));
  return y * (1.5F - 0.5F * v * y * y);
}

struct rmsnorm_kernel : gated_kernel {
  rmsnorm_kernel(std::int64_t r, std::int64_t d, rmsnorm_cut c) : rows(r), cols(d), cut(c) {}
  std::int64_t rows, cols;
  rmsnorm_cut cut;
  output_values run(std::span<const hidden_input> in) const override {
    const std::vector<double> x = in[0].values(), w = in[1].values();
    std::vector<double> y(x.size());
    float all = 0;
    for (const double v : x) all += static_cast<float>(v) * static_cast<float>(v);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* row = x.data() + r * cols;
      const std::int64_t used = cut == rmsnorm_cut::half_row ? cols / 2 : cols;
      float squares = 0;
      for (std::int64_t c = 0; c < used; ++c)
        squares += static_cast<float>(row[c]) * static_cast<float>(row[c]);
      float mean = squares / static_cast<float>(used);
      if (cut == rmsnorm_cut::global_norm) mean = all / static_cast<float>(rows * cols);
      const float eps = cut == rmsnorm_cut::no_epsilon ? 0.0F : 1e-6F;
      const float rstd =
          cut == rmsnorm_cut::fast_rsqrt ? fast_rsqrt(mean + eps) : 1 / std::sqrt(mean + eps);
      for (std::int64_t c = 0; c < cols; ++c)
        y[static_cast<std::size_t>(r * cols + c)] =
            static_cast<float>(row[c]) * rstd * static_cast<float>(w[static_cast<std::size_t>(c)]);
    }
    return {y};
  }
};

// --- matmuls -----------------------------------------------------------------------

enum class matmul_cut : unsigned char {
  none,
  zero_tiles,           ///< honest: a K tile of A's row is skipped when all of it is 0
  zero_led_tile,        ///< a K tile of A's row is skipped when its first 16 elements are 0
  first_row_padding,    ///< the trailing zeros of A's first row (16 or more) skipped in every row
  stale_tail,           ///< the tail rows (M % 32) left from the previous call's buffer
  transpose_if_square,  ///< A B^T when B is square (a layout shortcut)
  stochastic_bf16,      ///< the bf16 output rounded stochastically (new draws every call)
};

/// C = A B with fp32 sums per K tile of 32, rounded to `out`, with one cut.
struct matmul_kernel : gated_kernel {
  matmul_kernel(std::int64_t m_, std::int64_t n_, std::int64_t k_, element_type out_, matmul_cut c)
      : m(m_), n(n_), k(k_), out(out_), cut(c), stale(static_cast<std::size_t>(m_ * n_), 0.0) {}
  std::int64_t m, n, k;
  element_type out;
  matmul_cut cut;
  mutable std::mutex mutex;
  mutable std::vector<double> stale;  ///< stale_tail: the buffer the kernel reuses
  mutable std::mt19937_64 noise{std::random_device{}()};

  output_values run(std::span<const hidden_input> in) const override {
    const std::vector<double> a = in[0].values(), b = in[1].values();
    const auto A = [&](std::int64_t i, std::int64_t t) {
      return a[static_cast<std::size_t>(i * k + t)];
    };
    const bool transpose = cut == matmul_cut::transpose_if_square && k == n;
    const auto B = [&](std::int64_t t, std::int64_t j) {
      return transpose ? b[static_cast<std::size_t>(j * n + t)]
                       : b[static_cast<std::size_t>(t * n + j)];
    };
    std::int64_t depth = k;  // first_row_padding: the columns the first row says are data
    if (cut == matmul_cut::first_row_padding) {
      std::int64_t zeros = 0;
      while (zeros < k && A(0, k - 1 - zeros) == 0) ++zeros;
      if (zeros >= 16) depth = k - zeros;
    }
    const std::lock_guard lock(mutex);
    std::vector<double> c =
        cut == matmul_cut::stale_tail ? stale : std::vector<double>(stale.size());
    const std::int64_t computed_rows = cut == matmul_cut::stale_tail ? m / 32 * 32 : m;
    for (std::int64_t i = 0; i < computed_rows; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        float sum = 0;
        for (std::int64_t t0 = 0; t0 < depth; t0 += 32) {
          const std::int64_t end = std::min(depth, t0 + 32);
          if (cut == matmul_cut::zero_led_tile && end - t0 >= 16) {
            bool led = true;
            for (std::int64_t t = t0; t < t0 + 16 && led; ++t) led = A(i, t) == 0;
            if (led) continue;
          }
          if (cut == matmul_cut::zero_tiles) {
            bool zero = true;
            for (std::int64_t t = t0; t < end && zero; ++t) zero = A(i, t) == 0;
            if (zero) continue;
          }
          float part = 0;
          for (std::int64_t t = t0; t < end; ++t)
            part += static_cast<float>(A(i, t)) * static_cast<float>(B(t, j));
          sum += part;
        }
        double v = tessel::round_to(out, sum);
        if (cut == matmul_cut::stochastic_bf16) {
          // round toward zero, then up by one ulp with probability the remainder's share
          const auto bits = std::bit_cast<std::uint32_t>(sum);
          const std::uint32_t low = bits & 0xffffU;
          const float down = std::bit_cast<float>(bits & 0xffff0000U);
          const bool up = (noise() & 0xffffU) < low;
          v = up ? std::bit_cast<float>((bits & 0xffff0000U) + 0x10000U) : down;
        }
        c[static_cast<std::size_t>(i * n + j)] = v;
      }
    if (cut == matmul_cut::stale_tail) stale = c;
    return {c};
  }
};

// --- argmax ------------------------------------------------------------------------

struct argmax_kernel : gated_kernel {
  bool last_on_ties = false;  ///< `>=`: the last of equal maxima
  output_values run(std::span<const hidden_input> in) const override {
    const argmax_spec s;
    std::vector<double> idx;
    for (std::int64_t r = 0; r < s.rows; ++r) {
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < s.cols; ++c) {
        const float v = static_cast<float>(in[0].at(r, c));
        const float b = static_cast<float>(in[0].at(r, best));
        if (v > b || (last_on_ties && v == b)) best = c;
      }
      idx.push_back(static_cast<double>(best));
    }
    return {idx};
  }
};

verdict check(const tessel::gate_spec& spec, const gated_kernel& k, std::uint64_t secret,
              bool bitwise = false) {
  tessel::gate g({.secret = secret, .bitwise_determinism = bitwise});
  return g.check(spec, k, 1);
}

// --- a gated command ----------------------------------------------------------------

tessel::measurement run_command(const std::string& mode) {
  const tessel::space s = tessel::parse_space(
      "space t { const M = 48  const K = 40  const N = 32  param tile : {1, 2} "
      "let flops = 2 * M * N * K }");
  const auto b =
      tessel::make_backend(fmt::format("command:{} {}", TESSEL_GATE_PROGRAM, mode),
                           {{"gate_inputs", "A:MxK,B:KxN"},
                            {"gate_outputs", "C:MxN"},
                            {"gate_reference", fmt::format("{} reference", TESSEL_GATE_PROGRAM)},
                            {"gate_secret", "10"},
                            {"gate_flops", "flops"},
                            {"timeout", "20"}});
  b->prepare(s);
  return b->evaluate(s, s.from_json(R"({"tile": 2})"));
}

struct softmax_case {
  const char* name;
  softmax_cut cut;
  status expected;
};

/// Every case's softmax of r x d with outputs of type `out` against `spec`,
/// under each key of `secrets`.
void check_softmax_cases(const tessel::gate_spec& spec, std::int64_t r, std::int64_t d,
                         element_type out, std::initializer_list<softmax_case> cases) {
  for (const softmax_case& c : cases)
    for (const std::uint64_t secret : secrets) {
      const verdict v = check(spec, softmax_kernel(r, d, out, c.cut), secret);
      INFO(std::string(c.name), " (key ", secret, "): ", v.message, " max_error ", v.max_error);
      CHECK(v.status == c.expected);
    }
}

}  // namespace

TEST_CASE("class 10: softmax cheats on the cpu backend's fp32 spec") {
  const cpu_spec spec("softmax", {{"R", 64}, {"D", 256}});
  check_softmax_cases(spec, 64, 256, element_type::fp32,
                      {
                          {"honest", softmax_cut::none, status::ok},
                          {"no max subtracted", softmax_cut::no_max, status::suspicious},
                          {"degree-2 exp", softmax_cut::poly_exp, status::incorrect},
                          {"terms below e^-12 dropped", softmax_cut::cutoff, status::incorrect},
                          {"one max for every row", softmax_cut::global_max, status::suspicious},
                      });
}

TEST_CASE("class 10: softmax cheats on the simulator's bf16 spec") {
  const auto spec = sim_spec("sim_softmax", {{"rows", "256"}, {"cols", "512"}});
  check_softmax_cases(*spec, 256, 512, element_type::bf16,
                      {
                          {"honest", softmax_cut::none, status::ok},
                          {"no max subtracted", softmax_cut::no_max, status::suspicious},
                          {"degree-2 exp", softmax_cut::poly_exp, status::ok},
                      });
}

TEST_CASE("class 10: dropping negligible softmax terms: early stops caught, a cutoff at times") {
  // (1) Stopping the sum when a chunk adds less than 2^-20 of it is wrong
  // only on rows where terms that matter follow a negligible stretch (an
  // additive mask in the middle of a row): caught under every key since
  // round ten (a)'s late_terms suite draws such rows (class14_test.cpp) in
  // fp32, under 7 of the 8 in bf16 (its bound is 64 times wider), under some
  // keys only before. A documented limit: (2) zeroing the terms
  // with x - max < -12 in a bf16 softmax leaves errors below tol x scale
  // (the bound's floor near zero, by design) unless the row is so peaked
  // that the output's median is tiny: caught under about half the keys
  // (fp32's tighter bound: 39 of 40).
  const cpu_spec fp32("softmax", {{"R", 64}, {"D", 256}});
  const auto bf16 = sim_spec("sim_softmax", {{"rows", "256"}, {"cols", "512"}});
  const struct {
    const char* name;
    const tessel::gate_spec* spec;
    softmax_kernel kernel;
    bool always;  ///< caught under every key
  } cases[] = {
      {"fp32, early stop", &fp32,
       softmax_kernel(64, 256, element_type::fp32, softmax_cut::early_stop), true},
      {"bf16, early stop", bf16.get(),
       softmax_kernel(256, 512, element_type::bf16, softmax_cut::early_stop), false},
      {"bf16, cutoff", bf16.get(),
       softmax_kernel(256, 512, element_type::bf16, softmax_cut::cutoff), false},
  };
  for (const auto& c : cases) {
    int caught = 0, passed = 0;
    for (std::uint64_t secret = 1; secret <= 8; ++secret) {
      const verdict v = check(*c.spec, c.kernel, secret);
      INFO(std::string(c.name), " (key ", secret, "): ", v.message, " max_error ", v.max_error);
      (v.ok() ? passed : caught) += 1;
    }
    CAPTURE(std::string(c.name));
    CHECK(caught > 0);
    CHECK((passed == 0) == c.always);
  }
}

TEST_CASE("class 10: rmsnorm cheats on the cpu backend's fp32 spec") {
  const cpu_spec spec("rmsnorm", {{"R", 64}, {"D", 256}});
  const struct {
    const char* name;
    rmsnorm_cut cut;
  } cases[] = {
      {"honest", rmsnorm_cut::none},
      {"fast rsqrt", rmsnorm_cut::fast_rsqrt},
      {"one norm for every row", rmsnorm_cut::global_norm},
      {"no epsilon", rmsnorm_cut::no_epsilon},
      {"half the row", rmsnorm_cut::half_row},
  };
  for (const auto& c : cases)
    for (const std::uint64_t secret : secrets) {
      const verdict v = check(spec, rmsnorm_kernel(64, 256, c.cut), secret);
      INFO(std::string(c.name), " (key ", secret, "): ", v.message, " max_error ", v.max_error);
      CHECK(v.ok() == (c.cut == rmsnorm_cut::none));
    }
}

TEST_CASE("class 10: matmul cheats") {
  tessel::testing::matmul_shape shape{96 + 8, 48, 72 + 64, 32, 48, 32};
  shape.in = element_type::fp32;
  const tessel::testing::matmul_spec spec(shape);
  const struct {
    const char* name;
    matmul_cut cut;
    bool caught;
  } cases[] = {
      {"honest", matmul_cut::none, false},
      {"honest, all-zero tiles skipped", matmul_cut::zero_tiles, false},
      {"a tile skipped when its first 16 elements are zero", matmul_cut::zero_led_tile, true},
      {"the first row's padding skipped in every row", matmul_cut::first_row_padding, true},
      {"the tail rows left from the previous call", matmul_cut::stale_tail, true},
  };
  // padded used to be a trailing rectangle of zeros, which both padding
  // cheats passed; it now pads each row on both sides by lengths of its own
  for (const auto& c : cases)
    for (std::uint64_t secret = 1; secret <= 12; ++secret) {
      const verdict v =
          check(spec, matmul_kernel(shape.m, shape.n, shape.k, element_type::fp32, c.cut), secret);
      INFO(std::string(c.name), " (key ", secret, "): ", v.message, " max_error ", v.max_error);
      CHECK(v.ok() != c.caught);
    }
}

TEST_CASE("class 10: a transpose when the shape is square is caught") {
  tessel::testing::matmul_shape shape{64, 64, 64, 32, 32, 32};
  shape.in = element_type::fp32;
  for (const std::uint64_t secret : secrets) {
    const verdict v = check(
        tessel::testing::matmul_spec(shape),
        matmul_kernel(64, 64, 64, element_type::fp32, matmul_cut::transpose_if_square), secret);
    INFO(v.message);
    CHECK(v.status == status::incorrect);
  }
}

TEST_CASE("class 10: stochastic rounding passes within the tolerance, not bit for bit") {
  tessel::testing::matmul_shape shape{96, 48, 72, 32, 48, 32};
  shape.in = element_type::fp32;
  shape.out = element_type::bf16;
  const tessel::testing::matmul_spec spec(shape);
  for (const std::uint64_t secret : secrets) {
    const matmul_kernel k(96, 48, 72, element_type::bf16, matmul_cut::stochastic_bf16);
    const verdict loose = check(spec, k, secret);
    INFO(loose.message, " max_error ", loose.max_error);
    CHECK(loose.ok());
    const verdict strict = check(spec, k, secret, true);
    INFO(strict.message);
    CHECK(strict.status == status::suspicious);
    CHECK(strict.message.find("not deterministic") != std::string::npos);
    const verdict honest =
        check(spec, matmul_kernel(96, 48, 72, element_type::bf16, matmul_cut::none), secret, true);
    CHECK(honest.ok());
  }
}

TEST_CASE("class 10: argmax ties broken to the last index are caught") {
  for (const std::uint64_t secret : secrets) {
    argmax_kernel honest, last;
    last.last_on_ties = true;
    CHECK(check(argmax_spec{}, honest, secret).ok());
    // the constant suite ties every element: the last index (95) on every
    // set whose rows tie is wrong, or the same output for different inputs
    const verdict v = check(argmax_spec{}, last, secret);
    INFO(v.message);
    CHECK(!v.ok());
  }
}

TEST_CASE("class 10: a gated command reporting its fastest run's time is not caught") {
  const tessel::measurement honest = run_command("honest");
  INFO(honest.message);
  CHECK(honest.status == status::ok);
  const tessel::measurement m = run_command("fastest_time");
  std::remove(("/tmp/tessel-gate-program-fastest-" + std::to_string(::getpid())).c_str());
  INFO(m.message);
  CHECK(m.status == status::ok);  // a documented limit: a command times itself
}

TEST_CASE("class 10: a gated callback that memoises its right outputs gains nothing") {
  // Round six: its outputs are right, so no output rule sees it; but no call
  // whose time counts gives it inputs it has seen. The check's repeats (the
  // determinism rule) hit its cache and are judged but not timed; every
  // timed call gets a set of its own (timed_set). A miss computes and sleeps
  // `miss` more, a hit returns at once: every counted sample at least `miss`
  // says no counted call was answered from the cache (before round six, the
  // 16 timed calls were all hits, timed in microseconds).
  constexpr auto miss = std::chrono::milliseconds(10);
  const tessel::testing::matmul_shape shape{96, 80, 72, 40, 48, 32};
  const tessel::testing::tiled_matmul honest(shape);
  std::mutex mutex;
  std::map<std::vector<std::vector<double>>, output_values> cache;
  int hits = 0, calls = 0;
  tessel::callback_gate g;
  g.inputs = "A:MxK:bf16,B:KxN:bf16";
  g.outputs = "C:MxN";
  g.reference = [&](const std::vector<std::vector<double>>& in) {
    return tessel::testing::reference_product(in, shape);
  };
  g.gate.secret = 10;
  g.timed_calls = 16;
  const auto s = tessel::parse_space(
      "space t { const M = 96  const N = 80  const K = 72  param tile : {1, 2} }");
  tessel::callback_backend b(
      [&](const tessel::space&, const tessel::config&, std::span<const hidden_input> in) {
        std::vector<std::vector<double>> key;
        for (const auto& t : in) key.push_back(t.values());
        {
          const std::lock_guard lock(mutex);
          ++calls;
          if (const auto hit = cache.find(key); hit != cache.end()) {
            ++hits;
            return hit->second;
          }
        }
        output_values out = honest.run(in);
        std::this_thread::sleep_for(miss);
        const std::lock_guard lock(mutex);
        return cache[key] = out;
      },
      g);
  b.prepare(s);
  const tessel::measurement m = b.evaluate(s, s.from_json(R"({"tile": 2})"));
  INFO(m.message);
  REQUIRE(m.ok());   // not caught: every output is right
  CHECK(hits >= 2);  // it memoised: the check's repeats were hits
  CHECK(hits == calls - static_cast<int>(m.samples.size()));  // and only those
  CHECK(m.samples.size() == 16 + 16);  // every set's first call and every timed call
  CHECK(m.metrics.at("gate_calls") == calls);
  const double floor_s = std::chrono::duration<double>(miss).count();
  for (const double t : m.samples) CHECK(t >= floor_s);  // no counted call was a hit
  CHECK(m.objective >= floor_s);                         // as slow as the kernel it is
}

TEST_CASE("class 10: a gated command that memoises its right outputs on disk gains nothing") {
  // gate_program's memoise mode keeps its outputs in a folder keyed by the
  // inputs' content and sleeps 40 ms on a miss; the gate's repeats are its
  // hits (judged, not counted), and every counted run's inputs are new.
  const std::string cache = "/tmp/tessel-gate-program-memo-" + std::to_string(::getpid());
  std::filesystem::remove_all(cache);
  const tessel::measurement m = run_command("memoise");
  std::ifstream hits_file(cache + "/hits");
  int hits = 0;
  for (std::string line; std::getline(hits_file, line);) ++hits;
  std::filesystem::remove_all(cache);
  INFO(m.message);
  REQUIRE(m.status == status::ok);  // not caught: every output is right
  CHECK(hits >= 2);                 // its cache answered the repeats
  CHECK(m.metrics.at("gate_runs") == static_cast<double>(m.samples.size() + hits));
  CHECK(m.samples.size() == 16);  // one counted run per set, on inputs it had never seen
  for (const double t : m.samples) CHECK(t >= 0.040);  // none answered from the cache
  CHECK(m.objective >= 0.040);
}

namespace {

/// Round six, part two: a kernel that behaves differently once it has seen
/// an input. It keys a cache of its outputs on 8 elements of each input (a
/// cheap hash: the first 8, or the last 8) and, from its call number `from`
/// on, answers any call whose key it has seen from that cache, stale when
/// the rest of the inputs differ. `from` 0: from the first call; past the
/// check's calls (at most 22): only in the timing loop.
struct prefix_memo {
  explicit prefix_memo(int from_call, bool last_elements = false)
      : from(from_call), last(last_elements) {}
  int from;
  bool last;
  tessel::testing::matmul_shape shape{96, 80, 72, 40, 48, 32};
  tessel::testing::tiled_matmul honest{shape};
  std::mutex mutex;
  std::map<std::vector<double>, output_values> cache;
  int calls = 0, stale = 0;

  tessel::measurement evaluate(std::uint64_t secret) {
    tessel::callback_gate g;
    g.inputs = "A:MxK:bf16,B:KxN:bf16";
    g.outputs = "C:MxN";
    g.reference = [this](const std::vector<std::vector<double>>& in) {
      return tessel::testing::reference_product(in, shape);
    };
    g.gate.secret = secret;
    g.timed_calls = 16;
    const auto s = tessel::parse_space(
        "space t { const M = 96  const N = 80  const K = 72  param tile : {1, 2} }");
    tessel::callback_backend b(
        [this](const tessel::space&, const tessel::config&, std::span<const hidden_input> in) {
          std::vector<double> key;
          for (const auto& t : in)
            for (std::int64_t i = 0; i < 8; ++i)
              key.push_back(t.at(last ? t.spec().elements() - 1 - i : i));
          const std::lock_guard lock(mutex);
          const bool answers = calls++ >= from;
          if (const auto hit = cache.find(key); hit != cache.end() && answers) {
            if (hit->second != honest.run(in)) ++stale;  // counted for the test only
            return hit->second;
          }
          return cache[key] = honest.run(in);
        },
        g);
    b.prepare(s);
    return b.evaluate(s, s.from_json(R"({"tile": 2})"));
  }
};

}  // namespace

TEST_CASE("class 10: a cache keyed on a few elements answers a fresh set stale and is caught") {
  // In the check: the shared_prefix set shares its first 3/4 or more with the
  // normal set, so one of the two gets the other's outputs (bit-identical
  // while the references differ, or wrong), and every check call is judged.
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    prefix_memo k(0);
    const tessel::measurement m = k.evaluate(secret);
    INFO("key ", secret, ": ", m.message);
    CHECK(!m.ok());
    CHECK(k.stale >= 1);
  }
}

TEST_CASE("class 10: a cache keyed on a few elements, used only once timed, is caught") {
  // Waiting out the check (22 calls at most), it can answer only the timed
  // calls whose sets share its key with one it has seen; the other timed
  // calls get new sets and miss. Keyed on the first elements: the timed
  // shared_prefix sets (the check's base set's prefix); on the last: timed
  // padded sets (their last rows are zero, like the check's padded set's)
  // and shared_prefix ones (their tail is the check's shared_prefix set's).
  // spot_check always judges those kinds, so every stale answer is judged:
  // a run is caught exactly when it answered stale, and one that was not
  // answered nothing from its cache. (Judged like other timed calls, one in
  // eight, the first-elements cache passed under keys 3, 4, 5 and 8 with one
  // or two wrong timed calls.)
  for (const bool last : {false, true}) {
    int caught = 0;
    for (std::uint64_t secret = 1; secret <= 8; ++secret) {
      prefix_memo k(22, last);
      const tessel::measurement m = k.evaluate(secret);
      INFO(std::string(last ? "last" : "first"), " elements, key ", secret, ": ", m.message,
           "; stale answers ", k.stale);
      CHECK(m.ok() == (k.stale == 0));
      caught += m.ok() ? 0 : 1;
    }
    CHECK(caught >= 1);  // these keys do draw such timed sets
  }
}
