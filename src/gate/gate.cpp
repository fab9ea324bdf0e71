// gate.cpp: the equivalence gate (tessel/gate.hpp). check() drives a
// session (gate/session.hpp) over an in-process candidate or a trusted
// executor, caches the verdict per config key and re-checks it now and then
// on fresh inputs; gate_session hands the same rules to a backend whose
// candidate runs elsewhere; the time checks bound a measurement by the
// spec's and the machine's floor. docs/gate.md explains each rule.
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include "gate/keyed.hpp"
#include "gate/session.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessel {
namespace {

verdict judged(status s, std::string message) {
  verdict v;
  v.status = s;
  v.message = std::move(message);
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

struct gate::impl {
  gate_options options;
  detail::gate_key key;
  mutable std::mutex mutex;
  struct entry {
    verdict v;
    std::uint64_t lookups = 0;
  };
  std::unordered_map<std::uint64_t, entry> cache;
  std::unordered_map<std::uint64_t, std::uint64_t> epochs;  ///< checks and sessions per key

  impl(gate_options o, detail::gate_key k) : options(std::move(o)), key(std::move(k)) {}

  /// The number of the next check of `config_key` (its inputs differ from every earlier one's).
  std::uint64_t next_epoch(std::uint64_t config_key) {
    const std::lock_guard lock(mutex);
    return epochs[config_key]++;
  }

  /// The cached verdict of `config_key`, unless there is none or the draw
  /// says to check again.
  std::optional<verdict> cached_verdict(std::uint64_t config_key, bool may_recheck) {
    const std::lock_guard lock(mutex);
    auto it = cache.find(config_key);
    if (it == cache.end()) return std::nullopt;
    const std::uint64_t lookup = ++it->second.lookups;
    if (may_recheck && it->second.v.ok() && options.recheck_rate > 0) {
      const double u =
          static_cast<double>(key.derive("recheck", {config_key, lookup}) >> 11) * 0x1p-53;
      if (u < options.recheck_rate) return std::nullopt;
    }
    verdict v = it->second.v;
    v.cached = true;
    v.seconds = 0;
    return v;
  }

  /// Keeps `v` for `config_key`; a failure replaces an ok verdict.
  void store(std::uint64_t config_key, const verdict& v) {
    const std::lock_guard lock(mutex);
    auto [it, inserted] = cache.try_emplace(config_key, entry{v, 0});
    if (!inserted && it->second.v.ok() && !v.ok()) it->second.v = v;
  }

  /// One check: `run` makes the calls on a fresh session's state; exceptions
  /// become a runtime_error verdict naming the stage.
  template <class Run>
  verdict checked(const gate_spec& spec, std::uint64_t config_key, bool disguise, bool may_recheck,
                  Run&& run) {
    if (auto v = cached_verdict(config_key, may_recheck)) return *v;
    const auto start = std::chrono::steady_clock::now();
    gate_session::state st(spec, options, key, config_key, next_epoch(config_key), disguise);
    verdict v;
    try {
      st.prepare();
      v = run(st);
    } catch (const std::exception& e) {
      v = judged(status::runtime_error,
                 fmt::format("the kernel failed in {}: {}", st.stage, e.what()));
    } catch (...) {
      v = judged(status::runtime_error,
                 fmt::format("the kernel failed in {}: an exception not derived from "
                             "std::exception",
                             st.stage));
    }
    v.seconds = seconds_since(start);
    store(config_key, v);
    return v;
  }
};

void gate_options::validate() const {
  if (suite.empty())
    throw options_error("gate_options::suite", "must hold at least one distribution");
  if (!(tolerance_scale > 0) || !std::isfinite(tolerance_scale))
    throw options_error("gate_options::tolerance_scale",
                        fmt::format("must be > 0 and finite (got {})", tolerance_scale));
  if (extra_calls < 2)
    throw options_error("gate_options::extra_calls",
                        fmt::format("must be at least 2 (got {})", extra_calls));
  if (!(recheck_rate >= 0 && recheck_rate <= 1))
    throw options_error("gate_options::recheck_rate",
                        fmt::format("must be in [0, 1] (got {})", recheck_rate));
  if (spot_check_every == 0)
    throw options_error("gate_options::spot_check_every", "must be at least 1");
  if (!(roofline_slack >= 0 && roofline_slack < 1))
    throw options_error("gate_options::roofline_slack",
                        fmt::format("must be in [0, 1) (got {})", roofline_slack));
  if (!(max_bytes_per_s >= 0) || std::isinf(max_bytes_per_s))
    throw options_error("gate_options::max_bytes_per_s",
                        fmt::format("must be >= 0 and finite (got {})", max_bytes_per_s));
  for (const double rate : {machine.flops_per_s, machine.memory_bytes_per_s,
                            machine.cache_bytes_per_s, machine.cache_bytes})
    if (!(rate >= 0) || std::isinf(rate))
      throw options_error("gate_options::machine",
                          fmt::format("rates must be >= 0 and finite (got {})", rate));
}

gate::gate(gate_options o) {
  o.validate();
  auto key = o.secret == 0 ? detail::gate_key::drawn() : detail::gate_key::from_secret(o.secret);
  impl_ = std::make_unique<impl>(std::move(o), std::move(key));
}

gate::~gate() = default;

verdict gate::check(const gate_spec& spec, const gated_kernel& candidate,
                    std::uint64_t config_key) {
  return impl_->checked(spec, config_key, true, true, [&](gate_session::state& st) {
    // The reference is computed before the candidate runs on a set, so a
    // candidate that reaches the spec cannot change what it is compared with.
    const bool up_front = st.references_fit();
    if (up_front)
      for (std::size_t s = 0; s < st.sets(); ++s) st.ensure_reference(s);
    for (const std::size_t s : st.calls()) {
      if (!up_front) st.ensure_reference(s);
      st.stage = fmt::format("run() on the {} suite", st.suite_name(s));
      const output_values out = candidate.run(st.hidden(s));
      if (st.judge_whole(s, out)) break;
    }
    if (auto changed = st.spec_changed()) st.fail(*changed);
    return st.finish();
  });
}

verdict gate::check(const gate_spec& spec, const sampled_kernel& executor,
                    std::uint64_t config_key) {
  return impl_->checked(spec, config_key, false, false, [&](gate_session::state& st) {
    // A trusted executor is deterministic and cannot count its calls: every
    // set once and one repeat (for the determinism rule) are enough.
    std::vector<bool> called(st.sets(), false);
    bool repeated = false;
    for (const std::size_t s : st.calls()) {
      if (called[s] && std::exchange(repeated, true)) continue;
      called[s] = true;
      st.stage = fmt::format("run() on the {} suite", st.suite_name(s));
      const probe_values at = executor.run(st.drawn(s), st.where());
      if (st.judge_probes(s, at)) break;
    }
    return st.finish();
  });
}

gate_session gate::session(const gate_spec& spec, std::uint64_t config_key) {
  auto st = std::make_unique<gate_session::state>(spec, impl_->options, impl_->key, config_key,
                                                  impl_->next_epoch(config_key), true);
  try {
    st->prepare();
  } catch (const std::exception& e) {
    throw error(fmt::format("the gate could not read the spec: {}: {}", st->stage, e.what()));
  }
  return gate_session(std::move(st));
}

std::optional<verdict> gate::check_time(double objective_s, double bound_s) const {
  if (!std::isfinite(objective_s) || !(objective_s > 0))
    return judged(
        status::suspicious,
        fmt::format("suspicious: the time {} s is not a finite positive number", objective_s));
  if (!(bound_s > 0) || !std::isfinite(bound_s)) return std::nullopt;
  const double slack = impl_->options.roofline_slack;
  if (!(objective_s < (1 - slack) * bound_s)) return std::nullopt;
  return judged(status::suspicious,
                fmt::format("suspicious: {:.4g} s is faster than the roofline bound {:.4g} s "
                            "({:.1f}% below it; the gate allows {:.1f}%)",
                            objective_s, bound_s, 100 * (1 - objective_s / bound_s), 100 * slack));
}

double gate::time_bound(const gate_spec& spec) const {
  const gate_options& o = impl_->options;
  const double bytes = spec.min_bytes();
  double bound = std::max(spec.roofline_s(), o.machine.floor_s(spec.flops(), bytes));
  if (o.max_bytes_per_s > 0) bound = std::max(bound, bytes / o.max_bytes_per_s);
  return std::isfinite(bound) ? bound : 0;
}

void gate::apply_verdict(measurement& m, const gate_spec& spec, const verdict& v) const {
  if (!m.ok()) return;
  m.metrics["gate_wall_s"] = v.seconds;
  if (impl_->options.charge_wall_time) m.cost.gate_s += v.seconds;
  if (std::isfinite(v.max_error)) m.metrics["gate_max_error"] = v.max_error;
  if (!v.ok()) {
    m.status = v.status;
    m.message = v.message;
    return;
  }
  apply_time(m, spec);
}

void gate::apply(measurement& m, const gate_spec& spec, const gated_kernel& candidate,
                 std::uint64_t config_key) {
  if (!m.ok()) return;
  apply_verdict(m, spec, check(spec, candidate, config_key));
}

void gate::apply(measurement& m, const gate_spec& spec, const sampled_kernel& executor,
                 std::uint64_t config_key) {
  if (!m.ok()) return;
  apply_verdict(m, spec, check(spec, executor, config_key));
}

void gate::apply_time(measurement& m, const gate_spec& spec) const {
  double bound = 0;
  try {
    bound = time_bound(spec);
  } catch (const std::exception&) {
    bound = 0;  // a check already read the spec; a throw here is the spec's bug
  }
  apply_time(m, bound);
}

void gate::apply_time(measurement& m, double bound_s) const {
  if (!m.ok()) return;
  const auto metric = m.metrics.find("roofline_s");
  if (metric != m.metrics.end() && std::isfinite(metric->second))
    bound_s = std::max(bound_s, metric->second);
  std::optional<verdict> v = check_time(m.objective, bound_s);
  for (std::size_t i = 0; !v && i < m.samples.size(); ++i) {
    v = check_time(m.samples[i], bound_s);
    if (v) v->message += fmt::format(" (sample {} of {})", i + 1, m.samples.size());
  }
  if (v) {
    m.status = v->status;
    m.message = v->message;
  }
}

const gate_options& gate::options() const noexcept { return impl_->options; }

std::size_t gate::cached() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->cache.size();
}

// --- gate_session ---------------------------------------------------------------

gate_session::gate_session(std::unique_ptr<state> s) : state_(std::move(s)) {}
gate_session::gate_session(gate_session&&) noexcept = default;
gate_session& gate_session::operator=(gate_session&&) noexcept = default;
gate_session::~gate_session() = default;

std::size_t gate_session::sets() const noexcept { return state_->sets(); }

const std::vector<hidden_input>& gate_session::inputs(std::size_t s) const {
  return state_->hidden(s);
}

const std::vector<std::size_t>& gate_session::calls() const noexcept { return state_->calls(); }

std::size_t gate_session::timed_set(std::size_t i) const { return state_->timed_set(i); }

bool gate_session::spot_check(std::size_t i, std::size_t count) const {
  if (i == 0 || i + 1 >= count) return true;
  // The kinds of timed set that share content with a set the candidate has
  // seen: a cache keyed by part of the content answers them stale, so they
  // are always judged (round six).
  if (state_->timed_shares_seen(i)) return true;
  return state_->derive("spot", i) % state_->spot_check_every() == 0;
}

std::uint64_t gate_session::loop_seed(std::size_t s) const { return state_->loop_seed(s); }

std::uint64_t gate_session::judged_call_seed(std::size_t s) const {
  return state_->derive("judged call", s);
}

bool gate_session::perturbable(std::size_t s) const {
  if (s >= state_->all_sets())
    throw error(fmt::format("gate_session::perturbable: set {} of {}", s, state_->all_sets()));
  return state_->perturbable(s);
}

std::size_t gate_session::perturbed_set(std::size_t s, std::uint64_t calls) {
  if (s >= state_->all_sets())
    throw error(fmt::format("gate_session::perturbed_set: set {} of {}", s, state_->all_sets()));
  return state_->perturbed_set(s, calls);
}

bool gate_session::judged_on(std::size_t s) const { return state_->calls_on(s) > 0; }

std::optional<verdict> gate_session::judge(std::size_t s, const output_values& outputs) {
  if (s >= state_->all_sets())
    throw error(fmt::format("gate_session::judge: set {} of {}", s, state_->all_sets()));
  return state_->judge_whole(s, outputs);
}

void gate_session::prepare_references() {
  for (std::size_t s = 0; s < state_->sets(); ++s) state_->ensure_reference(s);
}

verdict gate_session::finish() { return state_->finish(); }

}  // namespace tessel
