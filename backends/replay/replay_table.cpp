// replay_table.cpp: reading Kernel Tuner cache files and T4 results files
// (data/bench/README.md describes both) into one table of measured configs.
#include "replay/replay_values.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>

namespace tessel {

// Not ordered_json: its objects insert in linear time, quadratic over a
// Kernel Tuner cache's thousands of keys.
using json = nlohmann::json;

namespace {

/// The most bytes a replay file may hold, after gunzip (docs/limits.md): a
/// gzip bomb stops here instead of at the memory's end.
constexpr std::size_t max_replay_bytes = std::size_t{256} << 20;

/// The whole file, gunzipped if it is gzip (zlib reads plain files as they are).
std::string read_file(const std::filesystem::path& path) {
  gzFile file = ::gzopen(path.c_str(), "rb");
  if (file == nullptr) throw error(fmt::format("replay: cannot open {}", path.string()));
  std::string text;
  std::array<char, 1 << 16> chunk{};
  for (;;) {
    const int n = ::gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      std::string why = ::gzerror(file, &code);
      ::gzclose(file);
      throw error(fmt::format("replay: cannot read {}: {}", path.string(), why));
    }
    if (n == 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(n));
    if (text.size() > max_replay_bytes) {
      ::gzclose(file);
      throw error(fmt::format("replay: {} holds more than {} MiB of JSON (docs/limits.md)",
                              path.string(), max_replay_bytes >> 20));
    }
  }
  ::gzclose(file);
  return text;
}

double number_or_zero(const json& record, const char* name) {
  const auto it = record.find(name);
  return it != record.end() && it->is_number() ? it->get<double>() : 0.0;
}

/// The status a recorded failure string stands for (Kernel Tuner's ErrorConfig names).
status failure_status(std::string_view recorded) {
  if (recorded == "CompilationFailedConfig") return status::compile_error;
  if (recorded == "InvalidConfig") return status::invalid;
  return status::runtime_error;
}

/// T4's `invalidity` field (kernel_tuner/schema/T4/1.0.0/results-schema.json).
status invalidity_status(std::string_view invalidity) {
  if (invalidity == "correct") return status::ok;
  if (invalidity == "compile") return status::compile_error;
  if (invalidity == "timeout") return status::timeout;
  if (invalidity == "correctness") return status::incorrect;
  if (invalidity == "constraints") return status::invalid;
  return status::runtime_error;
}

/// Milliseconds per unit of a T4 file's `metadata.timeunit`.
double t4_unit_to_ms(const json& doc, const std::filesystem::path& path) {
  const auto meta = doc.find("metadata");
  if (meta == doc.end() || !meta->is_object() || !meta->contains("timeunit")) return 1.0;
  const auto unit = (*meta)["timeunit"].get<std::string>();
  if (unit == "milliseconds" || unit == "miliseconds" || unit == "ms") return 1.0;
  if (unit == "seconds" || unit == "s") return 1000.0;
  if (unit == "microseconds" || unit == "us") return 1e-3;
  if (unit == "nanoseconds" || unit == "ns") return 1e-6;
  throw error(fmt::format("replay: {}: unknown metadata.timeunit '{}'", path.string(), unit));
}

/// The keys of the first `"configuration"` object in a T4 text, in file order
/// (the parsed document sorts them): the order its parameters are declared in.
std::vector<std::string> first_configuration_keys(const std::string& text) {
  const auto at = text.find("\"configuration\"");
  const auto open = at == std::string::npos ? at : text.find('{', at);
  if (open == std::string::npos) return {};
  bool in_string = false;
  for (std::size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '}') {
      const auto object =
          nlohmann::ordered_json::parse(text.substr(open, i - open + 1), nullptr, false);
      std::vector<std::string> keys;
      if (object.is_object())
        for (const auto& [key, v] : object.items()) keys.push_back(key);
      return keys;
    }
  }
  return {};
}

}  // namespace

/// Fills a replay_table from a parsed document.
struct replay_loader {
  replay_table& table;

  std::uint32_t value_index(std::size_t p, const std::string& text) {
    auto& index = table.value_index_[p];
    if (const auto it = index.find(text); it != index.end()) return it->second;
    const auto i = static_cast<std::uint32_t>(table.parameters_[p].values.size());
    table.parameters_[p].values.push_back(text);
    index.emplace(text, i);
    return i;
  }

  void add_parameter(std::string name) {
    table.parameters_.push_back({std::move(name), {}});
    table.value_index_.emplace_back();
  }

  void add_entry(replay_table::entry e) {
    config key(e.values);
    if (table.by_values_.contains(key)) return;  // a repeated record: the first one counts
    table.by_values_.emplace(std::move(key), static_cast<std::uint32_t>(table.entries_.size()));
    if (e.status == status::ok) table.valid_times_.push_back(e.time_ms);
    table.entries_.push_back(std::move(e));
  }

  /// Numbers in a record that are neither a parameter nor a known field.
  void collect_metrics(const json& record, const std::set<std::string, std::less<>>& skip,
                       replay_table::entry& e) {
    for (const auto& [key, v] : record.items())
      if (v.is_number() && !skip.contains(key)) e.metrics[key] = v.get<double>();
  }

  void kernel_tuner(const json& doc) {
    table.format_ = replay_table::file_format::kernel_tuner;
    const auto& keys = doc.at("tune_params_keys");
    const auto params = doc.find("tune_params");
    for (const auto& k : keys) {
      add_parameter(k.get<std::string>());
      if (params != doc.end() && params->contains(table.parameters_.back().name))
        for (const auto& v : (*params)[table.parameters_.back().name])
          value_index(table.parameters_.size() - 1, detail::normalize_value(v));
    }
    std::set<std::string, std::less<>> skip{
        "time",           "times",          "compile_time",  "verification_time",
        "benchmark_time", "framework_time", "strategy_time", "timestamp"};
    for (const auto& p : table.parameters_) skip.insert(p.name);
    for (const auto& [key, record] : doc.at("cache").items()) {
      replay_table::entry e;
      const auto split = detail::split_key(key);
      for (std::size_t p = 0; p < table.parameters_.size(); ++p) {
        const auto field = record.find(table.parameters_[p].name);
        std::string text = field != record.end() ? detail::normalize_value(*field)
                           : p < split.size()    ? detail::normalize_text(split[p])
                                                 : std::string("None");
        e.values.push_back(value_index(p, text));
      }
      const auto time = record.find("time");
      if (time != record.end() && time->is_number()) {
        e.time_ms = time->get<double>();
        if (const auto times = record.find("times"); times != record.end() && times->is_array())
          for (const auto& t : *times)
            if (t.is_number()) e.times_ms.push_back(t.get<double>());
      } else {
        e.failure = time == record.end() ? "no time recorded"
                    : time->is_string()  ? time->get<std::string>()
                                         : time->dump();
        e.status = failure_status(e.failure);
      }
      e.compile_ms = number_or_zero(record, "compile_time");
      e.verification_ms = number_or_zero(record, "verification_time");
      e.benchmark_ms = number_or_zero(record, "benchmark_time");
      e.framework_ms = number_or_zero(record, "framework_time");
      e.strategy_ms = number_or_zero(record, "strategy_time");
      collect_metrics(record, skip, e);
      add_entry(std::move(e));
    }
  }

  void t4(const json& doc, const std::string& text, const std::filesystem::path& path) {
    table.format_ = replay_table::file_format::t4;
    const double to_ms = t4_unit_to_ms(doc, path);
    const auto& results = doc.at("results");
    if (results.empty()) throw error(fmt::format("replay: {}: no results", path.string()));
    const auto& first = results.front().at("configuration");
    auto keys = first_configuration_keys(text);
    if (keys.size() != first.size() ||
        !std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return first.contains(k); })) {
      keys.clear();  // not found in the text as expected: fall back to sorted order
      for (const auto& [key, v] : first.items()) keys.push_back(key);
    }
    for (auto& name : keys) add_parameter(std::move(name));
    // T4 declares no domains: collect the observed values, numbers ascending.
    for (const auto& r : results)
      for (std::size_t p = 0; p < table.parameters_.size(); ++p) {
        const auto& configuration = r.at("configuration");
        if (!configuration.contains(table.parameters_[p].name) ||
            configuration.size() != table.parameters_.size())
          throw error(fmt::format("replay: {}: results do not all configure the same parameters",
                                  path.string()));
        value_index(p, detail::normalize_value(configuration[table.parameters_[p].name]));
      }
    for (std::size_t p = 0; p < table.parameters_.size(); ++p) {
      auto& values = table.parameters_[p].values;
      detail::sort_values(values);
      table.value_index_[p].clear();
      for (std::uint32_t i = 0; i < values.size(); ++i) table.value_index_[p].emplace(values[i], i);
    }
    for (const auto& r : results) add_entry(t4_entry(r, to_ms));
  }

  replay_table::entry t4_entry(const json& r, double to_ms) {
    replay_table::entry e;
    for (std::size_t p = 0; p < table.parameters_.size(); ++p)
      e.values.push_back(value_index(
          p, detail::normalize_value(r.at("configuration")[table.parameters_[p].name])));
    const std::string objective = r.contains("objectives") && !r["objectives"].empty()
                                      ? r["objectives"].front().get<std::string>()
                                      : std::string("time");
    const json* value = nullptr;
    if (const auto ms = r.find("measurements"); ms != r.end())
      for (const auto& m : *ms) {
        if (!m.contains("value")) continue;
        if (m.value("name", "") == objective)
          value = &m["value"];
        else if (m["value"].is_number())
          e.metrics[m.value("name", "")] = m["value"].get<double>();
      }
    const auto invalidity = r.value("invalidity", std::string("correct"));
    e.status = invalidity_status(invalidity);
    if (e.status == status::ok && value != nullptr && value->is_number()) {
      e.time_ms = value->get<double>() * to_ms;
    } else {
      e.failure = value != nullptr && value->is_string() ? value->get<std::string>() : invalidity;
      if (e.status == status::ok) e.status = failure_status(e.failure);
    }
    if (const auto times = r.find("times"); times != r.end()) {
      e.compile_ms = number_or_zero(*times, "compilation") * to_ms;
      e.verification_ms = number_or_zero(*times, "validation") * to_ms;
      e.framework_ms = number_or_zero(*times, "framework") * to_ms;
      e.strategy_ms = number_or_zero(*times, "search_algorithm") * to_ms;
      // T4 records no benchmarking wall time: the runs themselves stand for it.
      if (const auto runs = times->find("runtimes"); runs != times->end() && runs->is_array())
        for (const auto& t : *runs)
          if (t.is_number()) e.benchmark_ms += t.get<double>() * to_ms;
      if (e.status == status::ok && times->contains("runtimes"))
        for (const auto& t : (*times)["runtimes"])
          if (t.is_number()) e.times_ms.push_back(t.get<double>() * to_ms);
    }
    return e;
  }
};

double replay_table::entry::cost_s(bool with_framework) const noexcept {
  double ms = compile_ms + verification_ms + benchmark_ms;
  if (with_framework) ms += framework_ms + strategy_ms;
  return ms / 1000.0;
}

std::shared_ptr<const replay_table> replay_table::load(const std::filesystem::path& path) {
  const auto text = read_file(path);
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    throw error(
        fmt::format("replay: {} is not a JSON object (a Kernel Tuner cache or T4 results file)",
                    path.string()));
  std::shared_ptr<replay_table> table(new replay_table);
  table->path_ = path;
  replay_loader loader{*table};
  try {
    if (doc.contains("cache") && doc.contains("tune_params_keys")) {
      table->device_name_ = doc.value("device_name", "");
      table->kernel_name_ = doc.value("kernel_name", "");
      loader.kernel_tuner(doc);
    } else if (doc.contains("results") && doc["results"].is_array()) {
      loader.t4(doc, text, path);
    } else {
      throw error(
          fmt::format("replay: {} is neither a Kernel Tuner cache file (no 'cache' and "
                      "'tune_params_keys') nor a T4 results file (no 'results' array)",
                      path.string()));
    }
  } catch (const json::exception& e) {
    throw error(fmt::format("replay: {}: unexpected content: {}", path.string(), e.what()));
  }
  std::sort(table->valid_times_.begin(), table->valid_times_.end());
  return table;
}

const replay_table::entry* replay_table::find(const std::vector<std::uint32_t>& values) const {
  const auto it = by_values_.find(config(values));
  return it == by_values_.end() ? nullptr : &entries_[it->second];
}

const replay_table::entry* replay_table::find_text(const std::vector<std::string>& values) const {
  if (values.size() != parameters_.size()) return nullptr;
  std::vector<std::uint32_t> indices;
  for (std::size_t p = 0; p < values.size(); ++p) {
    const auto it = value_index_[p].find(detail::normalize_text(values[p]));
    if (it == value_index_[p].end()) return nullptr;
    indices.push_back(it->second);
  }
  return find(indices);
}

std::optional<std::uint32_t> replay_table::value_index(std::size_t column,
                                                       std::string_view text) const {
  const auto it = value_index_.at(column).find(detail::normalize_text(text));
  if (it == value_index_[column].end()) return std::nullopt;
  return it->second;
}

std::uint64_t replay_table::cartesian_size() const noexcept {
  std::uint64_t product = 1;
  for (const auto& p : parameters_) {
    if (p.values.empty()) return 0;
    if (product > std::numeric_limits<std::uint64_t>::max() / p.values.size())
      return std::numeric_limits<std::uint64_t>::max();
    product *= p.values.size();
  }
  return product;
}

double replay_table::optimum() const {
  if (valid_times_.empty())
    throw error(fmt::format("replay: {} has no successful config", path_.string()));
  return valid_times_.front();
}

double replay_table::median() const {
  if (valid_times_.empty())
    throw error(fmt::format("replay: {} has no successful config", path_.string()));
  const auto n = valid_times_.size();
  return n % 2 == 1 ? valid_times_[n / 2] : (valid_times_[n / 2 - 1] + valid_times_[n / 2]) / 2;
}

}  // namespace tessel
