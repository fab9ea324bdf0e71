// tessel/gate.hpp: the equivalence gate. Before a candidate's time counts,
// its outputs are compared with a reference on a hidden suite of inputs
// (several distributions, seeds the candidate never sees). Tolerances scale
// with the reference's magnitude and the output's element type, so zeros or
// a constant cannot pass. Outputs that do not change when the inputs change,
// runs that do not repeat, NaN/Inf and times below the roofline bound are
// `suspicious`. Verdicts are cached per config key (docs/gate.md).
//
// The gate is backend-independent: a backend that can execute a config on
// data (the simulator's functional mode, a CPU kernel, a device run that
// copies outputs back) exposes it as a `gated_kernel`; the gate draws the
// inputs, picks which output elements to compare, and judges.
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
/// The relative tolerance gated_kernel::tolerances() gives an output of type
/// `t`: max(4 u, 2^-12) with u = unit_roundoff(t), so 2^-6 for bf16, 2^-9 for
/// fp16, 2^-2 for fp8 e4m3 and 2^-12 for fp32 (the floor covers fp32
/// accumulation over reductions of up to ~10^6 terms); 0 (exact) for int32.
[[nodiscard]] double default_tolerance(element_type t) noexcept;

// --- inputs ----------------------------------------------------------------------

/// How the hidden suite draws an input's values.
enum class distribution : unsigned char {
  normal,      ///< N(0, 1)
  uniform,     ///< U(-1, 1)
  large,       ///< N(0, 1) scaled toward the top of the type's range
  tiny,        ///< N(0, 1) scaled toward the bottom of the type's normal range
  constant,    ///< one value everywhere (drawn per suite)
  structured,  ///< smooth ramps and periodic patterns (index-dependent)
  outliers,    ///< N(0, 1) with rare elements a thousand times larger
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

/// A lazily drawn input tensor: the value at any index is a pure function of
/// (the gate's hidden seed, the suite, the input, the index), so a kernel
/// reads only the elements it needs and no full tensor is ever materialized.
/// Values are exactly representable in the spec's type. Cheap to copy; holds
/// a pointer to `spec`, which must outlive it. docs/gate.md lists how each
/// distribution draws (large and tiny magnitudes per type, the outlier rate).
/// int32 inputs are labels: uniform in [0, label_range) (the constant suite:
/// one label; structured: flat index mod label_range).
class input_tensor {
 public:
  /// Throws tessel::options_error when an int32 spec has label_range <= 0.
  input_tensor(const tensor_spec& spec, distribution d, std::uint64_t seed);

  [[nodiscard]] const tensor_spec& spec() const noexcept { return *spec_; }
  [[nodiscard]] distribution kind() const noexcept { return kind_; }
  /// The seed the values derive from (a kernel may key a cache of
  /// materialized inputs on it).
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  /// The element at row-major flat index `flat`.
  [[nodiscard]] double at(std::int64_t flat) const noexcept;
  /// The element at (row, col) of a 2-D tensor (or of the last two
  /// dimensions, batch 0).
  [[nodiscard]] double at(std::int64_t row, std::int64_t col) const noexcept {
    return at(row * spec_->shape.back() + col);
  }

 private:
  const tensor_spec* spec_;
  distribution kind_;
  std::uint64_t seed_;
  double scale_ = 1, offset_ = 0;
};

/// The multi-dimensional index of row-major flat index `flat` in `s`.
[[nodiscard]] std::vector<std::int64_t> index_of(const tensor_spec& s, std::int64_t flat);

/// Which output elements the gate compares: flat indices per output.
using probe_points = std::vector<std::vector<std::int64_t>>;
/// Values at the probe points, per output, in the same order.
using probe_values = std::vector<std::vector<double>>;

// --- what a backend exposes -------------------------------------------------------

/// One config of a kernel, executable on data. Implementations must be
/// thread-safe for concurrent const calls.
class gated_kernel {
 public:
  virtual ~gated_kernel() = default;

  [[nodiscard]] virtual std::vector<tensor_spec> inputs() const = 0;
  [[nodiscard]] virtual std::vector<tensor_spec> outputs() const = 0;

  /// The output elements to compare, one list per output (in outputs()
  /// order), each index in [0, elements()). The default compares every
  /// element of an output with at most `whole_output_limit` elements, and
  /// otherwise a grid sample of about `sample_size` elements drawn from `r`:
  /// per dimension, the first and last index plus random ones, and every
  /// combination of those (sorted, row-major). The gate draws probes once per
  /// check and passes the same points to every run() and reference() call.
  /// Kernels override it to sample whole output tiles of their schedule,
  /// always including the edge (tail) tiles.
  [[nodiscard]] virtual probe_points probes(rng& r) const;

  /// The candidate's outputs at `where`, computed on `in` the way the
  /// config's schedule computes them (tiling, rounding, accumulation order).
  [[nodiscard]] virtual probe_values run(std::span<const input_tensor> in,
                                         const probe_points& where) const = 0;
  /// The reference outputs at `where`, computed in fp64 on the same inputs.
  [[nodiscard]] virtual probe_values reference(std::span<const input_tensor> in,
                                               const probe_points& where) const = 0;

  /// Per output: the relative tolerance (default: default_tolerance() of the
  /// output's element type; 0 means exact). The gate multiplies it by
  /// gate_options::tolerance_scale and passes an element when
  /// |cand - ref| <= tol x (|ref| + rms), rms being the root mean square of
  /// the reference over that output's probes (docs/gate.md). Kernels that
  /// accumulate in low precision override it (e.g. scale by sqrt(K)).
  [[nodiscard]] virtual std::vector<double> tolerances() const;

  static constexpr std::int64_t whole_output_limit = 1 << 16;
  /// About how many elements the default probes() samples from a larger output.
  static constexpr std::int64_t sample_size = 1 << 12;
};

// --- the gate -----------------------------------------------------------------------

struct gate_options {
  /// The input distributions of the hidden suite, one input set each.
  std::vector<distribution> suite{all_distributions().begin(), all_distributions().end()};
  /// The hidden seed. 0 (default): drawn from std::random_device when the
  /// gate is made, so a candidate cannot predict its inputs. Tests set it.
  /// Suite s's input i is drawn with seed hash(hash(secret, s), i) and the
  /// probes from hash(secret, ~0): neither depends on the config key, so
  /// every config of a gate sees the same inputs at the same points.
  std::uint64_t secret = 0;
  /// Multiplies every kernel tolerance (> 0).
  double tolerance_scale = 1.0;
  /// Run the first suite twice and require bit-identical outputs.
  bool check_determinism = true;
  /// Require outputs to change when the inputs change (across suites).
  bool check_sensitivity = true;
  /// A time below (1 - roofline_slack) x the roofline bound is suspicious.
  double roofline_slack = 0.02;
  /// Add the check's measured wall seconds to the measurement's cost.gate_s.
  /// Off by default: the seconds are measured at run time, so a cost model
  /// fed them would make the same seed give different trials
  /// (docs/scheduler.md, "Reproducible by default"). They are always kept as
  /// the metric "gate_wall_s"; turn this on where the gate's time is a real
  /// cost worth trading against (a slow reference on real hardware).
  bool charge_wall_time = false;
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

  /// Checks `k` (the config whose key is `config_key`), or answers from the
  /// cache. Thread-safe (two threads checking one new key may both compute;
  /// the first verdict is kept). Per suite, in order: run(), reference(),
  /// then NaN/Inf in the candidate where the reference is finite is
  /// suspicious, and on the first suite a second run() that differs in any
  /// bit is suspicious. After every suite: an output bit-identical on two
  /// suites whose references (rounded to the output type) differ is
  /// suspicious; else an element with |cand - ref| > tol x (|ref| + rms)
  /// makes the verdict incorrect, reporting the worst one. An exception
  /// thrown by the kernel, or answers of the wrong shape, become a
  /// runtime_error verdict naming the call. Every verdict is cached.
  [[nodiscard]] verdict check(const gated_kernel& k, std::uint64_t config_key);

  /// "suspicious" with a message when `objective_s` is below the roofline
  /// bound by more than the slack; nullopt otherwise (or when bound_s <= 0).
  [[nodiscard]] std::optional<verdict> check_time(double objective_s, double bound_s) const;

  /// Applies the gate to a measurement a backend produced: when `m` is ok
  /// and `kernel` is set, checks it (recording the gate's wall seconds as
  /// the metric "gate_wall_s", added to m.cost.gate_s only with
  /// gate_options::charge_wall_time, and its max_error as the metric
  /// "gate_max_error") and,
  /// when the verdict fails, turns `m` into that failure (status and message;
  /// objective, samples and metrics are kept); then applies check_time to
  /// m.objective (seconds) with the metric "roofline_s" when present. A
  /// measurement that is not ok is left alone.
  void apply(measurement& m, const gated_kernel* kernel, std::uint64_t config_key);

  [[nodiscard]] const gate_options& options() const noexcept;
  /// Verdicts cached so far.
  [[nodiscard]] std::size_t cached() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tessel
