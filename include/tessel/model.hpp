// tessel/model.hpp: a model is a set of studies (DESIGN.md §10, docs/models.md).
// A model names kernel instances (a space with its shape constants set, and
// how many times it runs per step). Its step time is the calls-weighted sum of
// the kernels' times; step_of() splits it by kernel and by category, and
// model_study tunes every kernel under one budget, giving each next
// evaluation to the kernel with the largest expected step-time gain per unit
// of cost. The .tsl `model` block is read by tessel/dsl.hpp (load_model);
// opening each kernel's backend and study file is the outer layer's.
#pragma once

#include <tessel/measurement.hpp>
#include <tessel/space.hpp>
#include <tessel/study.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel {

// --- the model ---------------------------------------------------------------------

/// One kernel instance of a model.
struct model_kernel {
  std::string name;
  tessel::space space;     ///< checked against the model's target, `sets` applied
  std::string space_file;  ///< the file the space was read from, as resolved
  std::string space_name;
  /// The space's `--set` constants as given to it (`dtype` included), in
  /// the order the model wrote them.
  std::vector<std::pair<std::string, std::string>> sets;
  std::string dtype;       ///< the space's `dtype` const after the sets ("" when it has none)
  std::int64_t calls = 1;  ///< how many times the kernel runs per step
  std::string calls_text;  ///< the calls expression as written ("layers * batch")
  std::string group;       ///< the part of the model it belongs to ("" when not given)
  int line = 0;            ///< where the kernel is declared in the model's file
};

struct model_definition {
  std::string name;
  std::string file;    ///< as given to the parser
  std::string target;  ///< the target every kernel's space was checked against
  /// The model's consts, name and value as text, in file order.
  std::vector<std::pair<std::string, std::string>> constants;
  std::vector<model_kernel> kernels;
};

/// The distinct kernels of `m`: instances of the same space of the same file
/// whose consts (shapes, dtype) all end up equal are one kernel, since a config
/// tuned for one is tuned for all (a forward and a backward GEMM of one shape). Each
/// entry lists the indices into m.kernels it stands for, in model order.
[[nodiscard]] std::vector<std::vector<std::size_t>> distinct_kernels(const model_definition& m);

// --- step time ------------------------------------------------------------------

/// What a step's time is spent on: the categories a Neuron profile shows.
/// A backend reports a measurement's split in its metrics "time_<name>_s"
/// (seconds per call; the simulator's event model does, from its critical
/// path: docs/simulator.md); what they do not account for is `other`.
enum class time_category : std::uint8_t {
  matmul,       ///< TensorE
  elementwise,  ///< VectorE, ScalarE, GpSimdE
  hbm,          ///< DMA moving data to and from HBM (issue and transfer)
  collective,   ///< communication between cores (none on a one-core target)
  stall,        ///< waiting: DMA completion latency, dependencies
  other,        ///< not split by the backend
};
inline constexpr std::size_t time_category_count = 6;
[[nodiscard]] std::string_view to_string(time_category c) noexcept;
/// Every category, in declaration order.
[[nodiscard]] const std::array<time_category, time_category_count>& all_time_categories() noexcept;
/// The metric a backend reports a category in ("time_matmul_s"); "" for other.
[[nodiscard]] std::string_view metric_of(time_category c) noexcept;

using category_seconds = std::array<double, time_category_count>;

/// `m`'s objective split by category (seconds per call, summing to the
/// objective; `other` holds what the metrics leave out). A measurement that
/// is not ok gives zeros.
[[nodiscard]] category_seconds categories_of(const measurement& m);

/// One kernel's result as step_of() reads it.
struct kernel_result {
  std::string name;
  std::int64_t calls = 1;
  const measurement* result = nullptr;  ///< null, or not ok: the kernel has no time
};

/// One kernel's part of a step. Seconds and counts are per step (per call
/// times calls) unless named per call.
struct kernel_step {
  std::string name;
  std::int64_t calls = 1;
  bool timed = false;     ///< it had an ok measurement
  double per_call_s = 0;  ///< the measured objective
  double step_s = 0;      ///< calls * per_call_s
  double share = 0;       ///< of the step's time
  category_seconds by_category{};
  double flops = 0;       ///< metric "flops" x calls (0 when not reported)
  double hbm_bytes = 0;   ///< metrics "hbm_read_bytes" + "hbm_write_bytes", x calls
  double roofline_s = 0;  ///< metric "roofline_s" x calls (0 when not reported)
};

struct step_breakdown {
  std::vector<kernel_step> kernels;  ///< in the model's order
  double step_s = 0;                 ///< sum of the timed kernels' step_s
  category_seconds by_category{};
  double flops = 0, hbm_bytes = 0, roofline_s = 0;
  std::vector<std::string> untimed;  ///< kernels without an ok measurement (not in step_s)
};

/// The step: per kernel and in total (DESIGN.md §10: the calls-weighted sum
/// of the kernels' times).
[[nodiscard]] step_breakdown step_of(std::span<const kernel_result> kernels);

// --- one budget across kernels ---------------------------------------------------

/// How model_study gives out evaluations (docs/models.md, "The allocator").
enum class allocation : std::uint8_t {
  /// To the kernel with the largest calls x expected gain / cost: the
  /// kernel study's own scheduler prediction of its next candidate, its gain
  /// capped at the distance of the kernel's best to its roofline, once every
  /// kernel has had its floor (model_study_options::floor_fraction).
  utility,
  even,   ///< round robin: every kernel the same number of evaluations
  share,  ///< in proportion to each kernel's share of the step at its first result
};
[[nodiscard]] std::string_view to_string(allocation a) noexcept;
[[nodiscard]] std::optional<allocation> parse_allocation(std::string_view name) noexcept;

struct model_study_options {
  allocation policy = allocation::utility;
  /// What one unit of budget is, and so what `utility` divides the gain by:
  /// false, an evaluation (cost 1 each); true, a second of evaluation cost
  /// (the kernel study's predicted cost of its candidate).
  bool cost_is_seconds = false;
  /// A kernel that has no ok result yet is served first, for at most this
  /// many evaluations (its step time is unknown until then).
  std::size_t first_result_tries = 4;
  /// `utility` only: before the utility chooses, every kernel gets this
  /// fraction of its study's budget_hint (its even share of the budget) in
  /// evaluations, round robin, so no kernel is starved on the strength of
  /// another's early predictions (benchmarks/README.md, "One budget across
  /// kernels"). 0: none; a study without a budget_hint gets no floor.
  double floor_fraction = 0.5;

  /// Throws options_error naming the field and the rule.
  void validate() const;
};

/// One kernel of a model_study: a study of its space, and its calls per step.
struct model_member {
  std::string name;
  std::int64_t calls = 1;
  std::unique_ptr<tessel::study> study;
};

/// Where a kernel stands, for reports (model_study::kernels).
struct kernel_progress {
  std::string name;
  std::int64_t calls = 1;
  std::size_t evaluations = 0;       ///< finished trials of its study
  double cost_s = 0;                 ///< their summed evaluation cost
  const trial* first = nullptr;      ///< its first ok trial (the baseline, normally)
  const trial* best = nullptr;       ///< its best ok trial
  bool done = false;                 ///< its study has nothing more to propose
  std::optional<double> last_score;  ///< the allocator's score of its pending candidate
};

/// Observes a model_study: called after each evaluation, in order.
class model_observer {
 public:
  virtual ~model_observer() = default;
  /// Kernel `kernel` finished trial `t`; `step_s` is the step time now (the
  /// sum over kernels of calls x best; nullopt while a kernel has none).
  virtual void on_evaluation(std::size_t kernel, const trial& t, std::optional<double> step_s) {
    (void)kernel, (void)t, (void)step_s;
  }
};

struct model_summary {
  std::size_t evaluations = 0;  ///< over every kernel's study
  double cost_s = 0;
  std::optional<double> before_s;  ///< step time at each kernel's first ok result
  std::optional<double> after_s;   ///< step time at each kernel's best
  std::string stopped;             ///< why run() stopped, in words
  std::vector<kernel_progress> kernels;
};

/// A scheduler over studies (DESIGN.md §10): tunes every kernel of a model
/// under one budget. Each kernel study keeps its own strategy, surrogate,
/// scheduler and study file, and holds at most one candidate it was asked
/// for and not yet given an evaluation (so a killed run resumes with that
/// candidate first, as `tune --resume` does). Not thread-safe.
class model_study {
 public:
  using options = model_study_options;

  /// At least one member, each with a study, calls >= 1, names unique.
  /// Throws tessel::error otherwise. Studies may hold trials already (a
  /// resumed model): the budget counts them. A new study whose space's
  /// default config is not valid (and that evaluates a baseline) gets the
  /// space's first valid config queued as its baseline, so the step before
  /// tuning is the same whatever the strategy proposes first.
  model_study(std::vector<model_member> members, options o = {});
  ~model_study();
  model_study(model_study&&) noexcept;
  model_study& operator=(model_study&&) noexcept;

  /// Gives one evaluation to the kernel the policy picks. Returns its index,
  /// or nullopt when no kernel has anything left to evaluate.
  std::optional<std::size_t> step();

  /// Steps until `evaluations` finished trials over all kernels (0: no
  /// limit), `cost_s` seconds of summed evaluation cost (0: no limit), or
  /// nothing is left. `even` and `share` give out evaluations so that at any
  /// moment the split is as near their proportions as whole evaluations allow,
  /// so they need no budget to divide.
  model_summary run(std::size_t evaluations, double cost_s = 0);

  void add_observer(std::shared_ptr<model_observer> o);

  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] const model_member& member(std::size_t i) const;
  [[nodiscard]] study& kernel_study(std::size_t i);
  [[nodiscard]] model_summary current_summary() const;
  /// The step now: each kernel at its best ok trial.
  [[nodiscard]] step_breakdown best_step() const;
  /// The step at each kernel's first ok trial (the defaults, normally).
  [[nodiscard]] step_breakdown first_step() const;
  [[nodiscard]] const options& opts() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace tessel
