// gate.cpp: the equivalence gate. One check reads the spec (shapes,
// tolerances, probes drawn once), then for each suite distribution draws the
// hidden inputs from the secret and the config key, gets the candidate's
// outputs (a whole-output kernel, a trusted sampled executor, or arrays
// computed elsewhere), samples them at the probes and compares with the
// spec's reference: NaN/Inf and runs that do not repeat are suspicious at
// once; after every suite, outputs that did not change while the reference
// did are suspicious, and an element off by more than its tolerance is
// incorrect. docs/gate.md explains each rule.
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include "gate/hash.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

namespace tessel {

namespace detail {
struct hidden_access {
  static hidden_input make(std::shared_ptr<const tensor_spec> spec, const input_tensor& t) {
    return {std::move(spec), t};
  }
};
}  // namespace detail

namespace {

/// Counter of the probe sample's seed (suites use their index).
constexpr std::uint64_t probe_stream = ~0ULL;
/// Non-finite elements off the probes judged per output and suite (each
/// costs a reference evaluation at that element).
constexpr std::size_t stray_limit = 16;

/// The seed of one check: the secret and the config key, so every config
/// sees its own inputs and probes.
std::uint64_t check_seed(std::uint64_t secret, std::uint64_t config_key) {
  return detail::hash(secret, config_key);
}

std::uint64_t input_seed(std::uint64_t check, std::size_t suite, std::size_t input) {
  return detail::hash(detail::hash(check, suite), input);
}

std::uint64_t draw_secret() {
  std::random_device device;
  std::uint64_t s = 0;
  while (s == 0) s = (std::uint64_t{device()} << 32) ^ device();
  return s;
}

std::string value_text(double v) { return fmt::format("{:.9g}", v); }

std::string element_text(const tensor_spec& s, std::int64_t flat) {
  return fmt::format("{}[{}]", s.name, fmt::join(index_of(s, flat), ", "));
}

bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](double x, double y) { return same_bits(x, y); });
}

verdict judged(status s, std::string message) {
  verdict v;
  v.status = s;
  v.message = std::move(message);
  return v;
}

/// The worst element seen so far, for the incorrect message.
struct worst_element {
  double error = 0;
  std::size_t output = 0, suite = 0, position = 0;
  double candidate = 0, reference = 0, scale = 0, tolerance = 0;
  std::size_t failing = 0;  ///< elements over tolerance in that (suite, output)
};

/// The candidate's answer on one suite: its values at the probes, and the
/// non-finite elements of its whole outputs off the probes (flat indices,
/// per output; empty for a sampled executor).
struct answer {
  probe_values at_probes;
  probe_points stray;
};

/// Where a check's candidate outputs come from: called per suite with the
/// hidden inputs (both views), the spec's outputs and the probes; `repeat`
/// asks for a second run of the same suite.
struct answer_request {
  std::size_t suite = 0;
  bool repeat = false;
  std::span<const input_tensor> in;
  std::span<const hidden_input> hidden;
  const std::vector<tensor_spec>* outputs = nullptr;
  const probe_points* where = nullptr;
};
using answer_source = std::function<answer(const answer_request&)>;

/// One check of one config: the state the rules share.
class judge {
 public:
  /// `disguise`: draw the inputs disguised (for a candidate; a trusted
  /// sampled executor sees each input's kind and seed anyway).
  judge(const gate_spec& spec, const gate_options& o, std::uint64_t config_key,
        answer_source source, bool repeats, bool disguise)
      : spec_(spec),
        options_(o),
        seed_(check_seed(o.secret, config_key)),
        source_(std::move(source)),
        repeats_(repeats),
        disguise_(disguise) {}

  verdict run() {
    read_spec();
    for (std::size_t s = 0; s < options_.suite.size(); ++s) {
      if (auto failed = run_suite(s)) return *std::move(failed);
    }
    if (auto failed = insensitive()) return *std::move(failed);
    verdict v;
    v.suites = static_cast<int>(options_.suite.size());
    for (const worst_element& w : worst_) v.max_error = std::max(v.max_error, w.error);
    if (v.max_error > 1) {
      v.status = status::incorrect;
      v.message = incorrect_message();
    }
    return v;
  }

  /// What the kernel was doing when it threw ("run() on the 'normal' suite").
  [[nodiscard]] const std::string& stage() const noexcept { return stage_; }

  /// Reads the spec (shapes, tolerances, probes); throws on a bad answer.
  void read_spec() { declare(); }

  /// The hidden inputs of suite `s` (after read_spec): the spec's view and
  /// the candidate's, both disguised.
  void draw(std::size_t s, std::vector<input_tensor>& in, std::vector<hidden_input>& hidden) const {
    in.clear();
    hidden.clear();
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      in.emplace_back(*inputs_[i], options_.suite[s], input_seed(seed_, s, i), disguise_);
      hidden.push_back(detail::hidden_access::make(inputs_[i], in.back()));
    }
  }

 private:
  void declare() {
    stage_ = "the spec's inputs()";
    for (tensor_spec& t : spec_.inputs())
      inputs_.push_back(std::make_shared<const tensor_spec>(std::move(t)));
    stage_ = "the spec's outputs()";
    outputs_ = spec_.outputs();
    if (outputs_.empty()) throw error("the spec declares no outputs");
    stage_ = "the spec's tolerances()";
    tolerances_ = spec_.tolerances();
    if (tolerances_.size() != outputs_.size())
      throw error(fmt::format("tolerances() gave {} values for {} outputs", tolerances_.size(),
                              outputs_.size()));
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      if (!(tolerances_[o] >= 0) || !std::isfinite(tolerances_[o]))
        throw error(
            fmt::format("tolerances() gave {} for output {}", tolerances_[o], outputs_[o].name));
      tolerances_[o] *= options_.tolerance_scale;
    }
    stage_ = "the spec's probes()";
    rng r(detail::hash(seed_, probe_stream));
    where_ = spec_.probes(r);
    if (where_.size() != outputs_.size())
      throw error(
          fmt::format("probes() gave {} lists for {} outputs", where_.size(), outputs_.size()));
    for (std::size_t o = 0; o < outputs_.size(); ++o)
      for (const std::int64_t flat : where_[o])
        if (flat < 0 || flat >= outputs_[o].elements())
          throw error(fmt::format("probes() gave index {} for output {} of {} elements", flat,
                                  outputs_[o].name, outputs_[o].elements()));
  }

  std::string suite_name(std::size_t s) const {
    return fmt::format("'{}'", to_string(options_.suite[s]));
  }

  /// Checks that `values` has one entry per probe.
  void check_shape(const probe_values& values, std::string_view call) const {
    if (values.size() != outputs_.size())
      throw error(
          fmt::format("{} gave {} outputs, expected {}", call, values.size(), outputs_.size()));
    for (std::size_t o = 0; o < outputs_.size(); ++o)
      if (values[o].size() != where_[o].size())
        throw error(fmt::format("{} gave {} values for output {}, expected {} (one per probe)",
                                call, values[o].size(), outputs_[o].name, where_[o].size()));
  }

  std::optional<verdict> run_suite(std::size_t s) {
    std::vector<input_tensor> in;
    std::vector<hidden_input> hidden;
    stage_ = fmt::format("drawing the inputs of the {} suite", suite_name(s));
    draw(s, in, hidden);
    stage_ = fmt::format("run() on the {} suite", suite_name(s));
    answer cand = source_({s, false, in, hidden, &outputs_, &where_});
    check_shape(cand.at_probes, "run()");
    stage_ = fmt::format("the spec's reference() on the {} suite", suite_name(s));
    probe_values ref = spec_.reference(in, where_);
    check_shape(ref, "reference()");
    if (auto failed = compare(s, cand.at_probes, ref)) return failed;
    if (auto failed = strays(s, in, cand.stray)) return failed;
    if (s == 0 && options_.check_determinism && repeats_) {
      stage_ = fmt::format("run() repeated on the {} suite", suite_name(s));
      const answer again = source_({s, true, in, hidden, &outputs_, &where_});
      check_shape(again.at_probes, "run()");
      if (auto failed = repeated(s, cand.at_probes, again.at_probes, ref)) return failed;
      if (auto failed = strays(s, in, again.stray)) return failed;
    }
    candidates_.push_back(std::move(cand.at_probes));
    references_.push_back(std::move(ref));
    return std::nullopt;
  }

  /// Non-finite candidate elements off the probes, judged against the
  /// reference at those elements by the rule of the probes.
  std::optional<verdict> strays(std::size_t s, std::span<const input_tensor> in,
                                const probe_points& stray) {
    if (stray.empty() ||
        std::all_of(stray.begin(), stray.end(), [](const auto& list) { return list.empty(); }))
      return std::nullopt;
    stage_ = fmt::format("the spec's reference() on the {} suite", suite_name(s));
    const probe_values ref = spec_.reference(in, stray);
    for (std::size_t o = 0; o < stray.size() && o < ref.size(); ++o)
      for (std::size_t p = 0; p < stray[o].size() && p < ref[o].size(); ++p) {
        const double r = ref[o][p];
        if (auto failed = non_finite_at(s, o, stray[o][p], std::nan(""), r)) return failed;
      }
    return std::nullopt;
  }

  /// Compares every probe of suite `s`; returns a verdict for non-finite values.
  std::optional<verdict> compare(std::size_t s, const probe_values& cand, const probe_values& ref) {
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      const double top = max_finite(outputs_[o].type);
      double sum_squares = 0;
      for (const double r : ref[o])
        if (std::isfinite(r)) sum_squares += std::min(r * r, top * top);
      const double rms =
          std::sqrt(sum_squares / static_cast<double>(std::max<std::size_t>(ref[o].size(), 1)));
      const double scale = std::max(rms, min_normal(outputs_[o].type));
      if (s == 0) scales_.push_back(scale);
      std::size_t failing = 0;
      worst_element worst;
      for (std::size_t p = 0; p < ref[o].size(); ++p) {
        const double c = cand[o][p], r = ref[o][p];
        if (!std::isfinite(r) || !std::isfinite(c)) {
          if (auto failed = non_finite(s, o, p, c, r)) return failed;
          continue;
        }
        const double clamped = std::clamp(r, -top, top);
        const double e = element_error(c, clamped, tolerances_[o], scale);
        if (e > 1) ++failing;
        if (e > worst.error) worst = {e, o, s, p, c, r, scale, tolerances_[o], 0};
      }
      worst.failing = failing;
      if (worst.error > worst_[s].error) worst_[s] = worst;
    }
    return std::nullopt;
  }

  /// The error in units of the tolerance (0: exact, any difference fails).
  static double element_error(double c, double r, double tol, double scale) {
    const double diff = std::abs(c - r);
    if (tol == 0) return diff == 0 ? 0 : 1 + diff;
    return diff / (tol * (std::abs(r) + scale));
  }

  /// A NaN or Inf in the candidate or the reference at probe `p`.
  std::optional<verdict> non_finite(std::size_t s, std::size_t o, std::size_t p, double c,
                                    double r) const {
    return non_finite_at(s, o, where_[o][p], c, r);
  }

  /// The same at flat element `flat` of output `o` (a NaN `c` off the
  /// probes stands for whatever non-finite value the candidate wrote).
  std::optional<verdict> non_finite_at(std::size_t s, std::size_t o, std::int64_t flat, double c,
                                       double r) const {
    const std::string where = element_text(outputs_[o], flat);
    if (std::isfinite(r)) {
      // An infinity of the reference's sign where the reference overflows the
      // output type is an honest overflow, not a forgery.
      if (std::isinf(c) && std::abs(r) > max_finite(outputs_[o].type) &&
          std::signbit(c) == std::signbit(r))
        return std::nullopt;
      return judged(status::suspicious,
                    fmt::format("suspicious: output {} is {} on the {} suite where the reference "
                                "is finite ({})",
                                where, value_text(c), suite_name(s), value_text(r)));
    }
    const bool both_nan = std::isnan(c) && std::isnan(r);
    if (both_nan || c == r) return std::nullopt;
    return judged(
        status::incorrect,
        fmt::format("incorrect: output {} is {} on the {} suite where the reference is {}", where,
                    value_text(c), suite_name(s), value_text(r)));
  }

  /// Two runs of suite `s` must agree within the tolerance (a split-K
  /// kernel's sums may differ in the last bits), or bit for bit with
  /// bitwise_determinism.
  std::optional<verdict> repeated(std::size_t s, const probe_values& first,
                                  const probe_values& second, const probe_values& ref) const {
    const bool bitwise = options_.bitwise_determinism;
    for (std::size_t o = 0; o < outputs_.size(); ++o)
      for (std::size_t p = 0; p < first[o].size(); ++p) {
        const double a = first[o][p], b = second[o][p];
        if (same_bits(a, b) || (std::isnan(a) && std::isnan(b))) continue;
        const bool within = std::isfinite(a) && std::isfinite(b) &&
                            std::abs(a - b) <= tolerances_[o] * (std::abs(ref[o][p]) + scales_[o]);
        if (!bitwise && tolerances_[o] > 0 && within) continue;
        return judged(
            status::suspicious,
            fmt::format("suspicious: not deterministic: two runs of the {} suite "
                        "differ at output {} ({} then {}){}",
                        suite_name(s), element_text(outputs_[o], where_[o][p]), value_text(a),
                        value_text(b), bitwise ? "" : ", by more than the tolerance"));
      }
    return std::nullopt;
  }

  /// Suites a and b gave bit-identical candidate outputs for some output
  /// while its reference (rounded to the output type) differs.
  std::optional<verdict> insensitive() const {
    if (!options_.check_sensitivity) return std::nullopt;
    for (std::size_t o = 0; o < outputs_.size(); ++o)
      for (std::size_t a = 0; a < candidates_.size(); ++a)
        for (std::size_t b = a + 1; b < candidates_.size(); ++b) {
          if (!same_bits(candidates_[a][o], candidates_[b][o])) continue;
          if (auto p = differing_reference(o, a, b)) return insensitive_verdict(o, a, b, *p);
        }
    return std::nullopt;
  }

  std::optional<std::size_t> differing_reference(std::size_t o, std::size_t a,
                                                 std::size_t b) const {
    const element_type t = outputs_[o].type;
    for (std::size_t p = 0; p < references_[a][o].size(); ++p)
      if (round_to(t, references_[a][o][p]) != round_to(t, references_[b][o][p])) return p;
    return std::nullopt;
  }

  verdict insensitive_verdict(std::size_t o, std::size_t a, std::size_t b, std::size_t p) const {
    const std::vector<double>& values = candidates_[a][o];
    const bool uniform = std::all_of(values.begin(), values.end(),
                                     [&](double v) { return same_bits(v, values.front()); });
    const std::string constant =
        uniform ? fmt::format(" (every probed element is {})", value_text(values.front())) : "";
    return judged(status::suspicious,
                  fmt::format("suspicious: output {} does not change when the inputs change{}: "
                              "bit-identical on the {} and {} suites while the reference differs "
                              "(at {}: {} vs {})",
                              outputs_[o].name, constant, suite_name(a), suite_name(b),
                              element_text(outputs_[o], where_[o][p]),
                              value_text(references_[a][o][p]), value_text(references_[b][o][p])));
  }

  /// The worst element of the first failing suite (in suite order, so the
  /// plainest inputs speak first), then how many suites fail and the worst.
  std::string incorrect_message() const {
    const auto fails = [](const worst_element& e) { return e.error > 1; };
    const worst_element& w = *std::find_if(worst_.begin(), worst_.end(), fails);
    const worst_element& overall = *std::max_element(
        worst_.begin(), worst_.end(),
        [](const worst_element& a, const worst_element& b) { return a.error < b.error; });
    const auto failing_suites = std::count_if(worst_.begin(), worst_.end(), fails);
    const tensor_spec& out = outputs_[w.output];
    const std::string bound =
        w.tolerance == 0 ? std::string("an exact match")
                         : fmt::format("{:.3g} x (|reference| + rms {:.4g})", w.tolerance, w.scale);
    return fmt::format(
        "incorrect: output {} on the {} suite is {} where the reference is {}: off by {:.3g} x "
        "the tolerance ({}); {} of {} probed elements of {} are off; {} of {} suites fail (the "
        "worst: {:.3g} x at {} on the {} suite)",
        element_text(out, where_[w.output][w.position]), suite_name(w.suite),
        value_text(w.candidate), value_text(w.reference), w.error, bound, w.failing,
        where_[w.output].size(), out.name, failing_suites, worst_.size(), overall.error,
        element_text(outputs_[overall.output], where_[overall.output][overall.position]),
        suite_name(overall.suite));
  }

  const gate_spec& spec_;
  const gate_options& options_;
  std::uint64_t seed_;
  answer_source source_;
  bool repeats_;
  bool disguise_;
  std::string stage_;
  std::vector<std::shared_ptr<const tensor_spec>> inputs_;
  std::vector<tensor_spec> outputs_;
  std::vector<double> tolerances_;
  std::vector<double> scales_;  ///< per output: the rms scale of the first suite
  probe_points where_;
  std::vector<probe_values> candidates_, references_;  ///< per suite
  std::vector<worst_element> worst_ =
      std::vector<worst_element>(options_.suite.size());  ///< per suite
};

}  // namespace

struct gate::impl {
  gate_options options;
  mutable std::mutex mutex;
  std::unordered_map<std::uint64_t, verdict> cache;

  std::optional<verdict> cached_verdict(std::uint64_t key) const {
    const std::lock_guard lock(mutex);
    auto it = cache.find(key);
    if (it == cache.end()) return std::nullopt;
    verdict v = it->second;
    v.cached = true;
    v.seconds = 0;
    return v;
  }

  /// Runs one judge (or answers from the cache), turning exceptions into a
  /// runtime_error verdict naming the stage, and caches the verdict.
  verdict checked(const gate_spec& spec, std::uint64_t key, answer_source source, bool repeats,
                  bool disguise = true) {
    if (auto v = cached_verdict(key)) return *v;
    const auto start = std::chrono::steady_clock::now();
    judge j(spec, options, key, std::move(source), repeats, disguise);
    verdict v;
    try {
      v = j.run();
    } catch (const std::exception& e) {
      v = judged(status::runtime_error,
                 fmt::format("the kernel failed in {}: {}", j.stage(), e.what()));
    } catch (...) {
      v = judged(status::runtime_error,
                 fmt::format("the kernel failed in {}: an exception not derived from "
                             "std::exception",
                             j.stage()));
    }
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::lock_guard lock(mutex);
    cache.emplace(key, v);
    return v;
  }
};

namespace {

/// Samples whole outputs at the probes and lists the non-finite elements
/// off them (at most stray_limit per output). Throws on a wrong shape.
answer sampled(const output_values& whole, const std::vector<tensor_spec>& outputs,
               const probe_points& where, std::string_view call) {
  if (whole.size() != outputs.size())
    throw error(fmt::format("{} gave {} outputs, expected {}", call, whole.size(), outputs.size()));
  answer a;
  a.at_probes.resize(outputs.size());
  a.stray.resize(outputs.size());
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(outputs[o].elements(), 0));
    if (whole[o].size() != n)
      throw error(fmt::format("{} gave {} values for output {}, expected {} (the whole output)",
                              call, whole[o].size(), outputs[o].name, n));
    a.at_probes[o].reserve(where[o].size());
    for (const std::int64_t flat : where[o])
      a.at_probes[o].push_back(whole[o][static_cast<std::size_t>(flat)]);
    std::vector<std::int64_t> probed = where[o];
    std::sort(probed.begin(), probed.end());
    for (std::size_t i = 0; i < n && a.stray[o].size() < stray_limit; ++i)
      if (!std::isfinite(whole[o][i]) &&
          !std::binary_search(probed.begin(), probed.end(), static_cast<std::int64_t>(i)))
        a.stray[o].push_back(static_cast<std::int64_t>(i));
  }
  return a;
}

}  // namespace

void gate_options::validate() const {
  if (suite.empty())
    throw options_error("gate_options::suite: must hold at least one distribution");
  if (!(tolerance_scale > 0) || !std::isfinite(tolerance_scale))
    throw options_error(fmt::format(
        "gate_options::tolerance_scale: must be > 0 and finite (got {})", tolerance_scale));
  if (!(roofline_slack >= 0 && roofline_slack < 1))
    throw options_error(
        fmt::format("gate_options::roofline_slack: must be in [0, 1) (got {})", roofline_slack));
  if (!(max_bytes_per_s >= 0) || std::isinf(max_bytes_per_s))
    throw options_error(fmt::format(
        "gate_options::max_bytes_per_s: must be >= 0 and finite (got {})", max_bytes_per_s));
}

gate::gate(gate_options o) : impl_(std::make_unique<impl>()) {
  o.validate();
  if (o.secret == 0) o.secret = draw_secret();
  impl_->options = std::move(o);
}

gate::~gate() = default;

verdict gate::check(const gate_spec& spec, const gated_kernel& candidate,
                    std::uint64_t config_key) {
  return impl_->checked(
      spec, config_key,
      [&candidate](const answer_request& r) {
        return sampled(candidate.run(r.hidden), *r.outputs, *r.where, "run()");
      },
      true);
}

verdict gate::check(const gate_spec& spec, const sampled_kernel& executor,
                    std::uint64_t config_key) {
  return impl_->checked(
      spec, config_key,
      [&executor](const answer_request& r) {
        return answer{executor.run(r.in, *r.where), {}};
      },
      true, false);
}

std::vector<std::vector<hidden_input>> gate::hidden_inputs(const gate_spec& spec,
                                                           std::uint64_t config_key) const {
  judge j(spec, impl_->options, config_key, nullptr, false, true);
  j.read_spec();
  std::vector<std::vector<hidden_input>> sets;
  std::vector<input_tensor> in;
  for (std::size_t s = 0; s < impl_->options.suite.size(); ++s) {
    sets.emplace_back();
    j.draw(s, in, sets.back());
  }
  return sets;
}

verdict gate::check_outputs(const gate_spec& spec, std::uint64_t config_key,
                            std::span<const output_values> outputs, const output_values* repeat) {
  const std::size_t suites = impl_->options.suite.size();
  if (outputs.size() != suites) {
    if (auto v = impl_->cached_verdict(config_key)) return *v;
    verdict v = judged(status::runtime_error,
                       fmt::format("the kernel failed in run(): {} output sets for {} suites",
                                   outputs.size(), suites));
    const std::lock_guard lock(impl_->mutex);
    impl_->cache.emplace(config_key, v);
    return v;
  }
  return impl_->checked(
      spec, config_key,
      [outputs, repeat](const answer_request& r) {
        const output_values& whole = r.repeat ? *repeat : outputs[r.suite];
        return sampled(whole, *r.outputs, *r.where, "run()");
      },
      repeat != nullptr);
}

std::optional<verdict> gate::check_time(double objective_s, double bound_s) const {
  if (!std::isfinite(objective_s) || !(objective_s > 0))
    return judged(
        status::suspicious,
        fmt::format("suspicious: the time {} s is not a finite positive number", objective_s));
  if (!(bound_s > 0) || !std::isfinite(bound_s)) return std::nullopt;
  const double slack = impl_->options.roofline_slack;
  if (!(objective_s < (1 - slack) * bound_s)) return std::nullopt;
  return judged(status::suspicious,
                fmt::format("suspicious: {:.4g} s is faster than the roofline bound {:.4g} s "
                            "({:.1f}% below it; the gate allows {:.1f}%)",
                            objective_s, bound_s, 100 * (1 - objective_s / bound_s), 100 * slack));
}

double gate::time_bound(const gate_spec& spec) const {
  double bound = std::max(spec.roofline_s(), 0.0);
  if (impl_->options.max_bytes_per_s > 0) {
    double bytes = 0;
    for (const auto& list : {spec.inputs(), spec.outputs()})
      for (const tensor_spec& t : list)
        bytes += static_cast<double>(t.elements()) * static_cast<double>(bytes_of(t.type));
    bound = std::max(bound, bytes / impl_->options.max_bytes_per_s);
  }
  return std::isfinite(bound) ? bound : 0;
}

void gate::applied(measurement& m, const gate_spec& spec, const verdict& v) const {
  m.metrics["gate_wall_s"] = v.seconds;
  if (impl_->options.charge_wall_time) m.cost.gate_s += v.seconds;
  if (std::isfinite(v.max_error)) m.metrics["gate_max_error"] = v.max_error;
  if (!v.ok()) {
    m.status = v.status;
    m.message = v.message;
    return;
  }
  double bound = 0;
  try {
    bound = time_bound(spec);
  } catch (const std::exception&) {
    bound = 0;  // the check already read the spec; a throw here is the spec's bug
  }
  apply_time(m, bound);
}

void gate::apply(measurement& m, const gate_spec& spec, const gated_kernel& candidate,
                 std::uint64_t config_key) {
  if (!m.ok()) return;
  applied(m, spec, check(spec, candidate, config_key));
}

void gate::apply(measurement& m, const gate_spec& spec, const sampled_kernel& executor,
                 std::uint64_t config_key) {
  if (!m.ok()) return;
  applied(m, spec, check(spec, executor, config_key));
}

void gate::apply_time(measurement& m, double bound_s) const {
  if (!m.ok()) return;
  const auto metric = m.metrics.find("roofline_s");
  if (metric != m.metrics.end() && std::isfinite(metric->second))
    bound_s = std::max(bound_s, metric->second);
  if (auto v = check_time(m.objective, bound_s)) {
    m.status = v->status;
    m.message = v->message;
  }
}

const gate_options& gate::options() const noexcept { return impl_->options; }

std::size_t gate::cached() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->cache.size();
}

}  // namespace tessel
