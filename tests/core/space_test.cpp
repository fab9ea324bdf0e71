// The space engine against brute force: counts, enumeration, ranks,
// sampling uniformity, neighbours, JSON and errors, on many small random
// spaces and a few hand-written ones.
#include "space_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/space.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// A random expression over the parameters of `def` (integers, booleans,
/// symbols, permutations), with divisions that may hit zero.
expr random_condition(space::definition& def, rng& r, int depth) {
  const auto n = def.parameters.size();
  auto pick = [&]() -> std::size_t { return r.uniform(n); };
  auto integer_term = [&]() -> expr {
    for (int tries = 0; tries < 8; ++tries) {
      const auto p = pick();
      const auto kind = def.parameters[p].dom.kind;
      if (kind == param_kind::integer || kind == param_kind::boolean)
        return make_param(p, type_of(def.parameters[p].dom));
      if (kind == param_kind::permutation)
        return make_position(make_param(p, value_type::permutation), r.uniform(3));
    }
    return lit(static_cast<std::int64_t>(r.uniform(5)));
  };
  if (depth > 0 && r.uniform(3) == 0) {
    const auto o = r.uniform(2) == 0 ? expr_op::logical_and : expr_op::logical_or;
    return op(o, random_condition(def, r, depth - 1), random_condition(def, r, depth - 1));
  }
  switch (r.uniform(6)) {
    case 0: {  // symbol equality
      for (std::size_t p = 0; p < n; ++p)
        if (def.parameters[p].dom.kind == param_kind::symbol) {
          const auto& d = def.parameters[p].dom;
          return op(expr_op::not_equal, make_param(p, value_type::symbol),
                    make_literal(d.values[r.uniform(d.size())], value_type::symbol));
        }
      [[fallthrough]];
    }
    case 1:
      return op(expr_op::less_equal, integer_term(),
                op(expr_op::add, integer_term(), lit(static_cast<std::int64_t>(r.uniform(3)))));
    case 2: return op(expr_op::equal, op(expr_op::modulo, integer_term(), integer_term()), lit(0));
    case 3:
      return op(expr_op::greater_equal, op(expr_op::divide, integer_term(), integer_term()),
                lit(1));
    case 4:
      return make_op(expr_op::logical_not, {op(expr_op::equal, integer_term(), integer_term())});
    default:
      return make_in_set(op(expr_op::multiply, integer_term(), integer_term()),
                         {0, 1, 2, 4, 6, 8, 9, 12, 16});
  }
}

space::definition random_definition(rng& r) {
  space::definition def;
  def.name = "random";
  const auto n = 2 + r.uniform(4);
  for (std::size_t i = 0; i < n; ++i) {
    const auto name = "p" + std::to_string(i);
    switch (r.uniform(5)) {
      case 0: def.parameters.push_back(param(name, booleans())); break;
      case 1: def.parameters.push_back(param(name, symbols(def, {"a", "b", "c"}))); break;
      case 2: def.parameters.push_back(param(name, permutation(def, {"x", "y", "z"}))); break;
      default: {
        std::vector<std::int64_t> values;
        const auto size = 1 + r.uniform(5);
        for (std::size_t k = 0; k < size; ++k)
          values.push_back(static_cast<std::int64_t>(r.uniform(9)));
        def.parameters.push_back(param(name, integers(values)));
      }
    }
  }
  // Sometimes a conditional parameter that depends on the first one.
  if (r.uniform(3) == 0 && def.parameters[0].dom.kind != param_kind::permutation) {
    auto p = param("cond", integers({1, 2, 3}));
    p.when = op(expr_op::not_equal, make_param(0, type_of(def.parameters[0].dom)),
                make_literal(def.parameters[0].dom.values[0], type_of(def.parameters[0].dom)));
    def.parameters.push_back(std::move(p));
  }
  const auto constraints = r.uniform(4);
  for (std::size_t i = 0; i < constraints; ++i)
    require(def, random_condition(def, r, 2), "c" + std::to_string(i));
  return def;
}

std::set<config> brute_force_valid(const space::definition& def) {
  std::set<config> valid;
  for (const auto& c : cartesian(def))
    if (reference_valid(def, c)) valid.insert(c);
  return valid;
}

}  // namespace

TEST_CASE("count, enumeration and ranks agree with brute force on random spaces") {
  rng r(42);
  int built = 0, empty = 0;
  for (int trial = 0; trial < 400; ++trial) {
    auto def = random_definition(r);
    const auto expected = brute_force_valid(def);
    if (expected.empty()) {
      CHECK_THROWS_AS(space{def}, empty_space_error);
      ++empty;
      continue;
    }
    const space s(def);
    ++built;
    REQUIRE(s.count() == expected.size());
    std::set<config> seen;
    std::uint64_t rank = 0;
    for (const auto& c : s.configs()) {
      CHECK(expected.count(c) == 1);
      CHECK(s.is_valid(c));
      CHECK(s.rank(c) == rank);
      CHECK(s.at(rank) == c);
      seen.insert(c);
      ++rank;
    }
    CHECK(seen == expected);
    for (const auto& c : cartesian(def)) CHECK(s.is_valid(c) == (expected.count(c) == 1));
  }
  CHECK(built > 200);
  CHECK(empty > 0);
}

TEST_CASE("constraint rejections and the valid count add up to the Cartesian size") {
  rng r(7);
  for (int trial = 0; trial < 100; ++trial) {
    auto def = random_definition(r);
    bool conditional = false;
    for (const auto& p : def.parameters) conditional |= static_cast<bool>(p.when);
    if (conditional || brute_force_valid(def).empty()) continue;
    const space s(def);
    std::uint64_t rejected = 0;
    for (const auto& st : s.constraint_stats()) rejected += st.rejected;
    CHECK(rejected + s.count() == *s.cartesian_size());
  }
}

TEST_CASE("sampling is uniform over valid configs (chi-square)") {
  space::definition def;
  def.name = "uniform";
  def.parameters.push_back(param("a", integers({1, 2, 3, 4, 5, 6})));
  def.parameters.push_back(param("b", integers({1, 2, 3, 4, 5, 6})));
  def.parameters.push_back(param("c", booleans()));
  require(def, op(expr_op::less_equal, ref(def, "a"), ref(def, "b")), "a <= b");
  const space s(def);
  REQUIRE(s.count() == 42);
  rng r(1234);
  std::map<std::uint64_t, int> hits;
  const int draws = 42 * 500;
  for (int i = 0; i < draws; ++i) {
    const auto c = s.sample(r);
    REQUIRE(s.is_valid(c));
    ++hits[s.rank(c)];
  }
  REQUIRE(hits.size() == 42);
  const double expected = draws / 42.0;
  double chi2 = 0;
  for (const auto& [rank, n] : hits) chi2 += (n - expected) * (n - expected) / expected;
  // 41 degrees of freedom: the 0.999 quantile is about 74.7.
  CHECK(chi2 < 74.7);
}

TEST_CASE("neighbours are valid and differ in one parameter or one swap") {
  rng r(99);
  for (int trial = 0; trial < 150; ++trial) {
    auto def = random_definition(r);
    if (brute_force_valid(def).empty()) continue;
    const space s(def);
    for (int k = 0; k < 5; ++k) {
      const auto c = s.sample(r);
      for (const auto& n : s.neighbours(c)) {
        CHECK(s.is_valid(n));
        CHECK(n != c);
        // One parameter moved; conditional ones may follow their `when`.
        int plain = 0, conditional = 0;
        for (std::size_t p = 0; p < s.size(); ++p)
          if (n[p] != c[p]) ++(s.parameters()[p].when ? conditional : plain);
        CHECK(plain <= 1);
        if (plain == 0) CHECK(conditional == 1);
      }
    }
  }
}

TEST_CASE("neighbours of integers are the adjacent values; of permutations, single swaps") {
  space::definition def;
  def.parameters.push_back(param("t", integers({1, 2, 4, 8})));
  def.parameters.push_back(param("order", permutation(def, {"m", "n", "k"})));
  const space s(def);
  const auto c = s.from_json(R"({"t": 2, "order": ["m", "n", "k"]})");
  std::set<std::string> got;
  for (const auto& n : s.neighbours(c)) got.insert(s.to_json(n));
  const std::set<std::string> want = {
      R"({"order":["m","n","k"],"t":1})", R"({"order":["m","n","k"],"t":4})",
      R"({"order":["n","m","k"],"t":2})", R"({"order":["k","n","m"],"t":2})",
      R"({"order":["m","k","n"],"t":2})"};
  CHECK(got == want);
}

TEST_CASE("JSON round trip and errors") {
  space::definition def;
  def.name = "json";
  def.parameters.push_back(param("tile", integers({128, 256, 512})));
  def.parameters.push_back(param("home", symbols(def, {"sbuf", "hbm"})));
  def.parameters.push_back(param("order", permutation(def, {"k", "m", "n"})));
  def.parameters.push_back(param("fast", booleans()));
  auto pre = param("prefetch", booleans());
  pre.when =
      op(expr_op::equal, ref(def, "home"), make_literal(def.intern("hbm"), value_type::symbol));
  def.parameters.push_back(std::move(pre));
  const space s(def);
  CHECK(s.count() == 3 * 6 * 2 * (1 + 2));
  for (const auto& c : s.configs()) CHECK(s.from_json(s.to_json(c)) == c);

  const auto c = s.from_json(
      R"({"tile": 512, "home": "hbm", "order": ["k","m","n"], "fast": true, "prefetch": false})");
  CHECK(s.is_valid(c));
  CHECK(s.integer(c, "tile") == 512);
  CHECK(s.value_of(c, "order").to_string() == "[k, m, n]");
  const auto off =
      s.from_json(R"({"tile": 128, "home": "sbuf", "order": ["n","m","k"], "fast": false})");
  CHECK(s.is_valid(off));
  CHECK_FALSE(s.value_of(off, "prefetch").active);

  CHECK_THROWS_WITH_AS(
      s.from_json(R"({"tile": 100, "home": "sbuf", "order": ["k","m","n"], "fast": true})"),
      "parameter 'tile': 100 is not one of {128, 256, 512}", error);
  CHECK_THROWS_WITH_AS(
      s.from_json(R"({"tlie": 128})"),
      "unknown parameter 'tlie' (the space has: tile, home, order, fast, prefetch)", error);
  CHECK_THROWS_WITH_AS(s.from_json(R"({"tile": 128, "home": "sbuf", "fast": true})"),
                       "missing parameter 'order'", error);
  CHECK_THROWS_WITH_AS(
      s.from_json(R"({"tile": "128", "home": "sbuf", "order": ["k","m","n"], "fast": true})"),
      "parameter 'tile': \"128\" is not an integer, one of {128, 256, 512}", error);
  CHECK_THROWS_WITH_AS(
      s.from_json(R"({"tile": 128, "home": "sbuf", "order": ["k","k","n"], "fast": true})"),
      doctest::Contains("is not an order of"), error);
  CHECK_THROWS_AS(s.from_json("[1, 2"), error);
  // Hostile text is a tessel::error too (issue 15): a number out of range was
  // std::out_of_range (exit 3 from the tool), 2^64-1 was read as -1.
  CHECK_THROWS_WITH_AS(s.from_json(R"({"tile": 1e400})"),
                       doctest::Contains("config is not valid JSON"), error);
  CHECK_THROWS_WITH_AS(s.from_json(R"({"tile": 18446744073709551615, "home": "sbuf",)"
                                   R"( "order": ["k","m","n"], "fast": true})"),
                       doctest::Contains("is not an integer"), error);
  CHECK_THROWS_WITH_AS(s.from_json(std::string(100'000, '[')),
                       doctest::Contains("config is not valid JSON"), error);
  CHECK_THROWS_WITH_AS(
      s.from_json(R"({"tile": )" + std::string(50, '[') + std::string(50, ']') + "}"),
      "config nests more than 16 levels deep", error);
  CHECK_THROWS_AS(s.from_json("{\"tile\": \"caf\xe9\"}"), error);
  // Present but inactive: the conditional parameter must follow its `when`.
  const auto bad = s.from_json(
      R"({"tile": 128, "home": "sbuf", "order": ["k","m","n"], "fast": true, "prefetch": true})");
  CHECK(s.why_invalid(bad) == "prefetch must be inactive: its 'when' condition is false");
}

TEST_CASE("keys are stable and distinct") {
  space::definition def;
  def.parameters.push_back(param("a", integers({1, 2, 3})));
  def.parameters.push_back(param("b", symbols(def, {"x", "y"})));
  const space s(def);
  std::set<std::uint64_t> keys;
  for (const auto& c : s.configs()) keys.insert(s.key(c));
  CHECK(keys.size() == s.count());
  // Golden: FNV-1a of "a=2;b=y;". Extending a domain keeps existing keys.
  const auto c = s.from_json(R"({"a": 2, "b": "y"})");
  CHECK(s.key(c) == 0x7279bb55540ca3e1ULL);
  auto wider = def;
  wider.parameters[0].dom = integers({0, 1, 2, 3});
  const space w(wider);
  CHECK(w.key(w.from_json(R"({"a": 2, "b": "y"})")) == s.key(c));
}

TEST_CASE("the empty-space error names the constraint and its rejections") {
  space::definition def;
  def.name = "empty";
  def.parameters.push_back(param("a", integers({1, 2, 3})));
  def.parameters.push_back(param("b", integers({1, 2})));
  require(def, op(expr_op::less, ref(def, "a"), lit(3)), "a < 3");
  require(def, op(expr_op::greater, ref(def, "b"), op(expr_op::add, ref(def, "a"), lit(5))),
          "b > a + 5");
  try {
    const space s(def);
    FAIL("expected empty_space_error");
  } catch (const empty_space_error& e) {
    CHECK(e.constraint() == "b > a + 5");
    CHECK(e.rejected() == 4);
    CHECK(std::string(e.what()) ==
          "space 'empty' has no valid config: constraint 'b > a + 5' rejects every "
          "config that reaches it (4 rejected in all)");
  }
  space::definition never;
  never.parameters.push_back(param("a", integers({1})));
  require(never, op(expr_op::equal, lit(1), lit(2)), "1 == 2");
  CHECK_THROWS_WITH_AS(
      space{never},
      doctest::Contains("'1 == 2' is false whatever the parameters (1 configs rejected)"),
      empty_space_error);
}

TEST_CASE("malformed definitions are errors, not crashes") {
  space::definition dup;
  dup.parameters.push_back(param("a", integers({1})));
  dup.parameters.push_back(param("a", integers({2})));
  CHECK_THROWS_WITH_AS(space{dup}, doctest::Contains("duplicate parameter 'a'"), space_error);
  space::definition empty_domain;
  empty_domain.parameters.push_back(param("a", integers({})));
  CHECK_THROWS_WITH_AS(space{empty_domain}, doctest::Contains("empty domain"), space_error);
  space::definition bad_ref;
  bad_ref.parameters.push_back(param("a", integers({1})));
  require(bad_ref, op(expr_op::equal, make_param(5, value_type::integer), lit(1)), "?");
  CHECK_THROWS_AS(space{bad_ref}, space_error);
}

TEST_CASE("independent groups multiply and huge products stay small") {
  space::definition def;
  for (int i = 0; i < 12; ++i) {
    std::vector<std::int64_t> values(100);
    std::iota(values.begin(), values.end(), 1);
    def.parameters.push_back(param("p" + std::to_string(i), integers(values)));
  }
  require(def, op(expr_op::equal, op(expr_op::modulo, ref(def, "p0"), ref(def, "p1")), lit(0)),
          "p0 % p1 == 0");
  // 482 * 100^10 valid configs overflow 2^64: counting says so rather than wrapping.
  CHECK_THROWS_WITH_AS(space{def}, doctest::Contains("more than 2^64 valid configs"), space_error);
  std::uint64_t pairs = 0;
  for (int a = 1; a <= 100; ++a)
    for (int b = 1; b <= 100; ++b) pairs += a % b == 0;
  CHECK(pairs == 482);
  def.parameters.resize(9);
  const space big(def);
  CHECK(big.groups().size() == 8);
  CHECK(big.cartesian_size() == 1'000'000'000'000'000'000ULL);
  CHECK(big.count() == 482ULL * 100'000'000'000'000ULL);
  CHECK(big.log10_cartesian_size() == doctest::Approx(18.0));
  def.parameters.resize(6);
  const space smaller(def);
  CHECK(smaller.count() == 482ULL * 100 * 100 * 100 * 100);
  rng r(3);
  for (int i = 0; i < 100; ++i) CHECK(smaller.is_valid(smaller.sample(r)));
}

TEST_CASE("lets, default config and encoding") {
  space::definition def;
  def.parameters.push_back(param("m", integers({128, 256, 512, 1024})));
  def.parameters.back().dom.log_scale = true;
  def.parameters.back().default_index = 2;
  def.parameters.push_back(param("e", symbols(def, {"vector", "scalar", "gpsimd"})));
  def.parameters.push_back(param("order", permutation(def, {"m", "n", "k"})));
  let_value bytes;
  bytes.name = "bytes";
  bytes.value = op(expr_op::multiply, ref(def, "m"), lit(2));
  def.lets.push_back(bytes);
  require(def, op(expr_op::less_equal, make_let(0, value_type::integer), lit(1024)),
          "bytes <= 1024");
  const space s(def);
  CHECK(s.count() == 3 * 3 * 6);
  const auto base = s.default_config();
  REQUIRE(base);
  CHECK(s.integer(*base, "m") == 512);
  CHECK(s.evaluate(*base, "bytes") == 1024);
  REQUIRE(s.encoding().size() == 1 + 1 + 3);
  CHECK(s.encoding()[2].label == "order.m");
  const auto x = s.from_json(R"({"m": 256, "e": "gpsimd", "order": ["k", "m", "n"]})");
  const auto enc = s.encode(x);
  CHECK(enc[0] == doctest::Approx(1.0 / 3.0));  // log2: 7, 8, 9, 10
  CHECK(enc[1] == 2.0);
  CHECK(enc[2] == 0.5);  // m is in the middle
  CHECK(enc[3] == 1.0);  // n is innermost
  CHECK(enc[4] == 0.0);  // k is outermost
}
