// Private: the `groups` arm that `auto` adds with
// auto_options::interaction_groups. Around the study's best config it
// estimates, from a GP surrogate of its own, which pairs of parameters
// interact (analyse_interactions, the analysis behind `tessel explain
// --interactions`, on predicted figures only), then searches each
// parameter that interacts with none one at a time and each group of
// interacting parameters jointly. Declared here so tests can check the
// grouping. Not installed.
#pragma once

#include <tessel/random.hpp>
#include <tessel/space.hpp>
#include <tessel/strategy.hpp>
#include <tessel/surrogate.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace tessel::detail {

/// The parameters of `s` in groups: two parameters share a group when,
/// averaged over `draws` uniform targets drawn from `random`, the model's
/// gain of changing both from `centre` towards the target differs from the
/// sum of their standalone gains by more than `threshold` (a fraction of the
/// centre's predicted objective), or when a chain of such pairs joins them.
/// Every parameter is in exactly one group; groups are in the order of their
/// first parameter, each sorted. `model` must be ready.
[[nodiscard]] std::vector<std::vector<std::size_t>> interaction_groups(
    const space& s, const config& centre, const surrogate& model, rng& random, std::size_t draws,
    double threshold);

/// The arm: name "groups". Before its surrogate is ready (or before the
/// study has an ok trial) it proposes uniform samples. Then each proposal
/// is the next group's best candidate (round robin): the study's best
/// config with that group's parameters set anew, to every other value one
/// at a time and to `joint_draws` joint draws when the group has several,
/// ranked by expected gain (per cost^alpha when the study weighs cost).
/// The groups are estimated again every `regroup_every` observations.
[[nodiscard]] std::unique_ptr<strategy> make_interaction_search(double threshold,
                                                                std::size_t regroup_every = 50,
                                                                std::size_t draws = 8,
                                                                std::size_t joint_draws = 64);

}  // namespace tessel::detail
