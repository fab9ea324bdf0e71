// cores.cpp: the default split of a config over the physical cores of a
// logical NeuronCore (workload::plan_cores, docs/simulator.md "Logical
// cores"). With lnc = 2 a kernel runs as two instances that share HBM and
// each own a physical core's engines, SBUF and PSUM (Neuron docs, "Logical
// NeuronCore configuration" and NKI "Using Logical NeuronCores"); a kernel
// gives each instance part of the data. The default cuts one integer
// constant of the space (the workload's split dimension: rows of a matmul
// or of a row-wise kernel, tokens of an MLP, heads) into two shares, the
// first rounded up to a multiple of the partitions (rows and tokens fill
// 128-partition tiles; heads, whole problems of their own, are split by
// ones), and plans each share alone.
#include "workload.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {
namespace {

/// The spaces with one constant changed, kept while in use: planning a share
/// reads the space like any other (constants, lets), without its constraints.
/// A share is found by its content (the whole space's name, source and
/// constants, and the constant changed), compared against the share space
/// itself: no key is built, and the cheap fields are compared first.
class share_spaces {
 public:
  std::shared_ptr<const space> get(const space& s, const std::string& name, std::int64_t value) {
    const std::lock_guard lock(mutex_);
    for (const auto& e : cache_)
      if (e.value == value && e.name == name && made_from(*e.made, s, name)) return e.made;
    if (cache_.size() > 64) cache_.clear();
    space::definition def = s.def();
    def.constraints.clear();  // the share need not meet the whole problem's requires
    for (auto& k : def.constants)
      if (k.name == name) k.value = value;
    auto made = std::make_shared<const space>(std::move(def));
    cache_.push_back({name, value, made});
    return made;
  }

 private:
  struct entry {
    std::string name;  ///< the constant changed, and its value in `made`
    std::int64_t value = 0;
    std::shared_ptr<const space> made;
  };

  /// Whether `share` is `whole` with constant `name` changed: the same name,
  /// source and constants but that one.
  static bool made_from(const space& share, const space& whole, const std::string& name) {
    const auto &a = share.def(), &b = whole.def();
    if (a.constants.size() != b.constants.size()) return false;
    for (std::size_t i = 0; i < a.constants.size(); ++i) {
      const constant &x = a.constants[i], &y = b.constants[i];
      if (x.name != y.name || (x.value != y.value && x.name != name)) return false;
    }
    return a.name == b.name && a.source == b.source;
  }

  std::mutex mutex_;
  std::vector<entry> cache_;
};

/// What the first share of `dimension` is rounded up to a multiple of.
std::int64_t granule(const std::string& dimension, const machine& m) {
  return dimension == "heads" ? 1 : m.partitions;
}

share_spaces& shares() {
  static share_spaces instance;
  return instance;
}

}  // namespace

std::shared_ptr<const space> space_with_constant(const space& s, const std::string& name,
                                                 std::int64_t value) {
  return shares().get(s, name, value);
}

std::vector<double> wait_at_barrier(const std::vector<double>& barrier_ns) {
  std::vector<double> waits(barrier_ns.size(), 0.0);
  if (barrier_ns.size() < 2 ||
      std::any_of(barrier_ns.begin(), barrier_ns.end(), [](double t) { return t < 0; }))
    return waits;
  const double release = *std::max_element(barrier_ns.begin(), barrier_ns.end());
  for (std::size_t i = 0; i < waits.size(); ++i) waits[i] = release - barrier_ns[i];
  return waits;
}

std::size_t slowest_after_barrier(const std::vector<double>& latency_ns,
                                  const std::vector<double>& barrier_ns,
                                  std::vector<double>& core_ns) {
  const auto waits = wait_at_barrier(barrier_ns);
  const std::size_t first = core_ns.size();
  std::size_t slowest = 0;
  for (std::size_t k = 0; k < latency_ns.size(); ++k) {
    core_ns.push_back(latency_ns[k] + waits[k]);
    if (core_ns[first + k] > core_ns[first + slowest]) slowest = k;
  }
  return slowest;
}

std::vector<std::int64_t> workload::core_shares(const space& s, const machine& m) const {
  const std::string dim = core_split_dimension();
  const constant* k = nullptr;
  for (const auto& x : s.def().constants)
    if (x.name == dim && x.type == value_type::integer) k = &x;
  if (!k) return {};
  const std::int64_t unit = granule(dim, m);
  const std::int64_t first = std::min(k->value, (k->value / 2 + unit - 1) / unit * unit);
  if (m.cores < 2 || first <= 0 || first >= k->value) return {k->value};  // one core runs it all
  return {first, k->value - first};
}

std::vector<std::unique_ptr<workload_plan>> workload::plan_cores(const space& s, const config& c,
                                                                 const machine& m,
                                                                 const workload_plan* whole) const {
  std::vector<std::unique_ptr<workload_plan>> out;
  const auto sizes = core_shares(s, m);
  if (sizes.size() < 2) {  // one core runs it all: the whole problem's plan (copied when given)
    auto copy = whole ? whole->clone() : nullptr;
    out.push_back(copy ? std::move(copy) : plan_config(s, c, m));
    return out;
  }
  const std::string dim = core_split_dimension();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    // an even split: the same space and config, the same plan (copied, not read again)
    const bool same = i > 0 && sizes[i] == sizes[i - 1];
    auto copy = same ? out.back()->clone() : nullptr;
    out.push_back(copy ? std::move(copy) : plan_config(*shares().get(s, dim, sizes[i]), c, m));
    out.back()->same_as_previous = same;
  }
  return out;
}

}  // namespace tessel::sim
