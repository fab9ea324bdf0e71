// Groups and prefix trees: the chain-of-trees construction of DESIGN.md §2.
#include "space/impl.hpp"

#include <tessel/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace tessel::detail {
namespace {

constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();
// The limits of docs/limits.md. The build may lower them (the fuzz preset
// does, so that a fuzzer's hang and memory limits mean a bug, not a budget).
#ifndef TESSEL_MAX_TREE_NODES
#define TESSEL_MAX_TREE_NODES 64'000'000
#endif
#ifndef TESSEL_MAX_BUILD_WORK
#define TESSEL_MAX_BUILD_WORK 1'000'000'000
#endif

/// Refuse to store more partial configs than this (32 bytes each).
constexpr std::size_t max_nodes = TESSEL_MAX_TREE_NODES;
/// Refuse to spend more work than this on one space: a unit is one candidate
/// value tried at one level plus one per instruction of each check it runs
/// (a few seconds on one core). `x + y == 999999` over two domains of 10^6
/// values would need 10^12: it stops after this many.
constexpr std::uint64_t max_work = TESSEL_MAX_BUILD_WORK;

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? max_u64 : r;
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? max_u64 : r;
}

std::uint64_t cartesian_of(const parameter& p) { return p.dom.size() + (p.when ? 1 : 0); }

std::vector<std::size_t> union_groups(const space::impl& s) {
  std::vector<std::size_t> parent(s.def.parameters.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](std::size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto tie = [&](const std::vector<std::size_t>& inputs, std::size_t extra) {
    for (auto i : inputs) parent[find(i)] = find(extra);
  };
  for (const auto& p : s.constraints)
    if (!p.inputs.empty()) tie(p.inputs, p.inputs.front());
  for (std::size_t i = 0; i < s.whens.size(); ++i)
    if (s.whens[i]) tie(s.whens[i]->inputs, i);
  std::vector<std::size_t> root(parent.size());
  for (std::size_t i = 0; i < parent.size(); ++i) root[i] = find(i);
  return root;
}

/// Grows one group's tree depth-first; children of a node are appended
/// together before any of them is expanded, so siblings stay contiguous.
class tree_builder {
 public:
  /// `work`: the units spent on the space so far (shared by its groups).
  tree_builder(space::impl& s, group_tree& g, std::vector<std::uint64_t>& rejected,
               std::uint64_t& work)
      : s_(s),
        g_(g),
        rejected_(rejected),
        work_(work),
        values_(s.def.parameters.size(), 0),
        suffix_(g.params.size() + 1, 1) {
    for (std::size_t l = g.params.size(); l-- > 0;)
      suffix_[l] = saturating_mul(suffix_[l + 1], cartesian_of(s.def.parameters[g.params[l]]));
    raw_.resize(g.params.size());
  }

  void build() {
    if (saturating_add(work_, certain_work()) > max_work) throw_too_much_work();  // before starting
    grow(0);
    g_.levels.assign(g_.params.size(), {});
    std::uint64_t count = 0;
    if (!raw_.empty()) compact(0, 0, static_cast<std::uint32_t>(raw_[0].size()), count);
    g_.count = count;
  }

  std::size_t deepest_rejecting_level() const { return deepest_ + 1; }

 private:
  /// The work the build cannot avoid: nothing prunes before the first level
  /// with a check, so every combination of the values up to it is tried (and
  /// checked there). `x + y == 999999` over two domains of 10^6: 10^12.
  [[nodiscard]] std::uint64_t certain_work() const {
    std::uint64_t work = 0;
    std::uint64_t tried = 1;
    for (std::size_t level = 0; level < g_.params.size(); ++level) {
      tried = saturating_mul(tried, cartesian_of(s_.def.parameters[g_.params[level]]));
      work = saturating_add(work, tried);
      if (g_.checks[level].empty()) continue;
      std::uint64_t per_candidate = 0;
      for (const auto& check : g_.checks[level])
        if (check.type == level_check::kind::constraint)
          per_candidate += s_.constraints[check.index].code.size();
      return saturating_add(work, saturating_mul(tried, per_candidate));
    }
    return work;
  }

  // Expands level `level` under the current prefix; returns valid completions.
  std::uint64_t grow(std::size_t level) {
    auto& nodes = raw_[level];
    const std::size_t param = g_.params[level];
    const auto& p = s_.def.parameters[param];
    const auto begin = nodes.size();
    const auto candidates = static_cast<std::uint32_t>(p.dom.size());
    for (std::uint32_t i = 0; i <= candidates; ++i) {
      if (i == candidates && !p.when) break;
      const std::uint32_t index = i == candidates ? config::inactive : i;
      bind(param, index);
      if (++work_ > max_work) throw_too_much_work();
      if (!passes(level)) continue;
      if (++total_ > max_nodes) throw_too_large();
      nodes.push_back({index, 0, 0, 0, 0});
    }
    const auto end = nodes.size();
    if (end > begin)
      deepest_ = std::max<std::ptrdiff_t>(deepest_, static_cast<std::ptrdiff_t>(level));
    std::uint64_t sum = 0;
    for (auto n = begin; n < end; ++n) {
      bind(param, raw_[level][n].index);
      std::uint64_t count = 1;
      if (level + 1 < g_.params.size()) {
        raw_[level][n].first_child = static_cast<std::uint32_t>(raw_[level + 1].size());
        count = grow(level + 1);
        raw_[level][n].child_count =
            static_cast<std::uint32_t>(raw_[level + 1].size()) - raw_[level][n].first_child;
      }
      raw_[level][n].count = count;
      sum += count;
    }
    return sum;
  }

  void bind(std::size_t param, std::uint32_t index) {
    indices_[param] = index;
    values_[param] = index == config::inactive ? 0 : s_.def.parameters[param].dom.values[index];
  }

  bool passes(std::size_t level) {
    for (const auto& check : g_.checks[level]) {
      bool ok = false;
      if (check.type == level_check::kind::activity) {
        const bool active = s_.active(check.index, values_.data());
        ok = active != (indices_[check.index] == config::inactive);
      } else {
        const auto& program = s_.constraints[check.index];
        work_ += program.code.size();
        const auto v = s_.eval.run(program, values_.data());
        ok = v.ok() && v.value != 0;
        if (!ok) rejected_[check.index] += suffix_[level + 1];
      }
      if (!ok) return false;
    }
    return true;
  }

  // Copies the non-empty subtrees of raw_[level][first, first+n) into g_.levels.
  std::pair<std::uint32_t, std::uint32_t> compact(std::size_t level, std::uint32_t first,
                                                  std::uint32_t n, std::uint64_t& total) {
    auto& out = g_.levels[level];
    const auto begin = static_cast<std::uint32_t>(out.size());
    std::vector<std::uint32_t> kept;
    for (std::uint32_t i = first; i < first + n; ++i) {
      const auto& node = raw_[level][i];
      if (node.count == 0) continue;
      out.push_back({node.index, 0, 0, node.count, total});
      total += node.count;
      kept.push_back(i);
    }
    for (std::size_t k = 0; k < kept.size(); ++k) {
      const auto& node = raw_[level][kept[k]];
      if (level + 1 == g_.params.size()) continue;
      std::uint64_t below = 0;
      const auto [child_begin, child_n] =
          compact(level + 1, node.first_child, node.child_count, below);
      g_.levels[level][begin + k].first_child = child_begin;
      g_.levels[level][begin + k].child_count = child_n;
    }
    return {begin, static_cast<std::uint32_t>(out.size()) - begin};
  }

  [[noreturn]] void throw_too_large() const {
    std::string names;
    for (auto p : g_.params) names += (names.empty() ? "" : ", ") + s_.def.parameters[p].name;
    diagnostic d;
    d.file = s_.def.file;
    d.message = "space '" + s_.def.name + "' is too large to build: the parameters {" + names +
                "} are tied by constraints and have more than " + std::to_string(max_nodes) +
                " valid partial configs";
    d.hint = "declare the parameters that constraints test first, so constraints prune earlier";
    throw space_error({d});
  }

  [[noreturn]] void throw_too_much_work() const {
    std::string names;
    for (auto p : g_.params) names += (names.empty() ? "" : ", ") + s_.def.parameters[p].name;
    diagnostic d;
    d.file = s_.def.file;
    d.message = "space '" + s_.def.name + "' is too costly to build: checking the constraints " +
                "that tie {" + names + "} needs more than " + std::to_string(max_work) +
                " steps (docs/limits.md)";
    d.hint =
        "a constraint over several large domains is tried on every combination of their values: "
        "narrow the domains, or derive one parameter from the others with let";
    throw space_error({d});
  }

  space::impl& s_;
  group_tree& g_;
  std::vector<std::uint64_t>& rejected_;
  std::uint64_t& work_;
  std::vector<std::int64_t> values_;
  std::vector<std::uint32_t> indices_ = std::vector<std::uint32_t>(values_.size(), 0);
  std::vector<std::uint64_t> suffix_;
  std::vector<std::vector<tree_node>> raw_;
  std::size_t total_ = 0;
  std::ptrdiff_t deepest_ = -1;
};

/// The position of `param` in `g.params`.
std::size_t level_of(const group_tree& g, std::size_t param) {
  return static_cast<std::size_t>(std::find(g.params.begin(), g.params.end(), param) -
                                  g.params.begin());
}

std::size_t attach_level(const group_tree& g, const std::vector<std::size_t>& inputs,
                         std::size_t floor) {
  std::size_t level = floor;
  for (auto i : inputs) level = std::max(level, level_of(g, i));
  return level;
}

std::vector<group_tree> make_groups(const space::impl& s) {
  const auto root = union_groups(s);
  std::vector<group_tree> groups;
  std::vector<std::size_t> group_of_root(root.size(), max_u64);
  for (std::size_t p = 0; p < root.size(); ++p) {
    auto& slot = group_of_root[root[p]];
    if (slot == max_u64) {
      slot = groups.size();
      groups.emplace_back();
    }
    groups[slot].params.push_back(p);
  }
  for (auto& g : groups) g.checks.resize(g.params.size());
  for (std::size_t c = 0; c < s.constraints.size(); ++c) {
    const auto& inputs = s.constraints[c].inputs;
    if (inputs.empty()) continue;
    auto& g = groups[group_of_root[root[inputs.front()]]];
    g.checks[attach_level(g, inputs, 0)].push_back({level_check::kind::constraint, c});
  }
  for (std::size_t p = 0; p < s.whens.size(); ++p) {
    if (!s.whens[p]) continue;
    auto& g = groups[group_of_root[root[p]]];
    g.checks[attach_level(g, s.whens[p]->inputs, level_of(g, p))].push_back(
        {level_check::kind::activity, p});
  }
  return groups;
}

std::string describe(const space::impl& s, std::size_t c) {
  const auto& con = s.def.constraints[c];
  std::string text = "'" + con.text + "'";
  if (!con.message.empty()) text += " (\"" + con.message + "\")";
  if (con.line > 0) text += " at line " + std::to_string(con.line);
  return text;
}

[[noreturn]] void throw_empty(const space::impl& s, const group_tree& g, std::size_t level,
                              const std::vector<std::uint64_t>& rejected) {
  std::optional<std::size_t> worst;
  std::string culprit;
  if (level < g.checks.size()) {
    for (const auto& check : g.checks[level]) {
      if (check.type == level_check::kind::activity) {
        if (culprit.empty())
          culprit =
              "the 'when' condition of parameter '" + s.def.parameters[check.index].name + "'";
        continue;
      }
      if (!worst || rejected[check.index] > rejected[*worst]) worst = check.index;
    }
  }
  std::uint64_t count = 0;
  if (worst) {
    culprit = "constraint " + describe(s, *worst);
    count = rejected[*worst];
  }
  throw empty_space_error("space '" + s.def.name + "' has no valid config: " + culprit +
                              " rejects every config that reaches it (" + std::to_string(count) +
                              " rejected in all)",
                          worst ? s.def.constraints[*worst].text : culprit, count);
}

void check_constant_constraints(const space::impl& s, std::uint64_t cartesian) {
  for (std::size_t c = 0; c < s.constraints.size(); ++c) {
    if (!s.constraints[c].inputs.empty()) continue;
    const auto v = s.eval.run(s.constraints[c], nullptr);
    if (v.ok() && v.value != 0) continue;
    throw empty_space_error("space '" + s.def.name + "' has no valid config: constraint " +
                                describe(s, c) + " is false whatever the parameters (" +
                                std::to_string(cartesian) + " configs rejected)",
                            s.def.constraints[c].text, cartesian);
  }
}

}  // namespace

void build_trees(space::impl& s) {
  const auto& params = s.def.parameters;
  std::uint64_t cartesian = 1;
  s.log10_cartesian = 0;
  for (const auto& p : params) {
    cartesian = saturating_mul(cartesian, cartesian_of(p));
    s.log10_cartesian += std::log10(static_cast<double>(cartesian_of(p)));
  }
  s.cartesian = cartesian == max_u64 ? std::nullopt : std::optional<std::uint64_t>(cartesian);
  check_constant_constraints(s, cartesian);

  s.groups = make_groups(s);
  s.group_of.assign(params.size(), 0);
  s.stats.assign(s.constraints.size(), {});
  s.infos.clear();
  std::vector<std::uint64_t> rejected(s.constraints.size(), 0);
  std::uint64_t work = 0;
  for (std::size_t gi = 0; gi < s.groups.size(); ++gi) {
    auto& g = s.groups[gi];
    tree_builder builder(s, g, rejected, work);
    builder.build();
    if (g.count == 0) throw_empty(s, g, builder.deepest_rejecting_level(), rejected);
    std::uint64_t nodes = 0;
    for (const auto& level : g.levels) nodes += level.size();
    s.infos.push_back({g.params, g.count, nodes});
    for (auto p : g.params) s.group_of[p] = gi;
  }

  // Counts multiply across groups; a config's rank is mixed-radix over groups.
  s.count = 1;
  for (std::size_t gi = s.groups.size(); gi-- > 0;) {
    s.groups[gi].stride = s.count;
    if (__builtin_mul_overflow(s.count, s.groups[gi].count, &s.count)) {
      diagnostic d;
      d.file = s.def.file;  // rendered as "FILE: error: ...", as the other limits are
      d.message = "space '" + s.def.name + "' has more than 2^64 valid configs";
      throw space_error({d});
    }
  }

  // A config is rejected by the first failing constraint in group order, so
  // rejections within group g scale by the valid counts of earlier groups and
  // the Cartesian sizes of later ones; then rejections + count = Cartesian.
  std::vector<std::uint64_t> scale(s.groups.size(), 1);
  for (std::size_t gi = 0; gi < s.groups.size(); ++gi)
    for (std::size_t other = 0; other < s.groups.size(); ++other) {
      if (other == gi) continue;
      std::uint64_t factor = s.groups[other].count;
      if (other > gi) {
        factor = 1;
        for (auto p : s.groups[other].params)
          factor = saturating_mul(factor, cartesian_of(params[p]));
      }
      scale[gi] = saturating_mul(scale[gi], factor);
    }
  for (std::size_t c = 0; c < s.constraints.size(); ++c) {
    const auto& inputs = s.constraints[c].inputs;
    if (inputs.empty()) continue;
    const auto gi = s.group_of[inputs.front()];
    const auto& g = s.groups[gi];
    s.stats[c] = {g.params[attach_level(g, inputs, 0)], saturating_mul(rejected[c], scale[gi])};
  }
}

}  // namespace tessel::detail

namespace tessel {

config space::impl::unrank(std::uint64_t rank) const {
  config c(std::vector<config::index_type>(def.parameters.size(), 0));
  for (const auto& g : groups) {
    std::uint64_t r = (rank / g.stride) % g.count;
    std::uint32_t first = 0;
    auto n = static_cast<std::uint32_t>(g.levels.empty() ? 0 : g.levels[0].size());
    for (std::size_t level = 0; level < g.levels.size(); ++level) {
      const auto* begin = g.levels[level].data() + first;
      const auto* it = std::upper_bound(
          begin, begin + n, r,
          [](std::uint64_t v, const detail::tree_node& node) { return v < node.rank_begin; });
      const auto& node = *(it - 1);
      r -= node.rank_begin;
      c[g.params[level]] = node.index;
      first = node.first_child;
      n = node.child_count;
    }
  }
  return c;
}

std::optional<std::uint64_t> space::impl::rank_of(const config& c) const {
  if (c.size() != def.parameters.size()) return std::nullopt;
  std::uint64_t rank = 0;
  for (const auto& g : groups) {
    std::uint64_t r = 0;
    std::uint32_t first = 0;
    auto n = static_cast<std::uint32_t>(g.levels.empty() ? 0 : g.levels[0].size());
    for (std::size_t level = 0; level < g.levels.size(); ++level) {
      const auto* begin = g.levels[level].data() + first;
      const auto want = c[g.params[level]];
      const auto* it = std::lower_bound(
          begin, begin + n, want,
          [](const detail::tree_node& node, std::uint32_t v) { return node.index < v; });
      if (it == begin + n || it->index != want) return std::nullopt;
      r += it->rank_begin;
      first = it->first_child;
      n = it->child_count;
    }
    rank += r * g.stride;
  }
  return rank;
}

}  // namespace tessel
