// session_verdicts.cpp: one check's verdict rules (gate/session.hpp): every
// call is judged against its set's reference with a bound per element, calls
// on one set must agree, outputs must follow their inputs across sets, and
// the spec must not change under the check. session.cpp draws the sets and
// the calls. docs/gate.md explains each rule.
#include "gate/session.hpp"

#include <tessel/error.hpp>

#include "gate/hash.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace tessel {
namespace {

/// Non-finite elements off the probes judged per output and call (each
/// costs a reference evaluation at that element).
constexpr std::size_t stray_limit = 16;

std::string value_text(double v) { return fmt::format("{:.9g}", v); }

std::string element_text(const tensor_spec& s, std::int64_t flat) {
  return fmt::format("{}[{}]", s.name, fmt::join(index_of(s, flat), ", "));
}

bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

verdict judged(status s, std::string message) {
  verdict v;
  v.status = s;
  v.message = std::move(message);
  return v;
}

/// The error in units of the element's bound tol x (|r| + allowance) (0:
/// exact, any difference fails); the allowance is the output's scale plus
/// the element's spread. A difference below `subnormal` (the output type's
/// smallest normal) is none: engines flush subnormal results to zero, so an
/// honest schedule may give 0 where the reference underflows (SiLU of a
/// large negative pre-activation).
double element_error(double c, double r, double tol, double allowance, double subnormal) {
  const double diff = std::abs(c - r);
  if (tol == 0) return diff == 0 ? 0 : 1 + diff;
  if (diff < subnormal) return 0;
  return diff / (tol * (std::abs(r) + allowance));
}

bool same_declaration(const tensor_spec& a, const tensor_spec& b) {
  return a.name == b.name && a.shape == b.shape && a.type == b.type &&
         a.label_range == b.label_range && a.reduction == b.reduction && a.scale == b.scale;
}

}  // namespace

double gate_session::state::allowance(const set_record& rec, std::size_t o, std::size_t p) const {
  return rec.scales[o] + (rec.spread.empty() ? 0.0 : rec.spread[o][p]);
}

verdict gate_session::state::fail(verdict v) {
  if (!failure_) failure_ = std::move(v);
  return *failure_;
}

verdict gate_session::state::failed_in_stage(const std::exception& e) {
  return fail(
      judged(status::runtime_error, fmt::format("the kernel failed in {}: {}", stage, e.what())));
}

std::optional<verdict> gate_session::state::judge_whole(std::size_t s, const output_values& whole) {
  if (failure_) return failure_;
  try {
    stage = fmt::format("run() on the {} suite", suite_name(s));
    if (whole.size() != outputs_.size())
      throw error(fmt::format("run() gave {} outputs, expected {}", whole.size(), outputs_.size()));
    probe_values at(outputs_.size());
    probe_points stray(outputs_.size());
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      const auto n = static_cast<std::size_t>(std::max<std::int64_t>(outputs_[o].elements(), 0));
      if (whole[o].size() != n)
        throw error(
            fmt::format("run() gave {} values for output {}, expected {} (the whole output)",
                        whole[o].size(), outputs_[o].name, n));
      at[o].reserve(where_[o].size());
      for (const std::int64_t flat : where_[o])
        at[o].push_back(whole[o][static_cast<std::size_t>(flat)]);
      if (where_[o].size() == n) continue;  // compared whole
      for (std::size_t i = 0; i < n && stray[o].size() < stray_limit; ++i)
        if (!std::isfinite(whole[o][i]) &&
            !std::binary_search(where_[o].begin(), where_[o].end(), static_cast<std::int64_t>(i)))
          stray[o].push_back(static_cast<std::int64_t>(i));
    }
    if (auto failed = judge(s, at)) return fail(*std::move(failed));
    if (auto failed = strays(s, stray)) return fail(*std::move(failed));
  } catch (const std::exception& e) {
    return failed_in_stage(e);
  }
  return std::nullopt;
}

std::optional<verdict> gate_session::state::judge_probes(std::size_t s, const probe_values& at) {
  if (failure_) return failure_;
  try {
    stage = fmt::format("run() on the {} suite", suite_name(s));
    check_shape(at, "run()");
    if (auto failed = judge(s, at)) return fail(*std::move(failed));
  } catch (const std::exception& e) {
    return failed_in_stage(e);
  }
  return std::nullopt;
}

std::optional<verdict> gate_session::state::judge(std::size_t s, const probe_values& at) {
  ensure_reference(s);
  set_record& rec = records_[s];
  const int call = ++judged_;
  for (std::size_t o = 0; o < outputs_.size(); ++o) {
    const double top = max_finite(outputs_[o].type);
    worst_element worst;
    std::size_t failing = 0;
    for (std::size_t p = 0; p < at[o].size(); ++p) {
      const double c = at[o][p], r = rec.reference[o][p];
      if (!std::isfinite(r) || !std::isfinite(c)) {
        if (auto failed = non_finite_at(s, o, where_[o][p], c, r)) return failed;
        continue;
      }
      const double e = element_error(c, std::clamp(r, -top, top), tolerances_[o],
                                     allowance(rec, o, p), min_normal(outputs_[o].type));
      if (e > 1) ++failing;
      if (e > worst.error)
        worst = {e, o, p, call, c, r, rec.scales[o], tolerances_[o], allowance(rec, o, p), 0};
    }
    worst.failing = failing;
    if (worst.error > rec.worst.error) rec.worst = worst;
  }
  if (rec.calls > 0 && options_.check_determinism) {
    if (auto failed = repeated(s, at)) return failed;
  }
  if (rec.calls == 0) remember_first(s, at);
  ++rec.calls;
  return std::nullopt;
}

std::optional<verdict> gate_session::state::strays(std::size_t s, const probe_points& stray) {
  if (std::all_of(stray.begin(), stray.end(), [](const auto& list) { return list.empty(); }))
    return std::nullopt;
  stage = fmt::format("the spec's reference() on the {} suite", suite_name(s));
  const probe_values ref = spec_.reference(drawn_[s], stray);
  for (std::size_t o = 0; o < stray.size() && o < ref.size(); ++o)
    for (std::size_t p = 0; p < stray[o].size() && p < ref[o].size(); ++p)
      if (auto failed = non_finite_at(s, o, stray[o][p], std::nan(""), ref[o][p])) return failed;
  return std::nullopt;
}

void gate_session::state::remember_first(std::size_t s, const probe_values& at) {
  set_record& rec = records_[s];
  for (std::size_t o = 0; o < outputs_.size(); ++o) {
    std::vector<double> sample;
    sample.reserve(determinism_[o].size());
    for (const std::size_t p : determinism_[o]) sample.push_back(at[o][p]);
    rec.first.push_back(std::move(sample));
    std::uint64_t h = at[o].size();
    bool uniform = true;
    for (const double v : at[o]) {
      h = detail::hash(h, std::bit_cast<std::uint64_t>(v));
      uniform = uniform && same_bits(v, at[o].front());
    }
    rec.first_bits.push_back(h);
    rec.first_value.push_back(at[o].empty() ? 0.0 : at[o].front());
    rec.uniform.push_back(uniform);
  }
}

std::optional<verdict> gate_session::state::non_finite_at(std::size_t s, std::size_t o,
                                                          std::int64_t flat, double c,
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
  return judged(status::incorrect,
                fmt::format("incorrect: output {} is {} on the {} suite where the reference is {}",
                            where, value_text(c), suite_name(s), value_text(r)));
}

std::optional<verdict> gate_session::state::repeated(std::size_t s, const probe_values& at) const {
  const set_record& rec = records_[s];
  const bool bitwise = options_.bitwise_determinism;
  for (std::size_t o = 0; o < outputs_.size(); ++o)
    for (std::size_t i = 0; i < determinism_[o].size(); ++i) {
      const std::size_t p = determinism_[o][i];
      const double a = rec.first[o][i], b = at[o][p];
      if (same_bits(a, b) || (std::isnan(a) && std::isnan(b))) continue;
      const double bound = tolerances_[o] * (std::abs(rec.reference[o][p]) + allowance(rec, o, p));
      const bool within = std::isfinite(a) && std::isfinite(b) && std::abs(a - b) <= bound;
      if (!bitwise && tolerances_[o] > 0 && within) continue;
      return judged(
          status::suspicious,
          fmt::format("suspicious: not deterministic: two runs of the {} suite differ "
                      "at output {} ({} then {}){}",
                      suite_name(s), element_text(outputs_[o], where_[o][p]), value_text(a),
                      value_text(b), bitwise ? "" : ", by more than the tolerance"));
    }
  return std::nullopt;
}

std::optional<verdict> gate_session::state::insensitive() const {
  if (!options_.check_sensitivity) return std::nullopt;
  for (std::size_t o = 0; o < outputs_.size(); ++o) {
    const element_type t = outputs_[o].type;
    for (std::size_t a = 0; a < records_.size(); ++a)
      for (std::size_t b = a + 1; b < records_.size(); ++b) {
        const set_record &x = records_[a], &y = records_[b];
        if (x.calls == 0 || y.calls == 0 || x.first_bits[o] != y.first_bits[o]) continue;
        for (std::size_t p = 0; p < x.reference[o].size(); ++p) {
          const double rx = x.reference[o][p], ry = y.reference[o][p];
          const double qx = round_to(t, rx), qy = round_to(t, ry);
          // references apart by less than the smallest normal: a flush gives both as 0
          if (qx == qy || std::abs(qx - qy) < min_normal(t)) continue;
          const std::string constant = x.uniform[o] ? fmt::format(" (every probed element is {})",
                                                                  value_text(x.first_value[o]))
                                                    : "";
          return judged(
              status::suspicious,
              fmt::format("suspicious: output {} does not change when the inputs change{}: "
                          "bit-identical on the {} and {} suites while the reference differs "
                          "(at {}: {} vs {})",
                          outputs_[o].name, constant, suite_name(a), suite_name(b),
                          element_text(outputs_[o], where_[o][p]), value_text(rx), value_text(ry)));
        }
      }
  }
  return std::nullopt;
}

std::optional<verdict> gate_session::state::spec_changed() const {
  const auto inputs = spec_.inputs();
  const auto outputs = spec_.outputs();
  bool same = inputs.size() == inputs_.size() && outputs.size() == outputs_.size() &&
              spec_.tolerances() == declared_tolerances_;
  for (std::size_t i = 0; same && i < inputs.size(); ++i)
    same = same_declaration(inputs[i], *inputs_[i]);
  for (std::size_t o = 0; same && o < outputs.size(); ++o)
    same = same_declaration(outputs[o], outputs_[o]);
  if (same) return std::nullopt;
  return judged(status::suspicious,
                "suspicious: the spec's declarations (inputs, outputs or tolerances) changed "
                "while the candidate ran");
}

std::string gate_session::state::incorrect_message() const {
  // The worst element of the first failing set in suite order (the plainest
  // inputs speak first), then how many sets fail and the worst of all.
  std::vector<std::size_t> failing;
  std::size_t worst_set = 0;
  for (std::size_t s = 0; s < records_.size(); ++s) {
    if (records_[s].worst.error > 1) failing.push_back(s);
    if (records_[s].worst.error > records_[worst_set].worst.error) worst_set = s;
  }
  const std::size_t first = failing.empty() ? worst_set : failing.front();
  const worst_element& w = records_[first].worst;
  const worst_element& o = records_[worst_set].worst;
  const std::size_t judged_sets = static_cast<std::size_t>(std::count_if(
      records_.begin(), records_.end(), [](const set_record& r) { return r.calls > 0; }));
  const tensor_spec& out = outputs_[w.output];
  const std::string spread =
      w.allowance > w.scale ? fmt::format(" + spread {:.4g}", w.allowance - w.scale) : "";
  const std::string bound =
      w.tolerance == 0
          ? std::string("an exact match")
          : fmt::format("{:.3g} x (|reference| + scale {:.4g}{})", w.tolerance, w.scale, spread);
  return fmt::format(
      "incorrect: output {} on the {} suite (call {}) is {} where the reference is {}: off by "
      "{:.3g} x its bound ({}); {} of {} compared elements of {} are off; {} of {} suites fail "
      "(the worst: {:.3g} x at {} on the {} suite)",
      element_text(out, where_[w.output][w.position]), suite_name(first), w.call,
      value_text(w.candidate), value_text(w.reference), w.error, bound, w.failing,
      where_[w.output].size(), out.name, failing.size(), judged_sets, o.error,
      element_text(outputs_[o.output], where_[o.output][o.position]), suite_name(worst_set));
}

verdict gate_session::state::finish() const {
  verdict v;
  if (failure_) {
    v = *failure_;
  } else if (judged_ == 0) {
    v = judged(status::runtime_error, "no call of the candidate was judged");
  } else if (auto failed = insensitive()) {
    v = *std::move(failed);
  }
  for (const set_record& r : records_) {
    v.suites += r.calls > 0 ? 1 : 0;
    v.max_error = std::max(v.max_error, r.worst.error);
  }
  v.calls = judged_;
  if (v.ok() && v.max_error > 1) {
    v.status = status::incorrect;
    v.message = incorrect_message();
  }
  return v;
}

}  // namespace tessel
