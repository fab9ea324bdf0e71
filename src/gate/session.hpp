// gate/session.hpp: the state of one check (gate_session::state). It reads
// the spec's declarations once, draws the input sets and the calls from the
// gate's key, and applies the rules to every call it is shown. gate.cpp
// drives it for in-process candidates and trusted executors; a backend
// drives it through gate_session.
#pragma once

#include "gate/keyed.hpp"

#include <tessel/gate.hpp>

#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

namespace detail {
struct hidden_access {
  static hidden_input make(std::shared_ptr<const tensor_spec> spec, const input_tensor& t) {
    return {std::move(spec), t};
  }
};
}  // namespace detail

struct gate_session::state {
  /// `disguise`: draw the inputs disguised (for a candidate; a trusted
  /// sampled executor sees each input's kind and seed anyway).
  state(const gate_spec& spec, const gate_options& options, const detail::gate_key& key,
        std::uint64_t config_key, std::uint64_t epoch, bool disguise);
  /// Reads the spec and draws the sets and the calls. Throws what the spec
  /// throws (`stage` names the call), or tessel::error when it answers badly.
  void prepare();

  /// What the check was doing when something threw.
  std::string stage;

  /// The check's sets (one per suite entry); timed sets follow them.
  [[nodiscard]] std::size_t sets() const noexcept { return options_.suite.size(); }
  /// Every set drawn so far: the check's, then the timed calls'.
  [[nodiscard]] std::size_t all_sets() const noexcept { return drawn_.size(); }
  /// The set of timed call `i`: drawn on first use for that call alone, of a
  /// suite distribution picked by the secret, from seeds no other set uses
  /// (a shared_prefix one extends the check's base set, which the candidate
  /// has seen). The same index for the same `i`.
  std::size_t timed_set(std::size_t i);
  /// The distribution of timed call `i`'s set (drawn from the secret).
  [[nodiscard]] distribution timed_kind(std::size_t i) const;
  /// Whether timed call `i`'s set shares content, by construction, with a
  /// set the candidate has been given: a shared_prefix set shares its
  /// prefix with the check's base set (and its tail with the check's
  /// shared_prefix set); a padded set's last rows, and the ends of its
  /// rows, are zero like the check's padded set's; a late_terms set's zero
  /// stretches are zero like theirs.
  [[nodiscard]] bool timed_shares_seen(std::size_t i) const {
    const distribution d = timed_kind(i);
    return d == distribution::shared_prefix || d == distribution::padded ||
           d == distribution::late_terms;
  }
  /// The rule's seed for a timing loop on set `s` (tessel/loop_rule.hpp).
  [[nodiscard]] std::uint64_t loop_seed(std::size_t s) const { return derive("loop", s); }
  /// Whether some input of set `s` holds two different values.
  [[nodiscard]] bool perturbable(std::size_t s) const;
  /// The inputs of the last of `calls` calls of a loop on set `s` that
  /// changes them by the rule (gate_session::perturbed_set): a set derived
  /// from s on first use (s itself when nothing changed), the same for the
  /// same (s, calls).
  std::size_t perturbed_set(std::size_t s, std::uint64_t calls);
  [[nodiscard]] const std::vector<input_tensor>& drawn(std::size_t s) const { return drawn_.at(s); }
  [[nodiscard]] const std::vector<hidden_input>& hidden(std::size_t s) const {
    return hidden_.at(s);
  }
  [[nodiscard]] const std::vector<std::size_t>& calls() const noexcept { return calls_; }
  /// The calls judged on set `s` so far (0 for a set not drawn yet).
  [[nodiscard]] int calls_on(std::size_t s) const noexcept {
    return s < records_.size() ? records_[s].calls : 0;
  }
  [[nodiscard]] const probe_points& where() const noexcept { return where_; }
  [[nodiscard]] std::uint64_t derive(std::string_view purpose, std::uint64_t index) const {
    return key_.derive(purpose, {config_key_, epoch_, index});
  }
  [[nodiscard]] std::string suite_name(std::size_t s) const;
  [[nodiscard]] std::uint64_t spot_check_every() const noexcept {
    return options_.spot_check_every;
  }

  /// Whether every set's reference fits in the budget computed up front.
  [[nodiscard]] bool references_fit() const noexcept;
  /// Computes set s's reference when it has none yet; throws what the spec throws.
  void ensure_reference(std::size_t s);

  /// Judges one call's whole outputs on set s (shape, then the rules at the
  /// probes, then non-finite elements off them). Spec failures become a
  /// runtime_error verdict. The first failure is kept and returned again.
  std::optional<verdict> judge_whole(std::size_t s, const output_values& whole);
  /// Judges one call's values at the probes (a trusted executor's).
  std::optional<verdict> judge_probes(std::size_t s, const probe_values& at);
  /// A failure from outside the rules (the candidate threw): kept as the verdict.
  verdict fail(verdict v);
  /// fail() with runtime_error: the candidate threw `e` in the current stage.
  verdict failed_in_stage(const std::exception& e);
  /// The spec's declarations read again, when they differ from the first reading.
  [[nodiscard]] std::optional<verdict> spec_changed() const;
  [[nodiscard]] verdict finish() const;

 private:
  struct worst_element {
    double error = 0;
    std::size_t output = 0, position = 0;
    int call = 0;
    double candidate = 0, reference = 0, scale = 0, tolerance = 0, allowance = 0;
    std::size_t failing = 0;  ///< elements over their bound in that call and output
  };
  /// What the rules keep of one input set.
  struct set_record {
    bool has_reference = false;
    probe_values reference;      ///< at the probes
    std::vector<double> scales;  ///< per output: the median nonzero |reference|
    probe_values spread;         ///< per output: the spec's spread at the probes (empty: none)
    int calls = 0;               ///< judged so far
    probe_values first;          ///< the first call at determinism_ positions
    std::vector<std::uint64_t> first_bits;  ///< per output: a hash of the first call's bits
    std::vector<double> first_value;        ///< per output: the first call's first probed value
    std::vector<bool> uniform;              ///< per output: the first call is one value everywhere
    worst_element worst;
  };

  void read_spec();
  void draw_sets();
  /// Draws the inputs of set `s` (kind `d`, input i from seed_of(i)); a
  /// shared_prefix set extends the base set when `extends_base`.
  template <class Seed>
  void draw_set(std::size_t s, distribution d, Seed&& seed_of, bool extends_base);
  /// draw_set, drawn again until set s equals no other set drawn (docs/gate.md,
  /// "Distinct sets"): `seed_of(i, attempt)` seeds input i of each attempt
  /// (attempt 0: the usual draw); after kind_redraws attempts of kind `d`,
  /// the widest kind (normal). Throws tessel::error when every attempt
  /// repeats a set: the spec's inputs have too little variety.
  template <class Seed>
  void draw_distinct(std::size_t s, distribution d, Seed&& seed_of, bool extends_base);
  /// A set drawn before, other than s, whose inputs hold the values of set
  /// s's at every element (values, so 0 and -0 are alike); none when the
  /// spec has no inputs (nothing tells its sets apart).
  [[nodiscard]] std::optional<std::size_t> same_as(std::size_t s) const;
  /// Keeps set s's fingerprint (prints_), once its inputs are drawn.
  void remember_print(std::size_t s);
  /// The spec's inputs and how many distinct sets they allow at most, for a
  /// diagnostic: "x (int32, 4 elements in [0, 2)): at most 16 distinct sets".
  [[nodiscard]] std::string variety_text() const;
  void draw_calls();
  std::optional<verdict> judge(std::size_t s, const probe_values& at);
  std::optional<verdict> strays(std::size_t s, const probe_points& stray);
  std::optional<verdict> repeated(std::size_t s, const probe_values& at) const;
  void remember_first(std::size_t s, const probe_values& at);
  std::optional<verdict> non_finite_at(std::size_t s, std::size_t o, std::int64_t flat, double c,
                                       double r) const;
  [[nodiscard]] std::optional<verdict> insensitive() const;
  [[nodiscard]] std::string incorrect_message() const;
  void check_shape(const probe_values& values, std::string_view call) const;
  /// What the bound of element p of output o on set s adds to |reference|:
  /// the output's scale plus the element's spread.
  [[nodiscard]] double allowance(const set_record& rec, std::size_t o, std::size_t p) const;

  const gate_spec& spec_;
  const gate_options& options_;
  const detail::gate_key& key_;
  std::uint64_t config_key_, epoch_;
  bool disguise_;
  std::vector<std::shared_ptr<const tensor_spec>> inputs_;
  std::vector<tensor_spec> outputs_;
  std::vector<double> declared_tolerances_, tolerances_;
  probe_points where_;
  std::vector<std::vector<std::size_t>> determinism_;  ///< per output: positions in where_
  // Deques: a timed set appended later leaves earlier sets' references valid.
  std::deque<std::vector<input_tensor>> drawn_;
  std::deque<std::vector<hidden_input>> hidden_;
  std::deque<set_record> records_;
  std::vector<distribution> kinds_;           ///< per set drawn
  std::vector<std::uint64_t> prints_;         ///< per set drawn: its inputs' fingerprint
  std::optional<std::size_t> base_;           ///< the set shared_prefix sets extend
  std::map<std::size_t, std::size_t> timed_;  ///< timed call -> its set
  /// (set, calls) -> the set of a loop's last call (perturbed_set)
  std::map<std::pair<std::size_t, std::uint64_t>, std::size_t> perturbed_;
  std::map<std::size_t, std::uint64_t> loop_calls_;  ///< derived set -> its call k of the loop
  std::vector<std::size_t> calls_;
  std::optional<verdict> failure_;
  int judged_ = 0;
};

}  // namespace tessel
