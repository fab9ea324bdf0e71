// tessel/backend.hpp: what evaluates configs. A backend compiles, gates and
// measures configs of one workload; it never sees strategies. Backends are
// picked by scheme ("replay:PATH", "command:CMD", "sim", ...) through the
// registry in tessel/backends.hpp.
#pragma once

#include <tessel/config.hpp>
#include <tessel/measurement.hpp>
#include <tessel/space.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

class backend {
 public:
  virtual ~backend() = default;

  /// A short description for reports and the study file ("replay:conv.json.gz").
  [[nodiscard]] virtual std::string name() const = 0;

  /// The hardware this backend measures on, when it is not the space's
  /// target (a replay table's recorded device, a callback's host): the study
  /// file records it as the study's target. nullopt: the space's target.
  [[nodiscard]] virtual std::optional<std::string> hardware() const { return std::nullopt; }

  /// Called once before the first evaluation: checks that the backend can
  /// evaluate configs of `s` (e.g. a replay table has the same parameters)
  /// and throws tessel::error with a message a person can act on if not.
  virtual void prepare(const space& s) { (void)s; }

  /// What the backend assumes where `s` says nothing, one line each (a
  /// simulator workload's defaults, the names it does not read), for
  /// `tessel check --backend`. Empty by default.
  [[nodiscard]] virtual std::vector<std::string> notes(const space& s) const {
    (void)s;
    return {};
  }

  /// Evaluates one config. Must not throw for an evaluation outcome (return
  /// a failure status instead); a throw is recorded as runtime_error (or
  /// rethrown, per Study options). Called from up to concurrency() threads
  /// at once, so it must be thread-safe when concurrency() > 1.
  [[nodiscard]] virtual measurement evaluate(const space& s, const config& c) = 0;

  /// How many evaluations may run at once (compiles and measurements).
  [[nodiscard]] virtual std::size_t concurrency() const { return 1; }

  /// Times `c` again, fully (no early stop), for the report of a search's
  /// best config, where one measurement's noise should not decide what is
  /// reported. nullopt (the default): the backend's timings are not noisy
  /// (a simulator, a replay table) and the search's measurement stands.
  [[nodiscard]] virtual std::optional<measurement> remeasure(const space& s, const config& c) {
    (void)s;
    (void)c;
    return std::nullopt;
  }

  /// Expected cost of evaluating `c`, in seconds (compile + gate + run).
  /// Seeds the scheduler's cost model; need not be accurate.
  [[nodiscard]] virtual double estimated_cost(const space& s, const config& c) const {
    (void)s;
    (void)c;
    return 1.0;
  }
};

}  // namespace tessel
