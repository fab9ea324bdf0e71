// tessel/gate.hpp: the equivalence gate. Before a candidate's time counts,
// its outputs are compared with a reference on a hidden suite of inputs
// (several distributions, disguised by a random offset and scale, drawn with
// a keyed hash from a secret the candidate never sees and the config key).
// Every element is held to a bound of its own: the output type's tolerance
// times its reference's magnitude plus a robust scale of the output, so
// zeros, a constant, or a few large outliers cannot buy room. Outputs that
// do not change when the inputs change, calls that disagree with each other,
// NaN/Inf, and times that are not finite or beat the physical floor are
// `suspicious` (docs/gate.md).
//
// Two parties, two interfaces, so a candidate cannot grade itself:
// - a `gate_spec`, owned by the backend (the workload), says what must be
//   computed: the input and output shapes, the reference, the tolerances,
//   which output elements to compare and the work a run must do;
// - a `gated_kernel` is the candidate: it maps hidden inputs to its *whole*
//   outputs and learns nothing else (not the distribution, not the seed,
//   not which elements are compared, not which call is checked). A
//   candidate that runs elsewhere (another process, a device, a timing
//   loop) is judged through a `gate_session`: the gate deals its inputs and
//   calls, the backend makes them, the session judges every output.
// A backend's own model of a schedule (the simulator's functional mode) may
// instead be a `sampled_kernel`, which computes only the compared elements:
// it is trusted like the spec, never user or agent code.
#pragma once

#include <tessel/measurement.hpp>
#include <tessel/random.hpp>
#include <tessel/roofline.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

// --- element types -------------------------------------------------------------

/// What a tensor's elements are stored as. Inputs the gate draws are exactly
/// representable in their type; tolerances follow the output's type.
enum class element_type : unsigned char {
  fp32,
  bf16,
  fp16,
  fp8_e4m3,  ///< the Trainium FP8 format for weights and activations (max 448)
  fp8_e5m2,  ///< FP8 with 5 exponent bits: range over precision, for gradients (max 57344)
  int32,     ///< integer inputs (class labels, indices)
};
[[nodiscard]] std::string_view to_string(element_type t) noexcept;
/// Inverse of to_string ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int32"), also "fp8".
[[nodiscard]] std::optional<element_type> parse_element_type(std::string_view name) noexcept;
/// `x` rounded to nearest-even in `t`, saturating at the type's largest finite
/// value (fp8 e4m3 saturates at ±448; int32 rounds to an integer).
/// NaN and ±inf pass through unchanged (a finite value that overflows
/// saturates; for int32, ±inf saturates too).
[[nodiscard]] double round_to(element_type t, double x) noexcept;
/// The unit roundoff of `t` (2^-24 for fp32, 2^-8 for bf16, 2^-11 for fp16,
/// 2^-4 for fp8 e4m3, 0 for int32).
[[nodiscard]] double unit_roundoff(element_type t) noexcept;
/// The largest finite value of `t` (448 for fp8 e4m3, 65504 for fp16, 2^31 - 1 for int32).
[[nodiscard]] double max_finite(element_type t) noexcept;
/// The smallest positive normal value of `t` (2^-126 for fp32 and bf16, 2^-14
/// for fp16, 2^-6 for fp8 e4m3, 1 for int32).
[[nodiscard]] double min_normal(element_type t) noexcept;
/// The relative tolerance gate_spec::tolerances() gives an output of type
/// `t` whose elements each sum `reduction` terms (0 or 1: not a reduction):
/// max(4 u, 2^-12, 4 x 2^-24 x sqrt(reduction)) with u = unit_roundoff(t),
/// so 2^-6 for bf16, 2^-9 for fp16, 2^-2 for fp8 e4m3 and 2^-12 for fp32
/// up to 2^20 terms of fp32 accumulation, growing as the square root of the
/// reduction beyond; 0 (exact) for int32.
[[nodiscard]] double default_tolerance(element_type t, std::int64_t reduction = 0) noexcept;

// --- inputs ----------------------------------------------------------------------

/// How the hidden suite draws an input's values (before the disguise; see
/// input_tensor).
enum class distribution : unsigned char {
  normal,         ///< N(0, 1)
  uniform,        ///< U(-1, 1)
  large,          ///< N(0, 1) scaled toward the top of the type's range
  tiny,           ///< N(0, 1) scaled toward the bottom of the type's normal range
  constant,       ///< one value everywhere (drawn per suite)
  structured,     ///< smooth ramps and periodic patterns (index-dependent)
  outliers,       ///< N(0, 1) with rare elements a thousand times larger
  shifted,        ///< N(m, 1) with |m| in [1, 3]: far from zero-mean
  positive,       ///< exp(N(0, 1) / 2): all positive, skewed
  sparse,         ///< max(0, N(0, 1)): post-ReLU activations, about half exact zeros
  padded,         ///< N(0, 1), its trailing rows and each row's own runs at both ends exactly zero
  mask,           ///< exactly 0 or 1, each with probability 1/2 (scaled)
  bf16_valued,    ///< N(0, 1) rounded to bf16 first: data that was bf16 upstream
  heavy_tailed,   ///< N(0, 1), one element in 64 scaled by 2^U(4, 16) (less for narrow types)
  shared_prefix,  ///< another input's values on a long prefix (at least 3/4), then fresh ones
  late_terms,     ///< rows of negligible stretches (zeros, tiny, masked logits), terms after them
};
[[nodiscard]] std::string_view to_string(distribution d) noexcept;
/// Every distribution, in declaration order (the default suite).
[[nodiscard]] std::span<const distribution> all_distributions() noexcept;

/// One tensor a kernel reads or writes, row-major.
struct tensor_spec {
  std::string name;                 ///< "A", "x", "labels"
  std::vector<std::int64_t> shape;  ///< outermost first
  element_type type = element_type::fp32;
  /// Integer inputs: values are drawn uniformly from [0, label_range).
  std::int64_t label_range = 0;
  /// Outputs: how many terms each element sums (a matmul's K; 0: not a
  /// reduction). Widens the default tolerance of very long reductions.
  std::int64_t reduction = 0;
  /// Inputs: the magnitude honest values have, which the gate draws every
  /// floating-point distribution at (times its own scale; `tiny` keeps to
  /// the bottom of the type's normal range). A weight that feeds a K-term
  /// sum is about 1/sqrt(K) in an initialised or trained network, so that
  /// sums of its products stay near the magnitude of the activations; drawn
  /// at 1 instead, a chain of them (SwiGLU's x W_gate, h W_down) grows by
  /// sqrt(K) per sum and overflows fp16 (65504) and fp8 (448) where real data
  /// never would (docs/gate.md, "Input magnitudes").
  double scale = 1;
  [[nodiscard]] std::int64_t elements() const noexcept;
};

/// Bytes one element of `t` occupies (4, 2, 2, 1, 4).
[[nodiscard]] std::int64_t bytes_of(element_type t) noexcept;

/// A lazily drawn input tensor: the value at any index is a pure function of
/// (seed, distribution, index), so a reader draws only the elements it needs
/// and no full tensor is ever materialized. Values are exactly representable
/// in the spec's type. Cheap to copy; holds a pointer to `spec`, which must
/// outlive it. docs/gate.md lists how each distribution draws (large and tiny
/// magnitudes per type, the outlier rate). int32 inputs are labels: uniform
/// in [0, label_range) (the constant suite: one label; structured: flat index
/// mod label_range; sparse, padded, mask and late_terms: label 0 where a
/// float input would be 0).
///
/// A `disguised` tensor (what the gate draws) is also scaled by 2^U(-1, 1)
/// and offset by U(-1/2, 1/2) x that scale, both drawn from the seed (large
/// and tiny keep within their range; positive stays positive; the kinds with
/// exact zeros are scaled only), so no distribution has a fixed mean or
/// spread a kernel could recognise.
///
/// A `shared_prefix` tensor takes its values from `base` (another input of
/// the same spec): equal to it on the first 3/4 to 63/64 of the elements
/// (drawn from the seed), and further draws of the base's kind beyond.
/// Without a base it shares with a disguised normal draw of its own.
///
/// This is the spec's and a sampled_kernel's view: it shows kind() and
/// seed(). A candidate sees a hidden_input, which shows neither.
class input_tensor {
 public:
  /// Throws tessel::options_error when an int32 spec has label_range <= 0.
  input_tensor(const tensor_spec& spec, distribution d, std::uint64_t seed, bool disguised = false,
               const input_tensor* base = nullptr);

  [[nodiscard]] const tensor_spec& spec() const noexcept { return *spec_; }
  [[nodiscard]] distribution kind() const noexcept { return kind_; }
  /// The seed the values derive from (a backend may key a cache of
  /// materialized inputs on it; the gate's seeds depend on the config key).
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  /// The element at row-major flat index `flat`.
  [[nodiscard]] double at(std::int64_t flat) const noexcept;
  /// The element at (row, col) of a 2-D tensor (or of the last two
  /// dimensions, batch 0).
  [[nodiscard]] double at(std::int64_t row, std::int64_t col) const noexcept {
    return at(row * spec_->shape.back() + col);
  }
  /// Every element, row-major.
  [[nodiscard]] std::vector<double> values() const;
  /// A copy that holds `values` (row-major, elements() of them, each exact
  /// in the type) instead of its draws, with a seed of its own derived from
  /// `tag` (so a cache keyed on seeds tells it apart): the inputs a timing
  /// loop that changes its inputs between calls gave its last call
  /// (gate_session::perturbed_set). Its kind() stays the draw's.
  [[nodiscard]] input_tensor with_values(std::vector<double> values, std::uint64_t tag) const;

 private:
  friend class hidden_input;
  /// A copy that reads `s` (of the same shape) instead, its base too.
  [[nodiscard]] input_tensor rebound(const tensor_spec& s) const;
  void disguise() noexcept;
  [[nodiscard]] bool zero_at(std::int64_t flat) const noexcept;
  /// late_terms: the element at `flat`, whose own hash is `h`.
  [[nodiscard]] double late_value(std::int64_t flat, std::uint64_t h) const noexcept;
  const tensor_spec* spec_;
  distribution kind_;
  std::uint64_t seed_;
  double scale_ = 1, offset_ = 0;
  std::int64_t zero_rows_ = 0;      ///< padded: the trailing zero rows
  std::uint64_t padding_ = 0;       ///< padded, late_terms: each row's layout derives from it
  std::int64_t prefix_ = 0;         ///< shared_prefix: elements taken from base_
  std::vector<input_tensor> base_;  ///< shared_prefix: what the prefix equals (one)
  std::shared_ptr<const std::vector<double>> values_;  ///< with_values: every element
};

namespace detail {
struct hidden_access;
}

/// What a candidate sees of one hidden input: its spec and its values, not
/// how they were drawn. Made only by the gate; a copy of its own (the spec
/// too), so a candidate that writes through it changes nothing the gate
/// reads. Cheap to copy.
class hidden_input {
 public:
  [[nodiscard]] const tensor_spec& spec() const noexcept { return *spec_; }
  /// The element at row-major flat index `flat`.
  [[nodiscard]] double at(std::int64_t flat) const noexcept { return tensor_.at(flat); }
  /// The element at (row, col) of a 2-D tensor (or of the last two dimensions).
  [[nodiscard]] double at(std::int64_t row, std::int64_t col) const noexcept {
    return tensor_.at(row, col);
  }
  /// Every element, row-major (what a device runner writes to a .npy file).
  [[nodiscard]] std::vector<double> values() const { return tensor_.values(); }

 private:
  friend struct detail::hidden_access;
  hidden_input(std::shared_ptr<const tensor_spec> spec, const input_tensor& t);
  std::shared_ptr<const tensor_spec> spec_;
  input_tensor tensor_;  ///< reads *spec_, not the gate's spec
};

/// The multi-dimensional index of row-major flat index `flat` in `s`.
[[nodiscard]] std::vector<std::int64_t> index_of(const tensor_spec& s, std::int64_t flat);

/// Which output elements the gate compares: flat indices per output.
using probe_points = std::vector<std::vector<std::int64_t>>;
/// Values at the probe points, per output, in the same order.
using probe_values = std::vector<std::vector<double>>;
/// Whole outputs, one row-major array per output (what a candidate returns).
using output_values = std::vector<std::vector<double>>;

// --- what a backend supplies: the spec --------------------------------------------

/// What one config must compute, as the backend (the workload) knows it. The
/// gate reads shapes, tolerances, probes, the reference and the work a run
/// must do from here and never from the candidate. Implementations must be
/// thread-safe for concurrent const calls.
class gate_spec {
 public:
  virtual ~gate_spec() = default;

  [[nodiscard]] virtual std::vector<tensor_spec> inputs() const = 0;
  [[nodiscard]] virtual std::vector<tensor_spec> outputs() const = 0;

  /// The reference outputs at `where`, computed in fp64 on `in`.
  [[nodiscard]] virtual probe_values reference(std::span<const input_tensor> in,
                                               const probe_points& where) const = 0;

  /// reference(), and in `spread` (one list per output, like the values, or
  /// empty: none) per compared element the root sum of squares of the terms
  /// its last sum adds, sqrt(sum_i t_i^2), when a correct schedule may store
  /// those terms (or a factor of each) rounded to the output's type: an MLP's
  /// h = silu(x W_gate) * (x W_up) in bf16 before y = h W_down. Storing t_i
  /// with relative error u moves the element by up to u x |t_i|, which a
  /// few large terms (heavy-tailed inputs) can make far more than u x
  /// (|reference| + scale) where the sum cancels; the gate widens the
  /// element's bound by tol x spread. An infinite spread says that an
  /// intermediate the schedule stores lies beyond the type's range on these
  /// inputs (fp16 saturates at 65504), so no bound holds: the element is not
  /// judged, but for NaN/Inf. The default: reference() and no spread
  /// (the output is rounded once, from fp32 or wider sums).
  [[nodiscard]] virtual probe_values reference_with_spread(std::span<const input_tensor> in,
                                                           const probe_points& where,
                                                           probe_values& spread) const {
    spread.clear();
    return reference(in, where);
  }

  /// The output elements to compare, one list per output (in outputs()
  /// order), each index in [0, elements()). The gate draws them once per
  /// check from the secret. The default compares every element of an output
  /// with at most `whole_output_limit` elements (every shipped workload's);
  /// a larger one is seen as rows x columns (columns: the last dimension)
  /// and compared on random tiles of 64 x 64 (about `sample_size` elements
  /// in all; the first and the last tile always), plus one random column of
  /// every row and its last column (sorted, unique). Specs override it to
  /// follow their schedule's tiles.
  [[nodiscard]] virtual probe_points probes(rng& r) const;

  /// Per output: the relative tolerance (default: default_tolerance() of the
  /// output's element type and reduction; 0 means exact). The gate
  /// multiplies it by gate_options::tolerance_scale and passes an element
  /// when |cand - ref| <= tol x (|ref| + scale), scale being the median
  /// magnitude of that output's nonzero reference elements on that input set
  /// (docs/gate.md), plus tol x the element's spread where reference() gives
  /// one. Specs of schedules that accumulate in low precision widen it.
  [[nodiscard]] virtual std::vector<double> tolerances() const;

  /// A time in seconds no correct run can beat (the roofline bound), or 0
  /// when unknown. The gate also applies the machine's floor (flops(),
  /// min_bytes() and gate_options::machine).
  [[nodiscard]] virtual double roofline_s() const { return 0; }
  /// The FLOPs a correct run performs (0: unknown).
  [[nodiscard]] virtual double flops() const { return 0; }
  /// The bytes a correct run must move at least. The default: every input
  /// read once and every output written once, at their declared types. A
  /// spec whose runs need not read all of an input (a gather, routing to
  /// some experts) overrides it.
  [[nodiscard]] virtual double min_bytes() const;

  /// Outputs of at most this many elements are compared whole.
  static constexpr std::int64_t whole_output_limit = std::int64_t{1} << 22;
  /// About how many elements the default probes() compares of a larger output.
  static constexpr std::int64_t sample_size = std::int64_t{1} << 20;
};

// --- what a candidate supplies ------------------------------------------------------

/// One config's kernel: the candidate. It maps the hidden inputs (one per
/// spec input, in order) to its whole outputs: one row-major array per spec
/// output, each of exactly elements() values. It is told nothing else.
/// Implementations must be thread-safe for concurrent const calls.
class gated_kernel {
 public:
  virtual ~gated_kernel() = default;
  [[nodiscard]] virtual output_values run(std::span<const hidden_input> in) const = 0;
};

/// A backend's own executor of a schedule that computes only the elements
/// the gate compares (the simulator's functional mode: full outputs of a
/// 4096^3 matmul would take minutes). Trusted like the spec: it sees the
/// probes, so it must never wrap user or agent code.
class sampled_kernel {
 public:
  virtual ~sampled_kernel() = default;
  /// The outputs at `where`, computed on `in` the way the config's schedule
  /// computes them (tiling, rounding, accumulation order).
  [[nodiscard]] virtual probe_values run(std::span<const input_tensor> in,
                                         const probe_points& where) const = 0;
};

// --- the gate -----------------------------------------------------------------------

struct gate_options {
  /// The input distributions of the hidden suite, one input set each.
  std::vector<distribution> suite{all_distributions().begin(), all_distributions().end()};
  /// The hidden seed. 0 (default): a 256-bit key drawn from the system's
  /// CSPRNG (through OpenSSL) when the gate is made, held in its memory and
  /// never stored or shown, so a study resumed in another process draws
  /// another. Tests set it: the key is then SHA-256 of it. Every seed (of an
  /// input set, the probes, a check's calls) is HMAC-SHA256 under the key of
  /// the config key, the check's number for that key and what it seeds.
  std::uint64_t secret = 0;
  /// Multiplies every spec tolerance (> 0).
  double tolerance_scale = 1.0;
  /// A check calls the candidate once per suite and then `extra_calls` more
  /// times, the count drawn per check in [2, extra_calls] (>= 2): repeats of
  /// random input sets, one at least back to back with the same set's call,
  /// in an order drawn per check. Every call's outputs are judged.
  std::size_t extra_calls = 6;
  /// Require calls on the same input set to agree within the tolerance (a
  /// split-K kernel may differ in the last bits).
  bool check_determinism = true;
  /// With check_determinism: require bit-identical calls instead.
  bool bitwise_determinism = false;
  /// Require outputs to change when the inputs change (across suites).
  bool check_sensitivity = true;
  /// The chance, in [0, 1], that check() of a key it has a verdict for checks
  /// again on fresh inputs instead of answering from the cache (drawn from
  /// the secret, so a candidate cannot tell which); a failure replaces the
  /// cached verdict.
  double recheck_rate = 0.125;
  /// In a timing loop (gate_session::spot_check): about one timed call in
  /// this many has its outputs judged (>= 1), and always the first and last.
  std::size_t spot_check_every = 8;
  /// A time below (1 - roofline_slack) x the bound is suspicious.
  double roofline_slack = 0.02;
  /// Add the check's measured wall seconds to the measurement's cost.gate_s.
  /// Off by default: the seconds are measured at run time, so a cost model
  /// fed them would make the same seed give different trials
  /// (docs/scheduler.md, "Reproducible by default"). They are always kept as
  /// the metric "gate_wall_s"; turn this on where the gate's time is a real
  /// cost worth trading against (a slow reference on real hardware).
  bool charge_wall_time = false;
  /// The machine no correct run can beat (roofline.hpp): backends set it
  /// from their target (peaks_of) or the host (host_peaks). Unknown by default.
  machine_peaks machine{};
  /// The last-resort data-movement floor, whatever the machine: no run moves
  /// the spec's min_bytes() faster than this many bytes per second (HBM3e
  /// peaks near 5e12). 0 turns it off.
  double max_bytes_per_s = 1e14;
  /// Throws tessel::options_error naming the first bad field.
  void validate() const;
};

/// The gate's judgement of one config.
struct verdict {
  tessel::status status = tessel::status::ok;  ///< ok, incorrect, suspicious or runtime_error
  std::string message;   ///< what failed where: output, element, suite, call, values
  double seconds = 0;    ///< wall seconds the check took (0 when cached)
  double max_error = 0;  ///< largest error seen, in units of the element's bound
  int suites = 0;        ///< input sets judged
  int calls = 0;         ///< candidate calls judged
  bool cached = false;   ///< answered from the cache
  [[nodiscard]] bool ok() const noexcept { return status == tessel::status::ok; }
};

class gate_session;

class gate {
 public:
  explicit gate(gate_options o = {});
  ~gate();
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  /// Checks `candidate` against `spec` (the config whose key is
  /// `config_key`), or answers from the cache (re-checking now and then:
  /// recheck_rate). Thread-safe (two threads checking one new key may both
  /// compute; a failing verdict wins). A check reads the spec's
  /// declarations and computes the reference of every input set before the
  /// candidate's first call (when they fit in 2^25 values; else each set's
  /// just before that set's first call), then makes the session's calls()
  /// in order, judging every one (gate_session::judge), then finish(); a
  /// spec whose declarations changed while the candidate ran is suspicious.
  /// An exception thrown by the candidate or the spec becomes a
  /// runtime_error verdict naming the call. Every verdict is cached.
  [[nodiscard]] verdict check(const gate_spec& spec, const gated_kernel& candidate,
                              std::uint64_t config_key);
  /// The same rules for a backend's trusted executor, which computes only
  /// the probed elements (non-finite values are seen at the probes only).
  /// Its inputs are drawn undisguised: it sees each input's kind and seed
  /// anyway, and the disguise's offsets would only make long reductions
  /// that feed exp() (SwiGLU's gate) worse conditioned than real data. It
  /// is called once per set and once more on the set the calls repeat
  /// first; its verdicts are never re-checked (it is deterministic and
  /// trusted).
  [[nodiscard]] verdict check(const gate_spec& spec, const sampled_kernel& executor,
                              std::uint64_t config_key);

  /// A session for a candidate that runs outside the gate's control: the
  /// hidden input sets of a fresh check of `config_key` (each session of a
  /// key draws new ones), the calls to make, and judging their outputs.
  /// Nothing is cached. `spec` must outlive the session. Throws what the
  /// spec throws, or tessel::error when it answers badly.
  [[nodiscard]] gate_session session(const gate_spec& spec, std::uint64_t config_key);

  /// "suspicious" with a message when `objective_s` is not finite, not
  /// positive, or below `bound_s` by more than the slack; nullopt otherwise
  /// (the bound is ignored when it is not positive and finite).
  [[nodiscard]] std::optional<verdict> check_time(double objective_s, double bound_s) const;

  /// The time bound of `spec`: the largest of its roofline_s(), the
  /// machine's floor for its flops() and min_bytes(), and min_bytes() /
  /// max_bytes_per_s.
  [[nodiscard]] double time_bound(const gate_spec& spec) const;

  /// Applies the gate to a measurement a backend produced: when `m` is ok,
  /// checks the candidate (recording the gate's wall seconds as the metric
  /// "gate_wall_s", added to m.cost.gate_s only with
  /// gate_options::charge_wall_time, and its max_error as the metric
  /// "gate_max_error") and, when the verdict fails, turns `m` into that
  /// failure (status and message; objective, samples and metrics are kept);
  /// then applies check_time to m.objective and to every sample (seconds)
  /// with the larger of time_bound(spec) and the metric "roofline_s" when
  /// present. A measurement that is not ok is left alone.
  void apply(measurement& m, const gate_spec& spec, const gated_kernel& candidate,
             std::uint64_t config_key);
  void apply(measurement& m, const gate_spec& spec, const sampled_kernel& executor,
             std::uint64_t config_key);
  /// The time check alone, for a backend with nothing to execute: bound_s
  /// (or the metric "roofline_s", the larger) when known; the objective and
  /// every sample must be finite, positive and not below it.
  void apply_time(measurement& m, double bound_s = 0) const;
  /// apply_time with time_bound(spec).
  void apply_time(measurement& m, const gate_spec& spec) const;
  /// Turns an ok `m` into the failure `v` (status and message), recording
  /// its seconds and max_error as apply() does; then apply_time(m, spec).
  void apply_verdict(measurement& m, const gate_spec& spec, const verdict& v) const;

  [[nodiscard]] const gate_options& options() const noexcept;
  /// Verdicts cached so far.
  [[nodiscard]] std::size_t cached() const;

 private:
  friend class gate_session;
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// One check of a candidate that runs outside the gate's control: a device
/// runner, another process, the backend's own timing loop. The session
/// draws the hidden input sets (one per suite entry) and the calls a check
/// makes; the backend makes them (any number, in any order) and hands every
/// output to judge(); finish() gives the verdict. Calls a candidate cannot
/// tell apart: every set is drawn alike, every call looks the same, any may
/// be judged. Not thread-safe; one session per evaluation.
class gate_session {
 public:
  gate_session(gate_session&&) noexcept;
  gate_session& operator=(gate_session&&) noexcept;
  ~gate_session();

  /// The number of the check's input sets (one per suite entry: sets 0 to
  /// sets() - 1); timed sets are numbered after them.
  [[nodiscard]] std::size_t sets() const noexcept;
  /// The inputs of set `s` (a check's, or one timed_set() gave) as the
  /// candidate sees them (one per spec input).
  [[nodiscard]] const std::vector<hidden_input>& inputs(std::size_t s) const;
  /// The calls a check makes, in order: the input set of each. Every set
  /// once, then gate_options::extra_calls' repeats, in an order drawn from
  /// the secret (number and order vary per session).
  [[nodiscard]] const std::vector<std::size_t>& calls() const noexcept;
  /// For a timing loop: the input set of timed call `i`, a set of its own
  /// (numbered from sets() on, the same for the same `i`): drawn for that
  /// call from the secret, of a suite distribution the secret picks, never
  /// one the candidate has been given before, so a kernel that memoises its
  /// outputs by the inputs' content cannot answer a timed call from its
  /// cache. Judging it (spot_check) computes its reference then. Throws
  /// tessel::error when the spec's inputs have too little variety to give
  /// it inputs no earlier set had (docs/gate.md, "Distinct sets").
  [[nodiscard]] std::size_t timed_set(std::size_t i) const;
  /// Whether timed call `i` of a loop of `count` must be judged: the first,
  /// the last, every one whose set shares content by construction with a
  /// set the candidate has seen (shared_prefix and padded sets: what a
  /// cache keyed by part of the inputs answers stale), and about one in
  /// spot_check_every of the others (drawn from the secret, so a candidate
  /// cannot tell which).
  [[nodiscard]] bool spot_check(std::size_t i, std::size_t count) const;
  /// For a timing loop that changes its inputs between calls by the rule of
  /// tessel/loop_rule.hpp (the cpu loader's, docs/gate.md "Round seven"):
  /// the rule's seed for a loop on set `s`, drawn from the secret.
  [[nodiscard]] std::uint64_t loop_seed(std::size_t s) const;
  /// The seed such a loop on set `s` draws its judged call from (one of its
  /// samples' calls, judged besides the last: docs/cpu.md), drawn from the
  /// secret apart from loop_seed(s), which the candidate's process holds.
  [[nodiscard]] std::uint64_t judged_call_seed(std::size_t s) const;
  /// Whether the rule changes set `s`'s inputs: some input holds two
  /// different values (a `constant` set does not).
  [[nodiscard]] bool perturbable(std::size_t s) const;
  /// The set of the inputs of the last call of such a loop on set `s` that
  /// made `calls` calls: set s's inputs after calls - 1 steps of the rule
  /// seeded with loop_seed(s) (set s itself when calls <= 1 or the rule
  /// changes nothing). A derived set is numbered after the sets drawn so
  /// far, the same for the same (s, calls); judging it computes its
  /// reference then, and every rule applies to it as to a timed set.
  /// Throws tessel::error when a call of the loop had the inputs of an
  /// earlier call, or the last call's inputs are another set's (too little
  /// variety: docs/gate.md, "Distinct sets").
  [[nodiscard]] std::size_t perturbed_set(std::size_t s, std::uint64_t calls);

  /// Whether a call on set `s` has been judged. A backend that judges
  /// every call it makes on a check's set counts only the set's first call
  /// as time: a later one (a repeat for the determinism rule) could be
  /// answered from a cache of outputs keyed by the inputs' content.
  [[nodiscard]] bool judged_on(std::size_t s) const;

  /// Judges the whole outputs of one call on set `s`, a check's set or a
  /// timed one (the set's reference is computed at its first judgement). Returns a failing verdict
  /// at once for outputs of the wrong shape (runtime_error), NaN/Inf where the reference is finite,
  /// or a call that disagrees with an earlier call on the same set beyond the tolerance
  /// (suspicious); an element beyond its bound is kept for finish().
  std::optional<verdict> judge(std::size_t s, const output_values& outputs);
  /// Computes the reference of every check's set now (gate::check does,
  /// before the candidate's first call); throws what the spec throws.
  void prepare_references();
  /// The verdict over every call judged: the first failure judge() returned,
  /// else insensitivity across sets, else the worst element beyond its bound
  /// (incorrect), else ok. A session with no call judged is a runtime_error.
  [[nodiscard]] verdict finish();

 private:
  friend class gate;
  struct state;
  explicit gate_session(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

}  // namespace tessel
