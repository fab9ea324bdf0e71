// class3_test.cpp: issue 25, class 3: predictable or invertible secrets,
// and candidates that reach what the gate reads. Seeds used to be derived
// from the check's seed with splitmix64, a bijection: one input's seed gave
// back the check's seed, and with it every other seed and the compared
// elements. Now every seed is HMAC-SHA256 under a 256-bit key; the
// candidate gets copies of its inputs; the reference of every input set is
// computed before the candidate's first call, and a spec whose declarations
// change while the candidate runs is suspicious.
#include <tessel/gate.hpp>

#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <numeric>
#include <set>

namespace {

using namespace tessel;
using namespace tessel::testing;

const matmul_shape shape{96, 80, 72, 40, 48, 32};

// --- the old derivation, and its inverse ----------------------------------------

constexpr std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
constexpr std::uint64_t old_hash(std::uint64_t seed, std::uint64_t counter) {
  return mix64(seed ^ mix64(counter + 0x632be59bd9b4e019ULL));
}
/// The multiplicative inverse of an odd x modulo 2^64 (Newton's iteration).
constexpr std::uint64_t inverse(std::uint64_t x) {
  std::uint64_t y = x;
  for (int i = 0; i < 6; ++i) y *= 2 - x * y;
  return y;
}
constexpr std::uint64_t unshift(std::uint64_t y, int s) {  // inverts z ^ (z >> s)
  std::uint64_t z = y;
  for (int i = s; i < 64; i += s) z ^= y >> i;
  return z;
}
constexpr std::uint64_t unmix64(std::uint64_t z) {
  z = unshift(z, 31);
  z = unshift(z * inverse(0x94d049bb133111ebULL), 27);
  z = unshift(z * inverse(0xbf58476d1ce4e5b9ULL), 30);
  return z - 0x9e3779b97f4a7c15ULL;
}
/// What the old gate derived input (s, i)'s seed from: the check's seed.
constexpr std::uint64_t old_check_seed(std::uint64_t input_seed, std::uint64_t s, std::uint64_t i) {
  const std::uint64_t suite_seed = unmix64(input_seed) ^ mix64(i + 0x632be59bd9b4e019ULL);
  return unmix64(suite_seed) ^ mix64(s + 0x632be59bd9b4e019ULL);
}
static_assert(unmix64(mix64(12345)) == 12345);
static_assert(old_check_seed(old_hash(old_hash(777, 3), 1), 3, 1) == 777);

/// The matmul spec, comparing a tenth of the rows (drawn from its rng), that
/// leaks each input's seed to whoever reads `leaked` (a bug that hands a
/// candidate the seed of its inputs).
struct leaky_spec : matmul_spec {
  explicit leaky_spec(matmul_shape s) : matmul_spec(s) {}
  tessel::probe_points probes(tessel::rng& r) const override { return {rows(r)}; }
  static std::vector<std::int64_t> rows(tessel::rng& r) {
    std::vector<std::int64_t> flat;
    for (std::int64_t i = 0; i < shape.m; ++i)
      if (r.uniform(10) == 0)
        for (std::int64_t j = 0; j < shape.n; ++j) flat.push_back(i * shape.n + j);
    return flat;
  }
  tessel::probe_values reference(std::span<const tessel::input_tensor> in,
                                 const tessel::probe_points& where) const override {
    {
      const std::lock_guard lock(mutex);
      for (std::size_t i = 0; i < in.size(); ++i) leaked[in[i].at(0)] = {in[i].seed(), i};
    }
    return matmul_spec::reference(in, where);
  }
  mutable std::mutex mutex;
  mutable std::map<double, std::pair<std::uint64_t, std::size_t>>
      leaked;  ///< A[0] -> (seed, input)
};

/// Knows the seed of its inputs and the old derivation: recovers the check's
/// seed, draws the compared rows as the old gate did, computes only those.
struct inverts_seeds : gated_kernel {
  const leaky_spec* spec = nullptr;
  output_values run(std::span<const hidden_input> in) const override {
    std::pair<std::uint64_t, std::size_t> seed{};
    {
      const std::lock_guard lock(spec->mutex);
      seed = spec->leaked.at(in[0].at(0));
    }
    std::set<std::uint64_t> candidates;
    for (std::uint64_t s = 0; s < 15; ++s) candidates.insert(old_check_seed(seed.first, s, 0));
    output_values full = tiled_matmul(shape).run(in);
    std::vector<char> keep(static_cast<std::size_t>(shape.m), 0);
    for (const std::uint64_t check : candidates) {  // the suite index is unknown: keep them all
      tessel::rng r(old_hash(check, ~0ULL));
      for (const std::int64_t flat : leaky_spec::rows(r))
        keep[static_cast<std::size_t>(flat / shape.n)] = 1;
    }
    for (std::int64_t i = 0; i < shape.m; ++i)
      if (keep[static_cast<std::size_t>(i)] == 0)
        std::fill_n(full[0].begin() + i * shape.n, shape.n, 0.0);
    return full;
  }
};

/// A spec a candidate holds a mutable pointer to (built together, as a
/// backend may): `skip_k` makes the reference skip the last K tile.
struct shared_spec : matmul_spec {
  explicit shared_spec(matmul_shape s) : matmul_spec(s) {}
  tessel::probe_values reference(std::span<const tessel::input_tensor> in,
                                 const tessel::probe_points& where) const override {
    if (!skip_k) return matmul_spec::reference(in, where);
    tessel::probe_values out(1);
    for (const std::int64_t flat : where[0]) {
      double sum = 0;
      const std::int64_t i = flat / shape.n, j = flat % shape.n;
      for (std::int64_t t = 0; t < shape.k - (shape.k % shape.tile_k); ++t)
        sum += in[0].at(i, t) * in[1].at(t, j);
      out[0].push_back(sum);
    }
    return out;
  }
  std::vector<double> tolerances() const override { return {tolerance}; }
  mutable bool skip_k = false;
  mutable double tolerance = 0x1p-12;
};

/// Tells the shared spec to skip the K tail, then skips it too.
struct rewrites_reference : gated_kernel {
  shared_spec* spec = nullptr;
  output_values run(std::span<const hidden_input> in) const override {
    spec->skip_k = true;
    return tiled_matmul(shape, tessel::testing::flaw::k_tile_skipped).run(in);
  }
};

/// Raises the shared spec's tolerance, then stores through bf16.
struct widens_tolerance : gated_kernel {
  shared_spec* spec = nullptr;
  output_values run(std::span<const hidden_input> in) const override {
    spec->tolerance = 0.5;
    return tiled_matmul(shape, tessel::testing::flaw::output_as_bf16).run(in);
  }
};

}  // namespace

TEST_CASE("class 3: no seed is a function of another: inverting the old derivation finds nothing") {
  tessel::gate_options o;
  o.secret = 11;
  tessel::gate g(o);
  leaky_spec spec(shape);
  auto session = g.session(spec, 1);
  session.prepare_references();  // the spec sees (and leaks) every input's seed
  std::set<std::uint64_t> recovered;
  for (const auto& [first, seed] : spec.leaked)
    for (std::uint64_t s = 0; s < session.sets(); ++s)
      recovered.insert(old_check_seed(seed.first, s, seed.second));
  // with the old derivation every input of every set gave back one check
  // seed (the pair (s, i) it was drawn as among them); now none repeats
  CHECK(spec.leaked.size() >= 20);  // 15 sets of A and B, less the values they share
  CHECK(recovered.size() == spec.leaked.size() * session.sets());
}

TEST_CASE("class 3: a candidate that knows its inputs' seeds cannot predict the compared rows") {
  for (std::uint64_t secret = 1; secret <= 3; ++secret) {
    tessel::gate_options o;
    o.secret = secret;
    tessel::gate g(o);
    leaky_spec spec(shape);
    inverts_seeds k;
    k.spec = &spec;
    const tessel::verdict v = g.check(spec, k, 1);
    CAPTURE(v.message);
    CHECK(v.status == status::incorrect);
  }
}

TEST_CASE("class 3: a candidate that rewrites the spec it shares cannot change the reference") {
  tessel::gate_options o;
  o.secret = 4;
  tessel::gate g(o);
  shared_spec spec(shape);
  rewrites_reference k;
  k.spec = &spec;
  const tessel::verdict v = g.check(spec, k, 1);
  CAPTURE(v.message);
  CHECK(v.status == status::incorrect);  // every reference was computed before its first call

  shared_spec other(shape);
  widens_tolerance w;
  w.spec = &other;
  const tessel::verdict u = g.check(other, w, 2);
  CAPTURE(u.message);
  CHECK(!u.ok());  // the tolerance was read before; the change itself is suspicious
  CHECK(u.message.find("changed while the candidate ran") != std::string::npos);
}

TEST_CASE("class 3: honest controls pass with the leaky and the shared spec") {
  for (const auto& c : tessel::testing::honest_controls(shape)) {
    CAPTURE(c.name);
    tessel::gate_options o;
    o.secret = 6;
    tessel::gate g(o);
    const tessel::verdict v = g.check(leaky_spec(c.shape), tiled_matmul(c.shape, c.f), 1);
    CAPTURE(v.message);
    CHECK(v.ok());
    shared_spec spec(c.shape);
    spec.tolerance = tessel::default_tolerance(c.shape.out);
    const tessel::verdict w = g.check(spec, tiled_matmul(c.shape, c.f), 2);
    CAPTURE(w.message);
    CHECK(w.ok());
  }
}
