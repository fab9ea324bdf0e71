// spec.cpp: study_spec's rules and its JSON form (tessel/driver.hpp).
#include "json_fields.hpp"

#include <tessel/driver.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace tessel {
namespace {

using json = nlohmann::json;

[[noreturn]] void invalid(std::string_view field, const std::string& rule) {
  throw options_error(fmt::format("study_spec.{}", field), rule);
}

void finite_non_negative(std::string_view field, double v) {
  if (!(v >= 0) || !std::isfinite(v))
    invalid(field, fmt::format("must be finite and >= 0, not {}", v));
}

template <class T>
void read(const json& j, const char* key, T& out) {
  json_fields::read("study spec", j, key, out);
}

}  // namespace

bool study_budget::bounded() const noexcept {
  return evaluations > 0 || wall_s > 0 || cost_s > 0 || target.has_value() || patience > 0 ||
         high_evaluations > 0;
}

bool is_replay_file(const std::filesystem::path& path) {
  const auto ext = path.extension().string();
  return ext == ".json" || ext == ".gz";
}

study_spec study_spec::resolved() const {
  auto out = *this;
  const auto on_cpu = [](const std::string& spec) {
    return spec == "cpu" || spec.starts_with("cpu:");
  };
  if (out.target.empty())
    out.target = on_cpu(backend) || (!fidelity.empty() && on_cpu(fidelity.back())) ? "cpu" : "trn2";
  return out;
}

void study_spec::validate() const {
  if (replay_space != "product" && replay_space != "table")
    invalid("replay_space", fmt::format("must be product or table, not '{}'", replay_space));
  if (replay_space == "table" && !is_replay_file(file))
    throw options_error(
        "study_spec.replay_space", "table",
        fmt::format("applies to a replay FILE (.json or .json.gz), not '{}'", file));
  if (scheduler != "utility" && scheduler != "fifo")
    invalid("scheduler", fmt::format("must be utility or fifo, not '{}'", scheduler));
  if (cost_rule != "cooled_ei" && cost_rule != "gittins")
    invalid("cost_rule", fmt::format("must be cooled_ei or gittins, not '{}'", cost_rule));
  if (!fidelity.empty() && fidelity.size() != 2)
    invalid("fidelity", fmt::format("give exactly two, the low fidelity first (e.g. --fidelity "
                                    "sim:target=trn2 --fidelity trainium:...); got {}",
                                    fidelity.size()));
  if (!fidelity.empty() && !backend.empty())
    invalid("fidelity", "replaces backend: give one or the other");
  if (budget.high_evaluations > 0 && fidelity.empty())
    throw options_error("study_spec.budget.high_evaluations", budget.high_evaluations,
                        "counts high-fidelity evaluations; it needs --fidelity");
  if (verify && backend.empty() && fidelity.empty() && !is_replay_file(file))
    invalid("verify",
            "re-measures agent-reported results on the backend; give one with --backend SPEC");
  finite_non_negative("cost_alpha", cost_alpha);
  finite_non_negative("min_gain", min_gain);
  finite_non_negative("cost_budget_hint_s", cost_budget_hint_s);
  finite_non_negative("token_price_s", token_price_s);
  finite_non_negative("budget.wall_s", budget.wall_s);
  finite_non_negative("budget.cost_s", budget.cost_s);
}

json study_spec::to_json() const {
  json out = {{"file", file},
              {"space", space},
              {"target", target},
              {"set", sets},
              {"replay_space", replay_space},
              {"backend", backend},
              {"backend_settings", backend_settings},
              {"fidelity", fidelity},
              {"fidelity_settings", fidelity_settings},
              {"gate", gate},
              {"strategy", strategy},
              {"scheduler", scheduler},
              {"cost_alpha", cost_alpha},
              {"cost_rule", cost_rule},
              {"min_gain", min_gain},
              {"budget_hint", budget_hint},
              {"cost_budget_hint_s", cost_budget_hint_s},
              {"token_price_s", token_price_s},
              {"seed", seed},
              {"jobs", jobs},
              {"window", window},
              {"baseline", baseline},
              {"verify", verify},
              {"db", db},
              {"budget",
               {{"evaluations", budget.evaluations},
                {"wall_s", budget.wall_s},
                {"cost_s", budget.cost_s},
                {"target", budget.target ? json(*budget.target) : json(nullptr)},
                {"patience", budget.patience},
                {"high_evaluations", budget.high_evaluations}}}};
  return out;
}

study_spec study_spec::from_json(const json& j) {
  study_spec s;
  if (!j.is_object()) throw error("study spec: expected a JSON object");
  read(j, "file", s.file);
  read(j, "space", s.space);
  read(j, "target", s.target);
  json_fields::read_assignments("study spec", j, "set", s.sets);
  read(j, "replay_space", s.replay_space);
  read(j, "backend", s.backend);
  read(j, "backend_settings", s.backend_settings);
  read(j, "fidelity", s.fidelity);
  read(j, "fidelity_settings", s.fidelity_settings);
  read(j, "gate", s.gate);
  read(j, "strategy", s.strategy);
  read(j, "scheduler", s.scheduler);
  read(j, "cost_alpha", s.cost_alpha);
  read(j, "cost_rule", s.cost_rule);
  read(j, "min_gain", s.min_gain);
  read(j, "budget_hint", s.budget_hint);
  read(j, "cost_budget_hint_s", s.cost_budget_hint_s);
  read(j, "token_price_s", s.token_price_s);
  read(j, "seed", s.seed);
  read(j, "jobs", s.jobs);
  read(j, "window", s.window);
  read(j, "baseline", s.baseline);
  read(j, "verify", s.verify);
  read(j, "db", s.db);
  if (const auto b = j.find("budget"); b != j.end() && b->is_object()) {
    read(*b, "evaluations", s.budget.evaluations);
    read(*b, "wall_s", s.budget.wall_s);
    read(*b, "cost_s", s.budget.cost_s);
    if (b->contains("target") && (*b)["target"].is_number())
      s.budget.target = (*b)["target"].get<double>();
    read(*b, "patience", s.budget.patience);
    read(*b, "high_evaluations", s.budget.high_evaluations);
  }
  return s;
}

}  // namespace tessel
