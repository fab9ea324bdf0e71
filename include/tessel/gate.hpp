// tessel/gate.hpp: the equivalence gate. Before a candidate's time counts,
// its outputs are compared with a reference on a hidden suite of inputs
// (several distributions, disguised by a random offset and scale, drawn from
// a secret and the config key the candidate never sees). Tolerances scale
// with the reference's magnitude and the output's element type, so zeros or
// a constant cannot pass. Outputs that do not change when the inputs change,
// runs that do not repeat within the tolerance, NaN/Inf, and times that are
// not finite or beat the roofline bound are `suspicious`. Verdicts are cached
// per config key (docs/gate.md).
//
// Two parties, two interfaces, so a candidate cannot grade itself:
// - a `gate_spec`, owned by the backend (the workload), says what must be
//   computed: the input and output shapes, the reference, the tolerances and
//   which output elements to compare;
// - a `gated_kernel` is the candidate: it maps hidden inputs to its *whole*
//   outputs and learns nothing else (not the distribution, not the seed,
//   not which elements are compared). Arrays a device runner returns are
//   judged the same way (gate::hidden_inputs, gate::check_outputs).
// A backend's own model of a schedule (the simulator's functional mode) may
// instead be a `sampled_kernel`, which computes only the compared elements:
// it is trusted like the spec, never user or agent code.
#pragma once

#include <tessel/measurement.hpp>
#include <tessel/random.hpp>

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
  int32,     ///< integer inputs (class labels, indices)
};
[[nodiscard]] std::string_view to_string(element_type t) noexcept;
/// Inverse of to_string ("fp32", "bf16", "fp16", "fp8_e4m3", "int32"), also "fp8".
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
/// `t`: max(4 u, 2^-12) with u = unit_roundoff(t), so 2^-6 for bf16, 2^-9 for
/// fp16, 2^-2 for fp8 e4m3 and 2^-12 for fp32 (the floor covers fp32
/// accumulation over reductions of up to ~10^6 terms); 0 (exact) for int32.
[[nodiscard]] double default_tolerance(element_type t) noexcept;

// --- inputs ----------------------------------------------------------------------

/// How the hidden suite draws an input's values (before the disguise; see
/// input_tensor).
enum class distribution : unsigned char {
  normal,      ///< N(0, 1)
  uniform,     ///< U(-1, 1)
  large,       ///< N(0, 1) scaled toward the top of the type's range
  tiny,        ///< N(0, 1) scaled toward the bottom of the type's normal range
  constant,    ///< one value everywhere (drawn per suite)
  structured,  ///< smooth ramps and periodic patterns (index-dependent)
  outliers,    ///< N(0, 1) with rare elements a thousand times larger
  shifted,     ///< N(m, 1) with |m| in [1, 3]: far from zero-mean
  positive,    ///< exp(N(0, 1) / 2): all positive, skewed
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
/// mod label_range).
///
/// A `disguised` tensor (what the gate draws) is also scaled by 2^U(-1, 1)
/// and offset by U(-1/2, 1/2) x that scale, both drawn from the seed (large
/// and tiny keep within their range; positive stays positive), so no
/// distribution has a fixed mean or spread a kernel could recognise.
///
/// This is the spec's and a sampled_kernel's view: it shows kind() and
/// seed(). A candidate sees a hidden_input, which shows neither.
class input_tensor {
 public:
  /// Throws tessel::options_error when an int32 spec has label_range <= 0.
  input_tensor(const tensor_spec& spec, distribution d, std::uint64_t seed, bool disguised = false);

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

 private:
  void disguise() noexcept;
  const tensor_spec* spec_;
  distribution kind_;
  std::uint64_t seed_;
  double scale_ = 1, offset_ = 0;
};

namespace detail {
struct hidden_access;
}

/// What a candidate sees of one hidden input: its spec and its values, not
/// how they were drawn. Made only by the gate. Cheap to copy; owns its spec.
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
  [[nodiscard]] std::vector<double> values() const;

 private:
  friend struct detail::hidden_access;
  hidden_input(std::shared_ptr<const tensor_spec> spec, const input_tensor& t)
      : spec_(std::move(spec)), tensor_(t) {}
  std::shared_ptr<const tensor_spec> spec_;
  input_tensor tensor_;
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
/// gate reads shapes, tolerances, probes, the reference and the time bound
/// from here and never from the candidate. Implementations must be
/// thread-safe for concurrent const calls.
class gate_spec {
 public:
  virtual ~gate_spec() = default;

  [[nodiscard]] virtual std::vector<tensor_spec> inputs() const = 0;
  [[nodiscard]] virtual std::vector<tensor_spec> outputs() const = 0;

  /// The reference outputs at `where`, computed in fp64 on `in`.
  [[nodiscard]] virtual probe_values reference(std::span<const input_tensor> in,
                                               const probe_points& where) const = 0;

  /// The output elements to compare, one list per output (in outputs()
  /// order), each index in [0, elements()). The gate draws them once per
  /// check, after the candidate ran. The default compares every element of
  /// an output with at most `whole_output_limit` elements; a larger one is
  /// seen as rows x columns (columns: the last dimension) and every row is
  /// probed (its first and last column and random ones, about
  /// `sample_size` / rows per row, at least two) and a few whole rows (the
  /// first, the last and random ones, about `sample_size` / columns), so one
  /// wrong row or column is always caught (sorted, unique). Specs override
  /// it to follow their schedule's tiles.
  [[nodiscard]] virtual probe_points probes(rng& r) const;

  /// Per output: the relative tolerance (default: default_tolerance() of the
  /// output's element type; 0 means exact). The gate multiplies it by
  /// gate_options::tolerance_scale and passes an element when
  /// |cand - ref| <= tol x (|ref| + rms), rms being the root mean square of
  /// the reference over that output's probes (docs/gate.md). Specs of
  /// schedules that accumulate in low precision widen it.
  [[nodiscard]] virtual std::vector<double> tolerances() const;

  /// A time in seconds no correct run can beat (the roofline bound), or 0
  /// when unknown. The gate also applies its own data-movement floor.
  [[nodiscard]] virtual double roofline_s() const { return 0; }

  static constexpr std::int64_t whole_output_limit = 1 << 16;
  /// About how many elements the default probes() compares per pass (rows,
  /// whole rows) of a larger output.
  static constexpr std::int64_t sample_size = 1 << 12;
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
  /// The hidden seed. 0 (default): drawn from std::random_device when the
  /// gate is made, so a candidate cannot predict its inputs. Tests set it.
  /// A check of config key k draws suite s's input i with seed
  /// hash(hash(hash(secret, k), s), i), disguised, and the probes from
  /// hash(hash(secret, k), ~0): every config sees its own inputs.
  std::uint64_t secret = 0;
  /// Multiplies every spec tolerance (> 0).
  double tolerance_scale = 1.0;
  /// Run the first suite twice and require the two runs to agree within
  /// the tolerance (a split-K kernel may differ in the last bits).
  bool check_determinism = true;
  /// With check_determinism: require bit-identical runs instead.
  bool bitwise_determinism = false;
  /// Require outputs to change when the inputs change (across suites).
  bool check_sensitivity = true;
  /// A time below (1 - roofline_slack) x the bound is suspicious.
  double roofline_slack = 0.02;
  /// Add the check's measured wall seconds to the measurement's cost.gate_s.
  /// Off by default: the seconds are measured at run time, so a cost model
  /// fed them would make the same seed give different trials
  /// (docs/scheduler.md, "Reproducible by default"). They are always kept as
  /// the metric "gate_wall_s"; turn this on where the gate's time is a real
  /// cost worth trading against (a slow reference on real hardware).
  bool charge_wall_time = false;
  /// The data-movement floor of gate::apply: no run moves the spec's inputs
  /// and outputs (each once) faster than this many bytes per second (HBM3e
  /// peaks near 5e12). 0 turns the floor off.
  double max_bytes_per_s = 1e14;
  /// Throws tessel::options_error naming the first bad field.
  void validate() const;
};

/// The gate's judgement of one config.
struct verdict {
  tessel::status status = tessel::status::ok;  ///< ok, incorrect, suspicious or runtime_error
  std::string message;   ///< what failed where: output, element, suite, values
  double seconds = 0;    ///< wall seconds the check took (0 when cached)
  double max_error = 0;  ///< largest error seen, in units of the tolerance
  int suites = 0;        ///< input sets run
  bool cached = false;   ///< answered from the cache
  [[nodiscard]] bool ok() const noexcept { return status == tessel::status::ok; }
};

class gate {
 public:
  explicit gate(gate_options o = {});
  ~gate();
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  /// Checks `candidate` against `spec` (the config whose key is
  /// `config_key`), or answers from the cache. Thread-safe (two threads
  /// checking one new key may both compute; the first verdict is kept). Per
  /// suite, in order: draw the hidden inputs, run() the candidate, check the
  /// shape of what it returned, then draw the probes' reference; a NaN/Inf
  /// anywhere in the candidate's output where the reference is finite is
  /// suspicious, and on the first suite a second run() that differs by more
  /// than the tolerance (any bit, with bitwise_determinism) is suspicious.
  /// After every suite: an output bit-identical on two suites whose
  /// references (rounded to the output type) differ is suspicious; else an
  /// element with |cand - ref| > tol x (|ref| + rms) makes the verdict
  /// incorrect, reporting the worst one. An exception thrown by the
  /// candidate or the spec, or outputs of the wrong shape, become a
  /// runtime_error verdict naming the call. Every verdict is cached.
  [[nodiscard]] verdict check(const gate_spec& spec, const gated_kernel& candidate,
                              std::uint64_t config_key);
  /// The same rules for a backend's trusted executor, which computes only
  /// the probed elements (non-finite values are seen at the probes only).
  /// Its inputs are drawn undisguised: it sees each input's kind and seed
  /// anyway, and the disguise's offsets would only make long reductions
  /// that feed exp() (SwiGLU's gate) worse conditioned than real data.
  [[nodiscard]] verdict check(const gate_spec& spec, const sampled_kernel& executor,
                              std::uint64_t config_key);

  /// The hidden inputs a check of `config_key` draws: per suite, one input
  /// per spec input. For candidates that run elsewhere (a device runner):
  /// write them out, run, and pass the outputs to check_outputs. Throws
  /// what the spec throws, or tessel::error when it answers badly.
  [[nodiscard]] std::vector<std::vector<hidden_input>> hidden_inputs(
      const gate_spec& spec, std::uint64_t config_key) const;
  /// Judges outputs computed elsewhere by the rules of check():
  /// `outputs[s]` are the candidate's whole outputs on hidden_inputs()[s]
  /// (one entry per suite), `repeat`, when given, a second run on suite 0
  /// (for the determinism rule). Cached by key like check().
  [[nodiscard]] verdict check_outputs(const gate_spec& spec, std::uint64_t config_key,
                                      std::span<const output_values> outputs,
                                      const output_values* repeat = nullptr);

  /// "suspicious" with a message when `objective_s` is not finite, not
  /// positive, or below `bound_s` by more than the slack; nullopt otherwise
  /// (the bound is ignored when it is not positive and finite).
  [[nodiscard]] std::optional<verdict> check_time(double objective_s, double bound_s) const;

  /// The time bound of `spec`: the larger of its roofline_s() and the
  /// data-movement floor (bytes of its inputs and outputs / max_bytes_per_s).
  [[nodiscard]] double time_bound(const gate_spec& spec) const;

  /// Applies the gate to a measurement a backend produced: when `m` is ok,
  /// checks the candidate (recording the gate's wall seconds as the metric
  /// "gate_wall_s", added to m.cost.gate_s only with
  /// gate_options::charge_wall_time, and its max_error as the metric
  /// "gate_max_error") and, when the verdict
  /// fails, turns `m` into that failure (status and message; objective,
  /// samples and metrics are kept); then applies check_time to m.objective
  /// (seconds) with the larger of time_bound(spec) and the metric
  /// "roofline_s" when present. A measurement that is not ok is left alone.
  void apply(measurement& m, const gate_spec& spec, const gated_kernel& candidate,
             std::uint64_t config_key);
  void apply(measurement& m, const gate_spec& spec, const sampled_kernel& executor,
             std::uint64_t config_key);
  /// The time check alone, for a backend with nothing to execute: bound_s
  /// (or the metric "roofline_s", the larger) when known.
  void apply_time(measurement& m, double bound_s = 0) const;

  [[nodiscard]] const gate_options& options() const noexcept;
  /// Verdicts cached so far.
  [[nodiscard]] std::size_t cached() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  void applied(measurement& m, const gate_spec& spec, const verdict& v) const;
};

}  // namespace tessel
