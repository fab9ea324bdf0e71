// gate.cpp: the equivalence gate. One check draws the probes once, then for
// each suite distribution draws the hidden inputs, runs the candidate and the
// reference on them, and judges: NaN/Inf and runs that do not repeat are
// suspicious at once; after every suite, outputs that did not change while
// the reference did are suspicious, and an element off by more than its
// tolerance is incorrect. docs/gate.md explains each rule.
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include "gate/hash.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <unordered_map>

namespace tessel {
namespace {

/// Counter of the probe sample's seed (suites use their index).
constexpr std::uint64_t probe_stream = ~0ULL;

std::uint64_t input_seed(std::uint64_t secret, std::size_t suite, std::size_t input) {
  return detail::hash(detail::hash(secret, suite), input);
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

/// One check of one kernel: the state the rules share.
class judge {
 public:
  judge(const gated_kernel& k, const gate_options& o) : kernel_(k), options_(o) {}

  verdict run() {
    declare();
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

 private:
  void declare() {
    stage_ = "inputs()";
    inputs_ = kernel_.inputs();
    stage_ = "outputs()";
    outputs_ = kernel_.outputs();
    if (outputs_.empty()) throw error("the kernel declares no outputs");
    stage_ = "tolerances()";
    tolerances_ = kernel_.tolerances();
    if (tolerances_.size() != outputs_.size())
      throw error(fmt::format("tolerances() gave {} values for {} outputs", tolerances_.size(),
                              outputs_.size()));
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      if (!(tolerances_[o] >= 0) || !std::isfinite(tolerances_[o]))
        throw error(
            fmt::format("tolerances() gave {} for output {}", tolerances_[o], outputs_[o].name));
      tolerances_[o] *= options_.tolerance_scale;
    }
    stage_ = "probes()";
    rng r(detail::hash(options_.secret, probe_stream));
    where_ = kernel_.probes(r);
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
    in.reserve(inputs_.size());
    stage_ = fmt::format("drawing the inputs of the {} suite", suite_name(s));
    for (std::size_t i = 0; i < inputs_.size(); ++i)
      in.emplace_back(inputs_[i], options_.suite[s], input_seed(options_.secret, s, i));
    stage_ = fmt::format("run() on the {} suite", suite_name(s));
    probe_values cand = kernel_.run(in, where_);
    check_shape(cand, "run()");
    stage_ = fmt::format("reference() on the {} suite", suite_name(s));
    probe_values ref = kernel_.reference(in, where_);
    check_shape(ref, "reference()");
    if (auto failed = compare(s, cand, ref)) return failed;
    if (s == 0 && options_.check_determinism) {
      stage_ = fmt::format("run() repeated on the {} suite", suite_name(s));
      const probe_values again = kernel_.run(in, where_);
      check_shape(again, "run()");
      if (auto failed = repeated(s, cand, again)) return failed;
    }
    candidates_.push_back(std::move(cand));
    references_.push_back(std::move(ref));
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
    const std::string where = element_text(outputs_[o], where_[o][p]);
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

  std::optional<verdict> repeated(std::size_t s, const probe_values& first,
                                  const probe_values& second) const {
    for (std::size_t o = 0; o < outputs_.size(); ++o)
      for (std::size_t p = 0; p < first[o].size(); ++p)
        if (!same_bits(first[o][p], second[o][p]))
          return judged(status::suspicious,
                        fmt::format("suspicious: not deterministic: two runs of the {} suite "
                                    "differ at output {} ({} then {})",
                                    suite_name(s), element_text(outputs_[o], where_[o][p]),
                                    value_text(first[o][p]), value_text(second[o][p])));
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

  const gated_kernel& kernel_;
  const gate_options& options_;
  std::string stage_;
  std::vector<tensor_spec> inputs_, outputs_;
  std::vector<double> tolerances_;
  probe_points where_;
  std::vector<probe_values> candidates_, references_;  ///< per suite
  std::vector<worst_element> worst_ =
      std::vector<worst_element>(options_.suite.size());  ///< per suite
};

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
}

struct gate::impl {
  gate_options options;
  mutable std::mutex mutex;
  std::unordered_map<std::uint64_t, verdict> cache;
};

gate::gate(gate_options o) : impl_(std::make_unique<impl>()) {
  o.validate();
  if (o.secret == 0) o.secret = draw_secret();
  impl_->options = std::move(o);
}

gate::~gate() = default;

verdict gate::check(const gated_kernel& k, std::uint64_t config_key) {
  {
    const std::lock_guard lock(impl_->mutex);
    if (auto it = impl_->cache.find(config_key); it != impl_->cache.end()) {
      verdict v = it->second;
      v.cached = true;
      v.seconds = 0;
      return v;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  judge j(k, impl_->options);
  verdict v;
  try {
    v = j.run();
  } catch (const std::exception& e) {
    v = judged(status::runtime_error,
               fmt::format("the kernel failed in {}: {}", j.stage(), e.what()));
  } catch (...) {
    v = judged(status::runtime_error,
               fmt::format("the kernel failed in {}: an exception not derived from std::exception",
                           j.stage()));
  }
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::lock_guard lock(impl_->mutex);
  impl_->cache.emplace(config_key, v);
  return v;
}

std::optional<verdict> gate::check_time(double objective_s, double bound_s) const {
  if (!(bound_s > 0) || !std::isfinite(bound_s)) return std::nullopt;
  const double slack = impl_->options.roofline_slack;
  if (!(objective_s < (1 - slack) * bound_s)) return std::nullopt;
  return judged(status::suspicious,
                fmt::format("suspicious: {:.4g} s is faster than the roofline bound {:.4g} s "
                            "({:.1f}% below it; the gate allows {:.1f}%)",
                            objective_s, bound_s, 100 * (1 - objective_s / bound_s), 100 * slack));
}

void gate::apply(measurement& m, const gated_kernel* kernel, std::uint64_t config_key) {
  if (!m.ok()) return;
  if (kernel != nullptr) {
    const verdict v = check(*kernel, config_key);
    m.metrics["gate_wall_s"] = v.seconds;
    if (impl_->options.charge_wall_time) m.cost.gate_s += v.seconds;
    if (std::isfinite(v.max_error)) m.metrics["gate_max_error"] = v.max_error;
    if (!v.ok()) {
      m.status = v.status;
      m.message = v.message;
      return;
    }
  }
  const auto bound = m.metrics.find("roofline_s");
  if (bound == m.metrics.end()) return;
  if (auto v = check_time(m.objective, bound->second)) {
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
