// typed_workload.hpp: the base every simulator workload derives from
// (docs/simulator.md, "Adding a workload"). It owns the plumbing between the
// untyped interface (workload.hpp) and the workload's own plan type: the plan
// is made once per config as plan_of<Plan>, handed back checked (a plan of
// another type is a tessel::error, never a bad cast), and the workload writes
// only its typed steps: read the knobs into a plan, lower it, and optionally
// execute it for the gate, write it as NKI and estimate it in closed form.
#pragma once

#include "workload.hpp"

#include <tessel/error.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {

/// What a workload is, declared once.
struct workload_info {
  std::string name;         ///< "matmul": the registry name, `sim:NAME`, `const workload = NAME`
  std::string summary;      ///< one line: what it computes
  std::vector<knob> knobs;  ///< every constant and parameter it reads, in documentation order
  /// The integer constant the default plan_cores() cuts between physical
  /// cores ("M", "rows"); "" when the work does not split that way.
  std::string core_split;
};

template <class Plan>
class typed_workload : public workload {
 public:
  explicit typed_workload(workload_info info)
      : name_(std::move(info.name)),
        summary_(std::move(info.summary)),
        split_(std::move(info.core_split)),
        knobs_(name_, std::move(info.knobs)) {}

  [[nodiscard]] std::string_view name() const final { return name_; }
  [[nodiscard]] std::string_view summary() const final { return summary_; }
  [[nodiscard]] const knob_table& knobs() const final { return knobs_; }
  [[nodiscard]] std::string core_split_dimension() const final { return split_; }

  [[nodiscard]] std::unique_ptr<workload_plan> plan_config(const space& s, const config& c,
                                                           const machine& m) const final {
    auto p = std::make_unique<plan_of<Plan>>();
    p->error = read_plan(reader(s, c), m, p->value);
    return p;
  }
  [[nodiscard]] std::string lower_plan(const workload_plan& p, const machine& m,
                                       program& out) const final {
    out.clear();
    return lower_program(typed(p), m, out);
  }
  [[nodiscard]] std::unique_ptr<functional_kernel> functional_plan(const workload_plan& p,
                                                                   const machine& m) const final {
    return executor(typed(p), m);
  }
  [[nodiscard]] std::string emit_nki_plan(const workload_plan& p, const nki::context& ctx,
                                          std::string& out) const final {
    return write_nki(typed(p), ctx, out);
  }
  [[nodiscard]] std::optional<steady_estimate> steady_plan(const workload_plan& p,
                                                           const machine& m) const final {
    return steady(typed(p), m);
  }

  /// The Plan inside `p`; tessel::error when plan_config did not make it as one.
  [[nodiscard]] const Plan& typed(const workload_plan& p) const {
    if (const auto* mine = dynamic_cast<const plan_of<Plan>*>(&p)) return mine->value;
    throw error("sim workload '" + name_ + "' was given a plan of another type");
  }

 protected:
  /// The reader of (s, c) through this workload's knob table.
  [[nodiscard]] knob_reader reader(const space& s, const config& c) const {
    return knob_reader(knobs_, s, c);
  }

  /// Reads the config's knobs into `out` and plans it: "" or why it does not compile.
  [[nodiscard]] virtual std::string read_plan(const knob_reader& v, const machine& m,
                                              Plan& out) const = 0;
  /// Lowers a plan without error into `out` (cleared): "" or a compile error.
  [[nodiscard]] virtual std::string lower_program(const Plan& p, const machine& m,
                                                  program& out) const = 0;
  /// The functional executor of a plan; nullptr (the default): no functional mode.
  [[nodiscard]] virtual std::unique_ptr<functional_kernel> executor(const Plan& p,
                                                                    const machine& m) const {
    (void)p;
    (void)m;
    return nullptr;
  }
  /// The NKI kernel of a plan that lowers: "" or why not (the default: no emitter).
  [[nodiscard]] virtual std::string write_nki(const Plan& p, const nki::context& ctx,
                                              std::string& out) const {
    (void)p;
    (void)ctx;
    (void)out;
    return "workload '" + name_ + "' has no NKI emitter";
  }
  /// The steady-state estimate of a plan without error; nullopt (the default): none.
  [[nodiscard]] virtual std::optional<steady_estimate> steady(const Plan& p,
                                                              const machine& m) const {
    (void)p;
    (void)m;
    return std::nullopt;
  }

 private:
  std::string name_, summary_, split_;
  knob_table knobs_;
};

/// A typed_workload planned in two steps and lowered by a lowering that
/// cannot fail: `Read(v, m, params)` reads the knobs ("" or why not),
/// `Make(params, m, plan)` plans them ("" or why not), and
/// `Lowerer(plan, m, out).run()` lowers the plan. A workload that lowers
/// otherwise (reserving first, say) still overrides lower_program.
template <class Plan, class Params, auto Read, auto Make, class Lowerer>
class planned_workload : public typed_workload<Plan> {
 public:
  using typed_workload<Plan>::typed_workload;

 protected:
  [[nodiscard]] std::string read_plan(const knob_reader& v, const machine& m,
                                      Plan& out) const override {
    Params p;
    if (auto e = Read(v, m, p); !e.empty()) return e;
    return Make(p, m, out);
  }
  [[nodiscard]] std::string lower_program(const Plan& pl, const machine& m,
                                          program& out) const override {
    Lowerer(pl, m, out).run();
    return "";
  }
};

}  // namespace tessel::sim
