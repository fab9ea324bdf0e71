// The agent ops (tessel/ops.hpp): one implementation behind `tessel serve`,
// `tessel mcp` and Python's Study.
#include <tessel/ops.hpp>

#include <tessel/backends.hpp>
#include <tessel/codec.hpp>
#include <tessel/did_you_mean.hpp>
#include <tessel/driver.hpp>
#include <tessel/interactions.hpp>
#include <tessel/model_driver.hpp>
#include <tessel/sim.hpp>
#include <tessel/space_check.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace tessel {
namespace {

using json = nlohmann::json;

/// `v` as one line of JSON; invalid UTF-8 in user text is replaced, never thrown.
std::string one_line(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

[[noreturn]] void bad(std::string_view op, const std::string& message) {
  throw op_error(op_error_kind::bad_arguments, fmt::format("{}: {}", op, message));
}

/// model_spec's fields by the arguments that set them (model_spec::from_json):
/// the model ops name what the client sent, not the library's field.
constexpr std::pair<std::string_view, std::string_view> model_arguments[] = {
    {"model_spec.file", "file"},
    {"model_spec.scheduler", "scheduler"},
    {"model_spec.cost_budget_s", "cost_budget"},
    {"model_spec.no_db", "no_db"},
};

/// The model rules worded for the command line (the budget rule names
/// --budget and --cost-budget), by their field, in a JSON client's words.
constexpr std::pair<std::string_view, std::string_view> model_rules[] = {
    {"tune-model", R"(needs a budget: "budget" (evaluations) or "cost_budget" (seconds))"},
};

/// Reads and checks one op's arguments, naming the op and field in each error.
class arguments {
 public:
  arguments(std::string_view op, const json& a) : op_(op), a_(a) {}

  [[nodiscard]] bool has(const char* key) const { return a_.contains(key) && !a_[key].is_null(); }

  [[nodiscard]] std::uint64_t trial_id(const char* key = "trial_id") const {
    if (!has(key)) bad(op_, fmt::format("needs \"{}\" (the trial's id, from ask or enqueue)", key));
    return whole(key, 0, 1, std::numeric_limits<std::uint64_t>::max());
  }

  /// Field `key` as a whole number in [low, high], or `fallback` when absent.
  /// 1.5, -1, "7" and 1e19 are errors, not 1, 2^64-1, 7 or a wrap; 2.0 is 2.
  [[nodiscard]] std::uint64_t whole(const char* key, std::uint64_t fallback, std::uint64_t low,
                                    std::uint64_t high) const {
    if (!has(key)) return fallback;
    const auto& v = a_[key];
    std::uint64_t n = 0;
    if (v.is_number_unsigned()) {
      n = v.get<std::uint64_t>();
    } else if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {  // a C++ caller's int
      n = static_cast<std::uint64_t>(v.get<std::int64_t>());
    } else if (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>() &&
               v.get<double>() >= 0 && v.get<double>() < 1e18) {
      n = static_cast<std::uint64_t>(v.get<double>());
    } else {
      bad(op_, fmt::format("\"{}\" must be a whole number from {} to {}, not {}", key, low, high,
                           one_line(v)));
    }
    if (n < low || n > high)
      bad(op_, fmt::format("\"{}\" must be from {} to {}, not {}", key, low, high, n));
    return n;
  }

  /// Field `key` as a finite number >= min, or `fallback` when absent.
  [[nodiscard]] double number(const char* key, double fallback, double min = 0) const {
    if (!has(key)) return fallback;
    const auto& v = a_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() >= min))
      bad(op_, min == 0 ? fmt::format("\"{}\" must be a number >= 0, not {}", key, one_line(v))
                        : fmt::format("\"{}\" must be a finite number, not {}", key, one_line(v)));
    return v.get<double>();
  }

  [[nodiscard]] std::string text(const char* key, std::string fallback = {}) const {
    if (!has(key)) return fallback;
    if (!a_[key].is_string()) bad(op_, fmt::format("\"{}\" must be a string", key));
    return a_[key].get<std::string>();
  }

  /// A config object; parameters left out take their defaults. Checked valid.
  [[nodiscard]] config config_of(const space& s, const char* key = "config") const {
    if (!has(key))
      bad(op_, fmt::format("needs \"{}\": an object of parameter names to values (parameters "
                           "left out take their defaults; see the space op)",
                           key));
    if (!a_[key].is_object())
      bad(op_, fmt::format("\"{}\" must be an object of parameter names to values, got {}", key,
                           one_line(a_[key])));
    config c;
    try {
      c = s.from_partial_json(a_[key].dump());
    } catch (const error& e) {  // named when it is not the usual "config"
      bad(op_, std::string_view(key) == "config" ? std::string(e.what())
                                                 : fmt::format("\"{}\": {}", key, e.what()));
    }
    if (const auto why = s.why_invalid(c); !why.empty())
      bad(op_, fmt::format("{} {} is not valid: {}", key, s.to_json(c), why));
    return c;
  }

  [[nodiscard]] provenance provenance_of(std::string fallback) const {
    return {text("source", std::move(fallback)), number("tokens", 0), text("note")};
  }

  [[nodiscard]] const json& raw() const { return a_; }

 private:
  std::string_view op_;
  const json& a_;
};

}  // namespace

json space_json(const space& s) {
  constexpr std::size_t max_values = 512;
  json params = json::array();
  for (const auto& p : s.parameters()) {
    json entry = {{"name", p.name},
                  {"kind", to_string(p.dom.kind)},
                  {"values", domain_values_json(p.dom, max_values)},
                  {"size", p.dom.size()},
                  {"default", codec::value_json(p.dom, p.default_index.value_or(0))},
                  {"default_declared", p.default_index.has_value()},
                  {"conditional", static_cast<bool>(p.when)}};
    if (p.dom.size() > max_values) entry["values_truncated"] = true;
    if (p.dom.log_scale) entry["log_scale"] = true;
    params.push_back(entry);
  }
  const auto& def = s.def();
  json constants = json::object();
  for (const auto& k : def.constants)
    constants[k.name] = k.type == value_type::symbol && k.value >= 0 &&
                                static_cast<std::size_t>(k.value) < def.symbols.size()
                            ? json(def.symbols[static_cast<std::size_t>(k.value)])
                            : json(k.value);
  json lets = json::array();
  for (const auto& l : def.lets) lets.push_back(l.name);
  json constraints = json::array();
  for (const auto& c : def.constraints)
    constraints.push_back({{"text", c.text}, {"message", c.message}});
  json target = {{"name", def.target.name}, {"constants", json::object()}};
  if (!def.target.base.empty()) target["base"] = def.target.base;
  for (const auto& [name, v] : def.target.constants) target["constants"][name] = v;
  const auto base = s.default_config();
  return {{"name", s.name()},
          {"parameters", params},
          {"constants", constants},
          {"lets", lets},
          {"constraints", constraints},
          {"target", target},
          {"valid_configs", s.count()},
          {"default_config", base ? json::parse(s.to_json(*base)) : json(nullptr)}};
}

namespace {

measurement measurement_of(const arguments& a) {
  codec::measurement_report r;
  try {
    r = codec::read_measurement(a.raw());
  } catch (const error& e) {
    bad("tell", e.what());
  }
  measurement m;
  m.status = r.status.value_or(status::ok);
  if (m.ok()) {
    if (!r.objective)
      bad("tell", "status ok needs a numeric \"objective\" (seconds; lower is better)");
    if (!std::isfinite(*r.objective)) bad("tell", "\"objective\" must be a finite number");
    m.objective = *r.objective;
  }
  m.message = std::move(r.message);
  m.samples = std::move(r.samples);
  m.cost = {r.compile_s.value_or(0), r.gate_s.value_or(0), r.run_s.value_or(0)};
  m.metrics = std::move(r.metrics);
  return m;
}

json failures_json(const space& s, const std::vector<trial>& trials) {
  std::map<std::string, json> by_status;
  std::size_t total = 0;
  for (const auto& t : trials) {
    if (t.state != trial_state::finished || t.result.ok()) continue;
    ++total;
    auto& entry = by_status[std::string(to_string(t.result.status))];
    if (entry.is_null()) entry = {{"count", 0}, {"examples", json::array()}};
    entry["count"] = entry["count"].get<std::size_t>() + 1;
    if (entry["examples"].size() < 3)
      entry["examples"].push_back({{"trial_id", t.id},
                                   {"message", t.result.message},
                                   {"config", codec::config_json(s, t.config)}});
  }
  json out = json::array();
  for (auto& [st, entry] : by_status) {
    entry["status"] = st;
    out.push_back(entry);
  }
  return {{"failed", total}, {"by_status", out}};
}

const char* status_hint(status st) {
  switch (st) {
    case status::invalid: return "the config is outside the space or unknown to the backend";
    case status::compile_error:
      return "it did not build: often a resource overflow (SBUF, PSUM); try smaller tiles or "
             "fewer buffers";
    case status::runtime_error: return "it crashed or the backend failed; see the message";
    case status::timeout: return "it ran past the time limit";
    case status::incorrect:
      return "its outputs differ from the reference in the equivalence gate: the schedule is wrong";
    case status::suspicious:
      return "its outputs look forged (constant, non-deterministic, or faster than the roofline)";
    case status::ok: return "it succeeded";
  }
  return "";
}

}  // namespace

json explanation_json(const sim_explanation& e, const space& s, const config& c) {
  json path = json::array();
  for (const auto& [what, share] : e.critical_path)
    path.push_back({{"what", what}, {"share", share}});
  // Suggestions are limited to knobs the space has (sim_backend::analyse); one
  // that moves a knob the space lacks is kept apart, as a hint to add that parameter.
  json suggestions = e.suggestions, outside = json::array();
  for (const auto& [knob, text] : e.outside_space)
    outside.push_back({{"parameter", knob}, {"suggestion", text}});
  return {{"config", codec::config_json(s, c)},
          {"workload", e.workload},
          {"target", e.target},
          {"latency_s", e.latency_s},
          {"roofline_s", e.roofline_s},
          {"roofline_bound", e.roofline_bound},
          {"bottleneck", e.bottleneck},
          {"busy", e.busy},
          {"critical_path", path},
          {"suggestions", suggestions},
          {"outside_space", outside}};
}

json interactions_json(const interaction_report& r, const space& s) {
  auto point = [&](const interaction_point& p) {
    json changes = json::array();
    for (const auto i : p.changes) changes.push_back(r.changes[i]);
    const auto gain = r.gain(p);
    return json{{"changes", changes},
                {"config", codec::config_json(s, p.c)},
                {"objective", p.objective ? json(*p.objective) : json(nullptr)},
                {"gain", gain ? json(*gain) : json(nullptr)},
                {"basis", !p.objective ? json(nullptr)
                          : p.measured ? json("measured")
                                       : json("predicted")},
                {"note", p.note}};
  };
  auto design = [&](const std::vector<interaction_point>& points) {
    json out = json::array();
    for (const auto& p : points) out.push_back(point(p));
    return out;
  };
  return {{"changes", r.changes},
          {"base", point(r.base)},
          {"target", point(r.target)},
          {"alone", design(r.alone)},
          {"without", design(r.without)},
          {"pairs", design(r.pairs)},
          {"only_together", r.only_together()},
          {"measured", r.measured},
          {"spent", r.spent},
          {"predicted", r.predicted},
          {"text", r.text()}};
}

// --- ops --------------------------------------------------------------------------------------

struct agent_ops::observer_bridge final : observer {
  progress_sink sink;
  std::size_t start = 0, total = 0;
  void on_trial(const trial& t, const tessel::progress& p) override {
    if (!sink) return;
    sink(static_cast<double>(p.evaluations - start), static_cast<double>(total),
         fmt::format("trial {}: {}{}", t.id, to_string(t.result.status),
                     t.result.ok() ? fmt::format(" {:.6g} s", t.result.objective) : ""));
  }
};

agent_ops::agent_ops(study& st, std::shared_ptr<tessel::backend> backend, bool evaluates)
    : study_(st),
      backend_(std::move(backend)),
      observer_(std::make_shared<observer_bridge>()),
      evaluates_(evaluates) {
  study_.add_observer(observer_);
}

agent_ops::~agent_ops() = default;

const sim_backend& agent_ops::simulator() {
  if (const auto* sim = dynamic_cast<const sim_backend*>(backend_.get())) return *sim;
  if (!own_simulator_) {
    try {
      auto b = make_backend("sim", {});
      b->prepare(study_.space());
      own_simulator_ = std::move(b);
    } catch (const std::exception& e) {
      throw op_error(op_error_kind::unavailable,
                     fmt::format("explain needs the simulator, and it cannot model space '{}': {}",
                                 study_.space().name(), e.what()));
    }
  }
  return dynamic_cast<const sim_backend&>(*own_simulator_);
}

std::string agent_ops::report_text() const { return study_.current_summary().full_report(); }

std::string agent_ops::best_config() const {
  const auto* b = study_.best();
  return b ? codec::config_json(study_.space(), b->config).dump(2) : std::string("null");
}

std::string agent_ops::best_trace() {
  const auto* b = study_.best();
  if (!b) throw op_error(op_error_kind::unavailable, "no successful trial yet: nothing to trace");
  const auto& sim = simulator();
  const auto path = std::filesystem::temp_directory_path() /
                    fmt::format("tessel-trace-{}-{}.json", study_.space().name(), b->id);
  sim.write_trace(study_.space(), b->config, path);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  return text.str();
}

namespace {

const op_info& info_of(std::string_view name) {
  const auto& list = op_list();
  const auto info =
      std::find_if(list.begin(), list.end(), [&](const op_info& o) { return o.name == name; });
  if (info != list.end()) return *info;
  std::vector<std::string> names;
  for (const auto& o : list) names.push_back(o.name);
  throw op_error(op_error_kind::unknown_op,
                 unknown_name("op", name, fmt::format("'{}'", name), names,
                              fmt::format("use {}", fmt::join(names, ", "))));
}

/// Refuses an argument the op's schema does not name ("op" and "id" are the transport's).
void check_names(const op_info& info, const json& given) {
  const auto& properties = (*info.arguments)["properties"];
  for (const auto& [key, v] : given.items()) {
    if (properties.contains(key) || key == "op" || key == "id") continue;
    std::vector<std::string> known;
    for (const auto& [k, _] : properties.items()) known.push_back(k);
    bad(info.name, unknown_name("argument", key, fmt::format("\"{}\"", key), known,
                                known.empty() ? std::string("takes no arguments")
                                              : fmt::format("takes: {}", fmt::join(known, ", "))));
  }
}

json best_json(const study& st) {
  const auto* b = st.best();
  return b ? codec::to_json(st.space(), *b) : json(nullptr);
}

json trials_json(const study& st) {
  json out = json::array();
  for (const auto& t : st.trials()) out.push_back(codec::to_json(st.space(), t));
  return out;
}

const trial& trial_of(const study& st, const arguments& a, std::string_view op) {
  const auto id = a.trial_id();
  if (id > st.trials().size()) bad(op, fmt::format("no trial {}", id));
  return st.trials()[id - 1];
}

/// The config an op is about: "config", else trial "trial_id"'s, else the best trial's.
config subject_of(const study& st, const arguments& a, std::string_view op) {
  if (a.has("config")) return a.config_of(st.space());
  if (a.has("trial_id")) return trial_of(st, a, op).config;
  if (const auto* b = st.best()) return b->config;
  bad(op, "no successful trial yet: give a \"config\" or a \"trial_id\"");
}

/// "status: hint — message", the status said once: a gate verdict's message
/// opens with its status, which is not repeated (outcome_text's rule).
std::string why_text(status st, std::string_view message) {
  const auto name = to_string(st);
  const auto text = outcome_text(st, message);  // "status" or "status: message"
  const auto rest = std::string_view(text).substr(name.size());
  return fmt::format("{}: {}{}", name, status_hint(st),
                     rest.empty() ? std::string() : " — " + std::string(rest.substr(2)));
}

/// why_failed: whether a config is valid, why one trial failed, or every failure.
json why_failed_of(const study& st, const arguments& a) {
  const auto& s = st.space();
  if (a.has("config")) {
    if (!a.raw()["config"].is_object()) bad("why_failed", "\"config\" must be an object");
    config c;
    try {
      c = s.from_partial_json(a.raw()["config"].dump());
    } catch (const error& e) {
      return {{"valid", false}, {"why", e.what()}};
    }
    const auto why = s.why_invalid(c);
    return {{"config", codec::config_json(s, c)}, {"valid", why.empty()}, {"why", why}};
  }
  if (!a.has("trial_id")) return failures_json(s, st.trials());
  const auto& t = trial_of(st, a, "why_failed");
  json out = {{"trial", codec::to_json(s, t)}};
  out["why"] = t.state != trial_state::finished ? std::string("the trial has not finished")
                                                : why_text(t.result.status, t.result.message);
  return out;
}

/// Tells `sink` of each evaluation of a model's tuning.
class model_progress final : public model_observer {
 public:
  model_progress(const model_study& m, progress_sink sink, std::size_t total)
      : model_(m), sink_(std::move(sink)), total_(total) {}
  void on_evaluation(std::size_t kernel, const trial& t, std::optional<double> step_s) override {
    sink_(static_cast<double>(++done_), static_cast<double>(total_),
          fmt::format("{} trial {}: {}; step {}", model_.member(kernel).name, t.id,
                      to_string(t.result.status),
                      step_s ? fmt::format("{:.6g} s", *step_s) : std::string("-")));
  }

 private:
  const model_study& model_;
  progress_sink sink_;
  std::size_t total_;
  std::size_t done_ = 0;
};

/// tune_model: a model's kernels tuned under one budget (tessel/model_driver.hpp).
json tune_model_of(const json& given, const progress_sink& progress) {
  auto tuning = open_model_tuning(model_spec::from_json(given));
  if (progress)
    tuning.study.add_observer(
        std::make_shared<model_progress>(tuning.study, progress, tuning.spec.budget));
  tuning.run();
  return {{"tuning", tuning.to_json()}};
}

json help_of(const arguments& a) {
  json out = json::array();
  const auto only = a.text("op");
  for (const auto& o : op_list())
    if (only.empty() || o.name == only)
      out.push_back({{"op", o.name}, {"description", o.description}, {"arguments", *o.arguments}});
  if (out.empty()) bad("help", fmt::format("no op '{}'", only));
  return {{"ops", out}};
}

}  // namespace

json agent_ops::call(std::string_view name, const json& raw, const progress_sink& progress) {
  static const json empty = json::object();
  const json& given = raw.is_null() ? empty : raw;
  if (!given.is_object())
    bad(name, fmt::format("arguments must be a JSON object, got {}", one_line(given)));
  check_names(info_of(name), given);
  try {
    return dispatch(name, given, progress);
  } catch (const op_error&) {
    throw;
  } catch (const options_error& e) {
    for (const auto& [field, argument] : model_arguments)
      if (e.field() == field)
        bad(name, e.renamed(fmt::format("argument \"{}\"", argument), " = ").what());
    for (const auto& [field, rule] : model_rules)
      if (e.field() == field) bad(name, std::string(rule));
    bad(name, e.what());
  } catch (const std::exception& e) {
    // The study refuses what the caller got wrong (an unknown or finished
    // trial, an invalid config) with tessel::error: the caller must act.
    const std::string what = e.what();
    throw op_error(op_error_kind::bad_arguments, what.starts_with(std::string(name) + ":")
                                                     ? what
                                                     : fmt::format("{}: {}", name, what));
  }
}

void agent_ops::need_backend(std::string_view name) const {
  if (!evaluates_)
    throw op_error(op_error_kind::unavailable,
                   fmt::format("{}: this session has no backend, so tessel cannot measure: "
                               "measure configs yourself and use ask, enqueue and tell (or "
                               "restart with --backend SPEC)",
                               name));
}

json agent_ops::dispatch(std::string_view name, const json& given, const progress_sink& progress) {
  const arguments a(name, given);
  const auto& s = study_.space();
  if (name == "space") return {{"space", space_json(s)}};
  if (name == "ask") {
    json out = json::array();
    for (const auto& sug : study_.ask(a.whole("n", 1, 0, max_ask)))
      out.push_back(codec::to_json(s, study_.trials().at(sug.trial_id - 1)));
    return {{"suggestions", out}};
  }
  if (name == "tell") {
    const auto id = a.trial_id();
    const auto m = measurement_of(a);
    const auto& t = study_.tell(id, m, a.number("tokens", 0));
    return {{"trial", codec::to_json(s, t)}, {"best", best_json(study_)}};
  }
  if (name == "enqueue") {
    const auto id = study_.enqueue(a.config_of(s), a.provenance_of("agent"));
    return {{"trial_id", id ? json(*id) : json(nullptr)}, {"duplicate", !id.has_value()}};
  }
  if (name == "evaluate") {
    need_backend(name);
    const auto c = a.config_of(s);
    return {{"trial", codec::to_json(s, study_.evaluate(c, a.provenance_of("agent")))}};
  }
  if (name == "run") return run_op(given, progress);
  if (name == "best") return {{"best", best_json(study_)}};
  if (name == "trials") return {{"trials", trials_json(study_)}};
  if (name == "explain") return explain_op(given);
  if (name == "interactions") return interactions_op(given);
  if (name == "why_failed") return why_failed_of(study_, a);
  if (name == "verify") {
    need_backend(name);
    const auto n = study_.verify(a.whole("max", 1, 1, max_ask));
    return {{"verified", n}, {"best", best_json(study_)}};
  }
  if (name == "summary") {
    const auto sum = study_.current_summary();
    return {{"summary", codec::to_json(sum, s)}, {"report", sum.full_report()}};
  }
  if (name == "model") return {{"step", default_step_json(model_spec::from_json(given))}};
  if (name == "tune_model") return tune_model_of(given, progress);
  if (name == "help") return help_of(a);
  if (name == "quit") {
    done_ = true;
    return json::object();
  }
  throw op_error(op_error_kind::unknown_op,
                 fmt::format("op '{}' is in the op table but has no handler", name));
}

json agent_ops::run_op(const json& given, const progress_sink& progress) {
  need_backend("run");
  const arguments a("run", given);
  const auto n = a.whole("evaluations", 1, 0, max_run);
  const auto before = study_.current_summary().evaluations;
  auto until = stop::evaluations(before + n);
  if (a.has("target"))
    until = until || stop::target(a.number("target", 0, -std::numeric_limits<double>::infinity()));
  observer_->sink = progress;
  observer_->start = before;
  observer_->total = n;
  summary sum;
  try {
    sum = study_.run(until);
  } catch (...) {
    observer_->sink = nullptr;
    throw;
  }
  observer_->sink = nullptr;
  return {{"summary", codec::to_json(sum, study_.space())}, {"best", best_json(study_)}};
}

json agent_ops::explain_op(const json& given) {
  const arguments a("explain", given);
  const auto& s = study_.space();
  const config c = subject_of(study_, a, "explain");
  return {{"explanation", explanation_json(simulator().analyse(s, c), s, c)}};
}

json agent_ops::interactions_op(const json& given) {
  const arguments a("interactions", given);
  const auto& s = study_.space();
  const config target = subject_of(study_, a, "interactions");
  config base;
  if (a.has("against")) {
    base = a.config_of(s, "against");
  } else if (const auto c = s.default_config()) {
    base = *c;
  } else {
    bad("interactions", "the baseline is not a valid config: give \"against\"");
  }
  const auto budget = a.whole("budget", 0, 0, max_run);
  if (budget > 0) need_backend("interactions with a \"budget\" above 0");
  // Each measurement is a gated trial of the study (kept, and free the next time).
  const interaction_measure measure = [&](const config& c,
                                          std::string& why) -> std::optional<double> {
    const auto& t = study_.evaluate(c, {"agent/interactions", 0, ""});
    if (t.result.ok()) return t.result.objective;
    why = outcome_text(t.result.status, t.result.message);
    return std::nullopt;
  };
  const auto model = fitted_surrogate(s, study_.trials());
  const auto r = analyse_interactions(s, base, target, budget > 0 ? measure : interaction_measure{},
                                      model.get(), budget, study_.trials());
  return {{"interactions", interactions_json(r, s)}};
}

}  // namespace tessel
