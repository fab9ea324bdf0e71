// export_trials: a study's trials as T4 JSON, CSV or JSON lines
// (storage.hpp; docs/storage.md describes each format).
#include <tessel/codec.hpp>
#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace tessel {
namespace {

using ordered_json = nlohmann::ordered_json;

void check_config(const trial& t, const space& s) {
  if (t.config.size() != s.size())
    throw error("cannot export trial " + std::to_string(t.id) + ": its config has " +
                std::to_string(t.config.size()) + " values, space '" + s.name() + "' has " +
                std::to_string(s.size()) + " parameters");
}

/// `{"tile_m": 512, "order": ["k", "m", "n"], "evict": "vector", "prefetch": null}`
/// in the space's parameter order (space::to_json sorts by name).
ordered_json configuration(const trial& t, const space& s) {
  check_config(t, s);
  ordered_json out = ordered_json::object();
  for (std::size_t p = 0; p < s.size(); ++p) {
    const auto v = s.value_of(t.config, p);
    auto& slot = out[s.parameters()[p].name];
    if (!v.active) continue;  // stays null
    switch (v.kind) {
      case param_kind::integer: slot = v.integer; break;
      case param_kind::boolean: slot = v.integer != 0; break;
      case param_kind::symbol: slot = v.symbol; break;
      case param_kind::permutation: slot = v.order; break;
    }
  }
  return out;
}

// --- T4 ------------------------------------------------------------------------

/// Kernel Tuner's timestamp form, "2023-12-22 09:54:05.502007+00:00", of
/// Unix time `t` (UTC).
std::string timestamp(double t) {
  using namespace std::chrono;
  if (!std::isfinite(t)) t = 0;
  // A damaged study file may hold any time: keep it within years 1970..9999,
  // where the conversions below cannot overflow (found by fuzz_study_file).
  t = std::clamp(t, 0.0, 253402300799.0);  // 9999-12-31 23:59:59
  const auto us = sys_time<microseconds>(microseconds(std::llround(t * 1e6)));
  const auto day = floor<days>(us);
  const year_month_day ymd(day);
  const hh_mm_ss hms(us - day);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}+00:00", int(ymd.year()),
                     unsigned(ymd.month()), unsigned(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
}

/// T4's `invalidity` for a status (the schema's enum).
const char* invalidity(status st) {
  switch (st) {
    case status::ok: return "correct";
    case status::invalid: return "constraints";
    case status::compile_error: return "compile";
    case status::runtime_error: return "runtime";
    case status::timeout: return "timeout";
    case status::incorrect:
    case status::suspicious: return "correctness";
  }
  return "runtime";
}

/// What Kernel Tuner writes in place of a failed config's time.
const char* failed_value(status st) {
  switch (st) {
    case status::compile_error: return "CompilationFailedConfig";
    case status::runtime_error:
    case status::timeout: return "RuntimeFailedConfig";
    default: return "InvalidConfig";
  }
}

ordered_json t4_result(const trial& t, const study_record& record, const space& s) {
  const auto& m = t.result;
  ordered_json r;
  r["timestamp"] = timestamp(record.created_at + t.finished_at);
  r["configuration"] = configuration(t, s);
  ordered_json times;
  times["compilation"] = m.cost.compile_s;
  times["benchmark"] = m.cost.run_s;
  times["framework"] = 0.0;
  times["search_algorithm"] = 0.0;
  times["validation"] = m.cost.gate_s;
  if (m.ok()) times["runtimes"] = m.samples;
  r["times"] = times;
  r["invalidity"] = invalidity(m.status);
  r["correctness"] = m.ok() ? 1 : 0;
  ordered_json measurements = ordered_json::array();
  ordered_json time{{"name", "time"}, {"value", nullptr}, {"unit", "s"}};
  if (m.ok())
    time["value"] = m.objective;
  else
    time["value"] = failed_value(m.status);
  measurements.push_back(time);
  for (const auto& [name, v] : m.metrics)
    measurements.push_back({{"name", name}, {"value", v}, {"unit", ""}});
  r["measurements"] = measurements;
  r["objectives"] = {"time"};
  return r;
}

std::string dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

/// One result per line, so large studies stay compact and diffs stay readable.
void write_t4(std::ostream& out, const study_record& record, const std::vector<trial>& trials,
              const space& s) {
  const ordered_json metadata = {{"timeunit", "seconds"},       {"generator", "tessel"},
                                 {"space", record.space_name},  {"space_hash", record.space_hash},
                                 {"target", record.target},     {"backend", record.backend},
                                 {"strategy", record.strategy}, {"seed", record.seed}};
  out << "{\"schema_version\": \"1.0.0\",\n \"metadata\": " << dump(metadata)
      << ",\n \"results\": [";
  bool first = true;
  for (const auto& t : trials) {
    if (t.state != trial_state::finished) continue;
    out << (first ? "\n  " : ",\n  ") << dump(t4_result(t, record, s));
    first = false;
  }
  out << (first ? "]}\n" : "\n ]}\n");
}

// --- CSV -------------------------------------------------------------------------

/// RFC 4180 quoting: a field with a comma, quote, CR or LF (or leading or
/// trailing space) is quoted, quotes doubled.
std::string csv_field(std::string_view text) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!quote) return std::string(text);
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + '"';
}

/// Shortest text that reads back to the same double ("nan", "inf" when not finite).
std::string csv_number(double v) { return fmt::format("{}", v); }

void write_csv(std::ostream& out, const std::vector<trial>& trials, const space& s) {
  out << "id,state,source,status,objective,compile_s,gate_s,run_s";
  for (const auto& p : s.parameters()) out << ',' << csv_field(p.name);
  out << '\n';
  for (const auto& t : trials) {
    check_config(t, s);
    out << t.id << ',' << to_string(t.state) << ',' << csv_field(t.provenance.source);
    if (t.state == trial_state::finished) {
      const auto& m = t.result;
      // A failure has no objective: an empty field, so sorting by it never
      // puts failures ahead of measured configs.
      out << ',' << to_string(m.status) << ',' << (m.ok() ? csv_number(m.objective) : std::string())
          << ',' << csv_number(m.cost.compile_s) << ',' << csv_number(m.cost.gate_s) << ','
          << csv_number(m.cost.run_s);
    } else {
      out << ",,,,,";
    }
    for (std::size_t p = 0; p < s.size(); ++p) {
      const auto v = s.value_of(t.config, p);
      out << ',' << (v.active ? csv_field(v.to_string()) : std::string());
    }
    out << '\n';
  }
}

// --- JSON lines: one trial per line, in the codec's form ----------------------

void write_json_lines(std::ostream& out, const std::vector<trial>& trials, const space& s) {
  for (const auto& t : trials) {
    check_config(t, s);
    out << codec::to_json(s, t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << '\n';
  }
}

}  // namespace

export_format parse_export_format(std::string_view name) {
  if (name == "t4") return export_format::t4;
  if (name == "csv") return export_format::csv;
  if (name == "json" || name == "jsonl") return export_format::json;
  throw error("unknown export format '" + std::string(name) + "' (known: t4, csv, json)");
}

std::string_view to_string(export_format f) noexcept {
  switch (f) {
    case export_format::t4: return "t4";
    case export_format::csv: return "csv";
    case export_format::json: return "json";
  }
  return "?";
}

void export_trials(std::ostream& out, export_format format, const study_record& record,
                   const std::vector<trial>& trials, const space& s) {
  switch (format) {
    case export_format::t4: write_t4(out, record, trials, s); break;
    case export_format::csv: write_csv(out, trials, s); break;
    case export_format::json: write_json_lines(out, trials, s); break;
  }
}

}  // namespace tessel
