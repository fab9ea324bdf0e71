// chosen_config (study_setup.hpp): the config `explain` and `emit` act on,
// from --config JSON|@PATH or the best trial of --best DB.
#include "study_setup.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace tessel::cli {

namespace {

std::string read_config_text(const std::string& spec) {
  if (spec.empty() || spec.front() != '@') return spec;
  std::ifstream in(spec.substr(1), std::ios::binary);
  if (!in) throw error(fmt::format("--config: cannot read '{}'", spec.substr(1)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

/// The config named by --config/--best (study_setup.hpp): parameters the JSON leaves out take their
/// value in the space's baseline (its declared defaults), so a person can name only what they want
/// to change.
config chosen_config(const space& s, const std::string& config_spec, const std::string& best_db) {
  if (!best_db.empty()) {
    const auto stored = load_stored(best_db);
    const trial* best = nullptr;
    for (const auto& t : stored.trials)
      if (t.result.ok() && (!best || t.result.objective < best->result.objective)) best = &t;
    if (!best) throw error(fmt::format("study file '{}' has no successful trial yet", best_db));
    return s.from_json(stored.space.to_json(best->config));
  }
  const auto given = nlohmann::json::parse(read_config_text(config_spec), nullptr, false);
  if (given.is_discarded() || !given.is_object())
    throw error(
        "--config expects a JSON object of parameter names to values, e.g. "
        "'{\"tile_m\": 128}', or @PATH of a file holding one");
  const config c = s.from_partial_json(given.dump());
  if (!s.is_valid(c))
    throw error(fmt::format("the config {} is not valid in space '{}': {}", s.to_json(c), s.name(),
                            s.why_invalid(c)));
  return c;
}

}  // namespace tessel::cli
