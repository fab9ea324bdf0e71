// session.cpp: one check's sets and calls (gate/session.hpp): drawn from the
// gate's key, pairwise distinct, the timing loop's sets replayed, each set's
// reference computed when it is judged. The rules that judge the calls are
// in session_verdicts.cpp. docs/gate.md explains each.
#include "gate/session.hpp"

#include <tessel/error.hpp>
#include <tessel/loop_rule.hpp>

#include "gate/hash.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

namespace tessel {
namespace {

/// Positions per output at which calls on one set are compared with each other.
constexpr std::size_t determinism_positions = 1 << 16;
/// References computed up front when sets x compared elements fit in this many values.
constexpr std::size_t reference_budget = std::size_t{1} << 25;

/// The kinds whose values are fresh draws a shared_prefix set can extend.
bool can_be_base(distribution d) {
  switch (d) {
    case distribution::constant:
    case distribution::structured:
    case distribution::sparse:
    case distribution::padded:
    case distribution::mask:
    case distribution::late_terms:
    case distribution::shared_prefix: return false;
    default: return true;
  }
}

/// The median magnitude of the finite nonzero values (clamped to `top`), at
/// least `floor`: the scale near-zero elements are judged against, which a
/// few large elements cannot inflate.
double robust_scale(const std::vector<double>& values, double top, double floor) {
  std::vector<double> magnitudes;
  magnitudes.reserve(values.size());
  for (const double v : values)
    if (std::isfinite(v) && v != 0) magnitudes.push_back(std::min(std::abs(v), top));
  if (magnitudes.empty()) return floor;
  const auto middle = magnitudes.begin() + static_cast<std::ptrdiff_t>(magnitudes.size() / 2);
  std::nth_element(magnitudes.begin(), middle, magnitudes.end());
  return std::max(*middle, floor);
}

/// Draws of a set that repeats another before the gate gives up (docs/gate.md,
/// "Distinct sets"), the first kind_redraws of them of the set's own kind.
constexpr int redraws = 32, kind_redraws = 4;

/// Whether two inputs of one spec hold the same value at every element;
/// read from the end, where shared_prefix sets differ.
bool same_values(const input_tensor& a, const input_tensor& b) {
  for (std::int64_t flat = a.spec().elements(); flat-- > 0;)
    if (a.at(flat) != b.at(flat)) return false;
  return true;
}

/// The calls of a timing loop whose inputs perturbed_set compares.
constexpr std::uint64_t tracked_calls = std::uint64_t{1} << 16;

/// A hash of one element of a loop's input, summed over the elements: an
/// exchange updates the sum in O(1). 0 and -0 hash alike.
std::uint64_t element_hash(std::uint64_t flat, double v) {
  return detail::hash(std::bit_cast<std::uint64_t>(v == 0 ? 0.0 : v), flat);
}

/// A hash of a set's inputs at 16 positions each, 0 and -0 alike: the last
/// element, 8 anywhere and 7 in the last quarter (where two shared_prefix
/// sets differ), hashed from the input's size so that none falls on a
/// row's padding by its stride. Sets that differ (nearly all) differ there,
/// so only sets of equal fingerprints are compared element by element.
std::uint64_t fingerprint(const std::vector<input_tensor>& set) {
  std::uint64_t h = 0;
  for (const input_tensor& t : set) {
    const std::int64_t n = t.spec().elements();
    for (std::int64_t k = 0; k < 16 && n > 0; ++k) {
      const auto count = static_cast<std::uint64_t>(n), draw = detail::hash(count, k);
      const std::uint64_t last_quarter = std::max<std::uint64_t>(count / 4, 1);
      const auto flat = static_cast<std::int64_t>(k == 15 ? count - 1
                                                  : k < 8 ? draw % count
                                                          : count - 1 - draw % last_quarter);
      h = detail::hash(h, element_hash(static_cast<std::uint64_t>(flat), t.at(flat)));
    }
  }
  return h;
}

}  // namespace

gate_session::state::state(const gate_spec& spec, const gate_options& options,
                           const detail::gate_key& key, std::uint64_t config_key,
                           std::uint64_t epoch, bool disguise)
    : spec_(spec),
      options_(options),
      key_(key),
      config_key_(config_key),
      epoch_(epoch),
      disguise_(disguise) {}

void gate_session::state::prepare() {
  read_spec();
  draw_sets();
  draw_calls();
}

void gate_session::state::read_spec() {
  stage = "the spec's inputs()";
  for (tensor_spec& t : spec_.inputs()) {
    if (!(t.scale > 0) || !std::isfinite(t.scale))
      throw error(fmt::format("inputs() gave input {} a scale of {}", t.name, t.scale));
    inputs_.push_back(std::make_shared<const tensor_spec>(std::move(t)));
  }
  stage = "the spec's outputs()";
  outputs_ = spec_.outputs();
  if (outputs_.empty()) throw error("the spec declares no outputs");
  stage = "the spec's tolerances()";
  declared_tolerances_ = spec_.tolerances();
  if (declared_tolerances_.size() != outputs_.size())
    throw error(fmt::format("tolerances() gave {} values for {} outputs",
                            declared_tolerances_.size(), outputs_.size()));
  for (std::size_t o = 0; o < outputs_.size(); ++o) {
    const double t = declared_tolerances_[o];
    if (!(t >= 0) || !std::isfinite(t))
      throw error(fmt::format("tolerances() gave {} for output {}", t, outputs_[o].name));
    tolerances_.push_back(t * options_.tolerance_scale);
  }
  stage = "the spec's probes()";
  rng r(key_.derive("probes", {config_key_, epoch_}));
  where_ = spec_.probes(r);
  if (where_.size() != outputs_.size())
    throw error(
        fmt::format("probes() gave {} lists for {} outputs", where_.size(), outputs_.size()));
  for (std::size_t o = 0; o < outputs_.size(); ++o) {
    for (const std::int64_t flat : where_[o])
      if (flat < 0 || flat >= outputs_[o].elements())
        throw error(fmt::format("probes() gave index {} for output {} of {} elements", flat,
                                outputs_[o].name, outputs_[o].elements()));
    std::vector<std::size_t> positions(where_[o].size());
    std::iota(positions.begin(), positions.end(), std::size_t{0});
    if (positions.size() > determinism_positions) {
      for (std::size_t i = 0; i < determinism_positions; ++i)
        std::swap(positions[i], positions[i + r.uniform(positions.size() - i)]);
      positions.resize(determinism_positions);
    }
    determinism_.push_back(std::move(positions));
  }
}

template <class Seed>
void gate_session::state::draw_set(std::size_t s, distribution d, Seed&& seed_of,
                                   bool extends_base) {
  stage = fmt::format("drawing the inputs of the {} suite", suite_name(s));
  std::vector<input_tensor>& drawn = drawn_.at(s);
  drawn.clear();
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    const input_tensor* shared = extends_base && base_ ? &drawn_[*base_][i] : nullptr;
    drawn.emplace_back(*inputs_[i], d, seed_of(i), disguise_, shared);
  }
  std::vector<hidden_input>& hidden = hidden_.at(s);
  hidden.clear();
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    hidden.push_back(
        detail::hidden_access::make(std::make_shared<const tensor_spec>(*inputs_[i]), drawn[i]));
  remember_print(s);
}

void gate_session::state::remember_print(std::size_t s) {
  if (prints_.size() <= s) prints_.resize(s + 1);
  prints_[s] = fingerprint(drawn_.at(s));
}

template <class Seed>
void gate_session::state::draw_distinct(std::size_t s, distribution d, Seed&& seed_of,
                                        bool extends_base) {
  for (int attempt = 0;; ++attempt) {
    const distribution kind = attempt < kind_redraws ? d : distribution::normal;
    draw_set(
        s, kind, [&](std::size_t i) { return seed_of(i, attempt); },
        extends_base && kind == distribution::shared_prefix);
    const auto twin = same_as(s);
    if (!twin) return;
    if (attempt + 1 == redraws)
      throw error(fmt::format(
          "every one of {} draws of the {} suite's inputs repeats those of the {} suite: the "
          "spec's inputs, {}, have too little variety for the gate, which gives a candidate no "
          "input set twice (docs/gate.md, \"Distinct sets\"); declare more elements or a wider "
          "label range",
          redraws, suite_name(s), suite_name(*twin), variety_text()));
  }
}

std::optional<std::size_t> gate_session::state::same_as(std::size_t s) const {
  if (inputs_.empty()) return std::nullopt;
  const std::vector<input_tensor>& set = drawn_.at(s);
  for (std::size_t other = 0; other < drawn_.size(); ++other) {
    const std::vector<input_tensor>& them = drawn_[other];
    if (other == s || them.size() != set.size() || prints_.at(other) != prints_.at(s))
      continue;  // not drawn yet, or different where the fingerprints look
    bool same = true;
    for (std::size_t i = 0; i < set.size() && same; ++i) same = same_values(set[i], them[i]);
    if (same) return other;
  }
  return std::nullopt;
}

std::string gate_session::state::variety_text() const {
  std::vector<std::string> each;
  double bits = 0;  // log2 of the distinct sets the inputs allow, at most
  for (const auto& t : inputs_) {
    const std::int64_t n = t->elements();
    if (t->type == element_type::int32) {
      each.push_back(fmt::format("{} (int32, {} element{} in [0, {}))", t->name, n,
                                 n == 1 ? "" : "s", t->label_range));
      bits += static_cast<double>(n) * std::log2(static_cast<double>(t->label_range));
    } else {
      each.push_back(
          fmt::format("{} ({}, {} element{})", t->name, to_string(t->type), n, n == 1 ? "" : "s"));
      bits += static_cast<double>(n) * 8 * static_cast<double>(bytes_of(t->type));
    }
  }
  const std::string most =
      bits < 53 ? fmt::format("{}", std::llround(std::exp2(bits))) : fmt::format("2^{:.0f}", bits);
  return fmt::format("{}, at most {} distinct sets", fmt::join(each, ", "), most);
}

void gate_session::state::draw_sets() {
  const std::size_t n = options_.suite.size();
  drawn_.resize(n);
  hidden_.resize(n);
  records_.resize(n);
  kinds_.assign(options_.suite.begin(), options_.suite.end());
  for (std::size_t s = 0; s < n && !base_; ++s)
    if (can_be_base(options_.suite[s])) base_ = s;
  // Sets a shared_prefix set extends are drawn first.
  for (const bool prefix : {false, true})
    for (std::size_t s = 0; s < n; ++s) {
      const distribution d = options_.suite[s];
      if ((d == distribution::shared_prefix) != prefix) continue;
      draw_distinct(
          s, d,
          [&](std::size_t i, int attempt) {
            return attempt == 0
                       ? key_.derive("input", {config_key_, epoch_, s, i})
                       : key_.derive("input redrawn", {config_key_, epoch_, s, i,
                                                       static_cast<std::uint64_t>(attempt)});
          },
          prefix);
    }
}

std::size_t gate_session::state::timed_set(std::size_t i) {
  if (const auto known = timed_.find(i); known != timed_.end()) return known->second;
  // A set of its own: the candidate has never been given these inputs, so a
  // kernel that memoises its outputs by their content has nothing to answer
  // from (docs/gate.md, "Round six"). Its kind is drawn as before.
  const distribution d = timed_kind(i);
  const std::size_t s = drawn_.size();
  drawn_.emplace_back();
  hidden_.emplace_back();
  records_.emplace_back();
  kinds_.push_back(d);
  timed_.emplace(i, s);
  draw_distinct(
      s, d,
      [&](std::size_t input, int attempt) {
        return attempt == 0
                   ? key_.derive("timed input", {config_key_, epoch_, i, input})
                   : key_.derive("timed input redrawn", {config_key_, epoch_, i, input,
                                                         static_cast<std::uint64_t>(attempt)});
      },
      d == distribution::shared_prefix);
  return s;
}

bool gate_session::state::perturbable(std::size_t s) const {
  for (const input_tensor& t : drawn_.at(s))  // lazily: most sets differ at once
    for (std::int64_t flat = 1; flat < t.spec().elements(); ++flat)
      if (t.at(flat) != t.at(0)) return true;
  return false;
}

std::size_t gate_session::state::perturbed_set(std::size_t s, std::uint64_t calls) {
  if (calls <= 1) return s;
  const auto key = std::make_pair(s, calls);
  if (const auto known = perturbed_.find(key); known != perturbed_.end()) return known->second;
  // Replay the loop's exchanges on set s's values (docs/gate.md, "Round
  // seven", "Round ten (b)"): the loader made them on its bases before each
  // call after the first, and gave each call its bases turned.
  // The first tracked_calls calls' inputs are hashed (element_hash, summed),
  // so that a loop whose calls come back to inputs an earlier call had (few
  // elements, few values) is told apart from one whose every call is new.
  // Only the first: a loop over A arrangements first repeats after about
  // sqrt(A) calls, so one that repeats often (what a memoiser could use)
  // repeats among them; one whose arrangements are too many for that
  // repeats a call in at most about calls / (2 A) of its calls later on.
  // Tracking every call cost a loop of a 17 ns kernel (1.2 M calls) six
  // times the replay's instructions (benchmarks/README.md, "Carried defects").
  std::vector<std::vector<double>> values;
  std::vector<std::uint64_t> sums;
  for (const input_tensor& t : drawn_.at(s)) {
    values.push_back(t.values());
    std::uint64_t sum = 0;
    for (std::size_t p = 0; p < values.back().size(); ++p) sum += element_hash(p, values.back()[p]);
    sums.push_back(sum);
  }
  const auto state_hash = [&sums] {
    std::uint64_t h = 0;
    for (std::size_t i = 0; i < sums.size(); ++i) h += detail::hash(sums[i], i);
    return h;
  };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seen{{state_hash(), 1}};  // (hash, call)
  loop_rule::walk walk(loop_seed(s), values.size());
  bool changed = false;
  for (std::uint64_t call = 1; call < calls; ++call) {
    bool moved = false;
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::vector<double>& v = values[i];
      const bool tracked = call < tracked_calls;
      std::uint64_t& sum = sums[i];
      if (walk.call(
              i, drawn_[s][i].spec().shape,
              [&v](std::uint64_t x, std::uint64_t y) { return v[x] != v[y]; },
              [&v, &sum, tracked](std::uint64_t a, std::uint64_t b) {
                if (tracked)
                  sum += element_hash(b, v[a]) + element_hash(a, v[b]) - element_hash(a, v[a]) -
                         element_hash(b, v[b]);
                std::swap(v[a], v[b]);
              }) > 0)
        moved = true;
    }
    changed = changed || moved;
    if (moved && call < tracked_calls) seen.emplace_back(state_hash(), call + 1);
  }
  if (!changed) return perturbed_.emplace(key, s).first->second;
  // The last call's turn (docs/gate.md, "Round eleven"): its rows rotated,
  // drawn for that call alone; the hashes above are of the bases.
  for (std::size_t i = 0; i < values.size(); ++i)
    walk.turn_values(calls - 1, i, drawn_[s][i].spec().shape, values[i]);
  std::sort(seen.begin(), seen.end());
  for (std::size_t k = 1; k < seen.size(); ++k)
    if (seen[k].first == seen[k - 1].first)
      throw error(fmt::format(
          "the timing loop on the {} suite gave call {} the inputs of call {} (of {}; the loop "
          "exchanges elements of each input between calls): the spec's inputs, {}, have too "
          "little variety to keep a loop's calls apart (docs/gate.md, \"Distinct sets\")",
          suite_name(s), std::max(seen[k].second, seen[k - 1].second),
          std::min(seen[k].second, seen[k - 1].second), calls, variety_text()));
  const std::size_t d = drawn_.size();
  drawn_.emplace_back();
  hidden_.emplace_back();
  records_.emplace_back();
  kinds_.push_back(kinds_.at(s));
  for (std::size_t i = 0; i < values.size(); ++i) {
    drawn_[d].push_back(drawn_[s][i].with_values(std::move(values[i]), calls));
    hidden_[d].push_back(detail::hidden_access::make(
        std::make_shared<const tensor_spec>(*inputs_[i]), drawn_[d][i]));
  }
  loop_calls_.emplace(d, calls);
  remember_print(d);
  if (const auto twin = same_as(d))
    throw error(fmt::format(
        "the last call of the timing loop on the {} suite was given the inputs of the {} suite: "
        "the spec's inputs, {}, have too little variety to keep a loop's calls apart from the "
        "other sets (docs/gate.md, \"Distinct sets\")",
        suite_name(s), suite_name(*twin), variety_text()));
  return perturbed_.emplace(key, d).first->second;
}

void gate_session::state::draw_calls() {
  // Every set once in a drawn order, then 2..extra_calls repeats: the first
  // right after its set's call (identical calls back to back), the others
  // anywhere after their set's first call.
  rng r(key_.derive("calls", {config_key_, epoch_}));
  calls_.resize(sets());
  std::iota(calls_.begin(), calls_.end(), std::size_t{0});
  for (std::size_t i = calls_.size(); i > 1; --i) std::swap(calls_[i - 1], calls_[r.uniform(i)]);
  const std::size_t extra = 2 + r.uniform(std::max<std::size_t>(options_.extra_calls, 2) - 1);
  for (std::size_t e = 0; e < extra; ++e) {
    const std::size_t s = r.uniform(sets());
    const auto first =
        static_cast<std::size_t>(std::find(calls_.begin(), calls_.end(), s) - calls_.begin());
    const std::size_t at = e == 0 ? first + 1 : first + 1 + r.uniform(calls_.size() - first);
    calls_.insert(calls_.begin() + static_cast<std::ptrdiff_t>(at), s);
  }
}

distribution gate_session::state::timed_kind(std::size_t i) const {
  return options_.suite[derive("timed", i) % sets()];
}

std::string gate_session::state::suite_name(std::size_t s) const {
  if (s < sets()) return fmt::format("'{}'", to_string(options_.suite[s]));
  if (const auto loop = loop_calls_.find(s); loop != loop_calls_.end())
    return fmt::format("'{}' (timed, the call {})", to_string(kinds_.at(s)), loop->second);
  return fmt::format("'{}' (timed)", to_string(kinds_.at(s)));
}

bool gate_session::state::references_fit() const noexcept {
  std::size_t per_set = 0;
  for (const auto& list : where_) per_set += list.size();
  return per_set * sets() <= reference_budget;
}

void gate_session::state::check_shape(const probe_values& values, std::string_view call) const {
  if (values.size() != outputs_.size())
    throw error(
        fmt::format("{} gave {} outputs, expected {}", call, values.size(), outputs_.size()));
  for (std::size_t o = 0; o < outputs_.size(); ++o)
    if (values[o].size() != where_[o].size())
      throw error(fmt::format("{} gave {} values for output {}, expected {} (one per probe)", call,
                              values[o].size(), outputs_[o].name, where_[o].size()));
}

void gate_session::state::ensure_reference(std::size_t s) {
  set_record& rec = records_.at(s);
  if (rec.has_reference) return;
  stage = fmt::format("the spec's reference() on the {} suite", suite_name(s));
  rec.reference = spec_.reference_with_spread(drawn_[s], where_, rec.spread);
  check_shape(rec.reference, "reference()");
  if (!rec.spread.empty()) {
    check_shape(rec.spread, "reference()'s spread");
    for (const auto& list : rec.spread)
      for (const double m : list)
        if (!(m >= 0)) throw error(fmt::format("reference() gave a spread of {}", m));
  }
  for (std::size_t o = 0; o < outputs_.size(); ++o)
    rec.scales.push_back(
        robust_scale(rec.reference[o], max_finite(outputs_[o].type), min_normal(outputs_[o].type)));
  rec.has_reference = true;
}

}  // namespace tessel
