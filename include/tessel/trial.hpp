// tessel/trial.hpp: one config's life in a study: who proposed it, what the
// scheduler predicted, and what the backend measured.
#pragma once

#include <tessel/config.hpp>
#include <tessel/measurement.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace tessel {

/// Who proposed a config and what it cost them.
struct provenance {
  std::string source;  ///< a strategy name ("ga"), "agent", "user", "baseline", ...
  double tokens = 0;   ///< agent tokens spent proposing it (0 for strategies)
  std::string note;    ///< free text from the proposer (an agent's rationale)
};

/// The scheduler's view of a candidate when it was chosen.
struct prediction {
  double mean = 0;           ///< predicted objective
  double sigma = 0;          ///< its standard deviation
  double p_feasible = 1;     ///< probability it passes compile and gate
  double expected_gain = 0;  ///< expected improvement over the incumbent
  double cost_s = 0;         ///< predicted evaluation cost, seconds
  double utility = 0;        ///< the rank: gain / price^alpha, or -index (cost_rule gittins)
  double tokens =
      0;  ///< agent tokens counted in cost_s: the proposal's own, else its source's mean
  /// What the numbers come from. model: the fitted surrogate. prior: no model
  /// is fitted yet, so mean and sigma are those of the ok objectives observed
  /// so far, p_feasible the observed success rate (Laplace-smoothed) and
  /// expected_gain follows from them; mean, sigma, expected_gain and utility
  /// are NaN before the first ok result. cost_s is the cost model's either way.
  enum class basis : unsigned char { model, prior };
  basis from = basis::model;
};

enum class trial_state : unsigned char { proposed, running, finished };

struct trial {
  std::uint64_t id = 0;  ///< 1-based, in proposal order
  tessel::config config;
  std::uint64_t key = 0;  ///< space::key(config)
  tessel::provenance provenance;
  std::optional<tessel::prediction> prediction;
  trial_state state = trial_state::proposed;
  tessel::measurement result;  ///< meaningful when state == finished
  /// The result was told by a caller (an agent) and not measured by the
  /// study's backend; study::verify() re-measures it and clears this.
  bool reported = false;
  double proposed_at = 0;  ///< seconds since the study started
  double finished_at = 0;
  /// In a shared study (shared_store): the id of the worker that holds the
  /// trial (running) or whose result was kept (finished), as
  /// shared_store::join returned it; 0 when none did (a store with one
  /// writer, a queued trial, a result from a process that never joined).
  std::uint64_t worker = 0;
};

}  // namespace tessel
