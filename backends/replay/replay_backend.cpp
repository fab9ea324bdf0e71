// replay_backend.cpp: a backend that looks configs up in a replay_table.
#include "replay/replay_values.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

namespace tessel {

/// How a space's configs map to table entries: for each space parameter, its
/// table column and each domain index's value index in that column.
struct replay_backend::mapping {
  static constexpr std::uint32_t absent = std::numeric_limits<std::uint32_t>::max();
  space owner;                      ///< keeps the definition (our identity) alive
  std::vector<std::size_t> column;  ///< space parameter -> table parameter
  std::vector<std::vector<std::uint32_t>>
      index;                            ///< [space parameter][domain index] -> value index
  std::vector<std::uint32_t> inactive;  ///< value index of "None" per space parameter
};

namespace {

/// The text a table would hold for domain index i of `d`.
std::string table_text(const domain& d, std::size_t i) {
  switch (d.kind) {
    case param_kind::integer: return std::to_string(d.values[i]);
    case param_kind::boolean: return d.values[i] != 0 ? "1" : "0";
    case param_kind::symbol: return detail::normalize_text(d.labels[i]);
    case param_kind::permutation: {
      std::vector<std::string> order;
      for (auto e : d.permutation(i)) order.push_back(d.labels[e]);
      return fmt::format("{}", fmt::join(order, ","));
    }
  }
  return {};
}

void check_parameters(const replay_table& t, const space& s) {
  std::vector<std::string> missing_from_space, missing_from_table;
  for (const auto& p : t.parameters())
    if (!s.parameter_index(p.name)) missing_from_space.push_back(p.name);
  for (const auto& p : s.parameters())
    if (std::none_of(t.parameters().begin(), t.parameters().end(),
                     [&](const auto& q) { return q.name == p.name; }))
      missing_from_table.push_back(p.name);
  if (missing_from_space.empty() && missing_from_table.empty()) return;
  std::vector<std::string> parts;
  if (!missing_from_space.empty())
    parts.push_back(fmt::format("the space lacks {}", fmt::join(missing_from_space, ", ")));
  if (!missing_from_table.empty())
    parts.push_back(fmt::format("the table lacks {}", fmt::join(missing_from_table, ", ")));
  std::vector<std::string> names;
  for (const auto& p : t.parameters()) names.push_back(p.name);
  throw error(
      fmt::format("replay: space '{}' does not match the parameters of {}: {} (the table has: {}; "
                  "`tessel::replay_space_source` writes a matching space)",
                  s.name(), t.path().string(), fmt::join(parts, "; "), fmt::join(names, ", ")));
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 1.0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

cost recorded_cost(const replay_table::entry& e, bool with_framework) {
  cost paid;
  paid.compile_s = e.compile_ms / 1000.0;
  paid.gate_s = e.verification_ms / 1000.0;
  paid.run_s = (e.benchmark_ms + (with_framework ? e.framework_ms + e.strategy_ms : 0.0)) / 1000.0;
  return paid;
}

}  // namespace

replay_backend::replay_backend(const std::filesystem::path& path, options opts)
    : replay_backend(replay_table::load(path), opts) {}

replay_backend::replay_backend(std::shared_ptr<const replay_table> table, options opts)
    : table_(std::move(table)), options_(opts) {
  if (!table_) throw error("replay_backend: no table");
  if (options_.concurrency == 0)
    throw options_error("replay_options::concurrency", "must be at least 1");
  std::vector<double> costs;
  for (const auto& e : table_->entries()) costs.push_back(e.cost_s(options_.count_framework_time));
  median_cost_s_ = median_of(std::move(costs));
}

std::string replay_backend::name() const { return "replay:" + table_->path().string(); }

std::optional<std::string> replay_backend::hardware() const {
  const auto& device = table_->device_name();
  return "replay of " + (device.empty() ? std::string("an unnamed device") : device);
}

void replay_backend::prepare(const space& s) { (void)mapping_for(s); }

std::shared_ptr<const replay_backend::mapping> replay_backend::mapping_for(const space& s) const {
  const std::lock_guard lock(mutex_);
  if (mapping_ && &mapping_->owner.def() == &s.def()) return mapping_;
  check_parameters(*table_, s);
  auto m = std::make_shared<mapping>(mapping{s, {}, {}, {}});
  for (std::size_t p = 0; p < s.size(); ++p) {
    const auto& param = s.parameters()[p];
    std::size_t column = 0;
    while (table_->parameters()[column].name != param.name) ++column;
    m->column.push_back(column);
    auto& index = m->index.emplace_back();
    for (std::size_t i = 0; i < param.dom.size(); ++i)
      index.push_back(
          table_->value_index(column, table_text(param.dom, i)).value_or(mapping::absent));
    m->inactive.push_back(table_->value_index(column, "None").value_or(mapping::absent));
  }
  mapping_ = m;
  return m;
}

const replay_table::entry* replay_backend::lookup(const space& s, const config& c) const {
  const auto m = mapping_for(s);
  if (c.size() != s.size()) return nullptr;
  std::vector<std::uint32_t> values(table_->parameters().size(), mapping::absent);
  for (std::size_t p = 0; p < c.size(); ++p) {
    const auto i = c[p];
    const auto v = i == config::inactive    ? m->inactive[p]
                   : i < m->index[p].size() ? m->index[p][i]
                                            : mapping::absent;
    if (v == mapping::absent) return nullptr;
    values[m->column[p]] = v;
  }
  return table_->find(values);
}

measurement replay_backend::evaluate(const space& s, const config& c) {
  const auto* e = lookup(s, c);
  if (e == nullptr)
    return measurement::failure(status::invalid,
                                "not in the replay table: the kernel's restrictions exclude it");
  const auto paid = recorded_cost(*e, options_.count_framework_time);
  // The table records ms; a measurement's objective and samples are seconds.
  measurement m = e->status == status::ok
                      ? measurement::success(e->time_ms * 1e-3, paid)
                      : measurement::failure(e->status, "recorded as " + e->failure, paid);
  m.samples.reserve(e->times_ms.size());
  for (const double ms : e->times_ms) m.samples.push_back(ms * 1e-3);
  m.metrics = e->metrics;
  m.metrics["recorded_framework_s"] = e->framework_ms / 1000.0;
  m.metrics["recorded_strategy_s"] = e->strategy_ms / 1000.0;
  return m;
}

double replay_backend::estimated_cost(const space& s, const config& c) const {
  if (options_.exact_cost_estimate)
    if (const auto* e = lookup(s, c)) return e->cost_s(options_.count_framework_time);
  return median_cost_s_;
}

}  // namespace tessel
