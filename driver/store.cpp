// store.cpp: opening a study file from the spec's `db`, reading a study
// back from one, and the config a person names (a JSON object, or a study
// file's best) (tessel/driver.hpp).
#include "request.hpp"

#include <tessel/driver.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace tessel {

stored_study reopen_study(const std::string& db) {
  const auto store = open_store(db, store_access::read);
  auto record = store->study();
  if (!record) throw error(fmt::format("'{}' holds no study yet", store->location()));
  const auto spec = recorded_spec(*record);
  auto s = parse_space(record->space_source, space_parse_options(db, spec), record->space_name);
  auto trials = store->load(s);
  return {std::move(*record), std::move(spec), std::move(s), std::move(trials)};
}

study_spec recorded_spec(const study_record& record) {
  study_spec spec;
  const auto options = nlohmann::json::parse(record.options_json, nullptr, false);
  if (!options.is_object()) return spec.resolved();
  if (options.contains("annotations")) spec = study_spec::from_json(options["annotations"]);
  // What the study ran with, whoever made it (Python's annotations leave these out).
  spec.seed = record.seed;
  if (const auto jobs = options.find("jobs"); jobs != options.end() && jobs->is_number_unsigned())
    spec.jobs = jobs->get<std::size_t>();
  if (const auto w = options.find("window"); w != options.end() && w->is_number_unsigned())
    spec.window = w->get<std::size_t>();
  if (const auto b = options.find("evaluate_baseline"); b != options.end() && b->is_boolean())
    spec.baseline = b->get<bool>();
  return spec.resolved();
}

std::span<const recorded_field> recorded_fields() {
  static constexpr recorded_field fields[] = {
      // What evaluates (with its settings) and the target: tune --resume needs neither.
      {"backend", "--backend", "backend", {}, true},
      {"target", "--target", "target", {}, true},
      {"strategy", "--strategy", "strategy"},
      {"seed", "--seed", "seed"},
      {"scheduler", "--scheduler", "scheduler"},
      {"cost_alpha", "--cost-alpha", "cost_alpha"},
      {"cost_rule", "--cost-rule", "cost_rule"},
      {"min_gain", "--min-gain", "min_gain"},
      {"window", "--window", "window"},
      {"jobs", "--jobs", "jobs"},
      {"baseline", "--no-baseline", "baseline"},
      {"budget_hint", "--budget", "budget_hint", "--budget-hint"},
      {"cost_budget_hint_s", "--cost-budget", "cost_budget_hint_s", "--cost-budget-hint"},
      {"token_price_s", "--token-price", "token_price"},
  };
  return fields;
}

std::vector<std::string> resume_notes(
    const std::vector<resumed_option>& options,
    const std::function<std::string(const recorded_field& field, const std::string& value_json)>&
        text,
    std::string_view separator, std::string_view proposer) {
  const auto fields = recorded_fields();
  std::vector<std::string> taken, kept, began;
  for (const auto& o : options) {
    const auto& f = *std::find_if(fields.begin(), fields.end(),
                                  [&o](const recorded_field& r) { return r.field == o.field; });
    if (o.taken) {
      taken.push_back(text(f, o.recorded));
    } else {
      kept.push_back(text(f, o.given));
      began.push_back(text(f, o.recorded));
    }
  }
  std::vector<std::string> notes;
  if (!taken.empty())
    notes.push_back(fmt::format("resuming with {}, as it began (as the study recorded it)",
                                fmt::join(taken, separator)));
  if (!kept.empty())
    notes.push_back(fmt::format(
        "begun with {}; {} proposes with {} as given (leave {} out to continue it as it began)",
        fmt::join(began, separator), proposer, fmt::join(kept, separator),
        kept.size() == 1 ? "it" : "them"));
  return notes;
}

std::string keyword_text(const recorded_field& field, const std::string& value_json) {
  const auto value = nlohmann::json::parse(value_json);
  const std::string keyword(field.keyword);
  if (value.is_boolean()) return keyword + (value.get<bool>() ? "=True" : "=False");
  if (value.is_string()) return fmt::format("{}='{}'", keyword, value.get<std::string>());
  return keyword + "=" + value.dump();
}

std::vector<resumed_option> take_recorded(
    study_spec& spec, const study_spec& recorded,
    const std::function<option_said(const recorded_field& field)>& said) {
  auto mine = spec.to_json();
  const auto theirs = recorded.to_json();
  std::vector<resumed_option> out;
  for (const auto& r : recorded_fields()) {
    const auto field = r.field;
    const std::string key(field);
    const auto how = said(r);
    if (how == option_said::cannot || mine[key] == theirs[key]) continue;
    if (field == "jobs" && mine["window"] != 0) continue;  // no effect (window is taken first)
    out.push_back({key, mine[key].dump(), theirs[key].dump(), how == option_said::left_out});
    if (!out.back().taken) continue;
    mine[key] = theirs[key];
    if (field != "backend") continue;
    auto settings = theirs["backend_settings"];  // those given (tune --resume's) on top
    for (const auto& [name, value] : mine["backend_settings"].items()) settings[name] = value;
    mine["backend_settings"] = std::move(settings);
  }
  if (std::any_of(out.begin(), out.end(), [](const auto& o) { return o.taken; }))
    spec = study_spec::from_json(mine);
  return out;
}

const trial* best_trial(const stored_study& stored) {
  const trial* best = nullptr;
  for (const auto& t : stored.trials)
    if (t.state == trial_state::finished && t.result.ok() && !t.result.low_fidelity() &&
        (!best || t.result.objective < best->result.objective))
      best = &t;
  return best;
}

namespace {

std::string read_config_text(const std::string& spec) {
  if (spec.empty() || spec.front() != '@') return spec;
  try {
    return read_text_file(spec.substr(1));
  } catch (const error& e) {
    throw error(fmt::format("--config: {}", e.what()));
  }
}

}  // namespace

config chosen_config(const space& s, const std::string& config_spec, const std::string& best_db) {
  if (!best_db.empty()) {
    const auto stored = reopen_study(best_db);
    const trial* best = best_trial(stored);
    if (!best)
      throw error(fmt::format("{} '{}' has no successful trial yet", study_kind(best_db), best_db));
    return s.from_json(stored.space.to_json(best->config));
  }
  nlohmann::json given;
  auto why = parse_request(read_config_text(config_spec), given);  // where the text breaks
  if (why.empty() && !given.is_object()) why = "not a JSON object";
  if (!why.empty())
    throw error(
        "--config expects a JSON object of parameter names to values, e.g. "
        "'{\"tile_m\": 128}', or @PATH of a file holding one; " +
        why);
  const config c = s.from_partial_json(given.dump());
  if (!s.is_valid(c))
    throw error(fmt::format("the config {} is not valid in space '{}': {}", s.to_json(c), s.name(),
                            s.why_invalid(c)));
  return c;
}

}  // namespace tessel
