// The agent ops' table (tessel/ops.hpp, op_list): each op's name, what it does and
// its arguments as JSON Schema, which `help` and MCP's tools/list publish
// and ops::call checks names against.
#include <tessel/codec.hpp>
#include <tessel/ops.hpp>

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {
namespace {

using json = nlohmann::json;

/// A JSON Schema object of `properties` (JSON text), closed to other names.
std::shared_ptr<const json> schema(std::string_view properties,
                                   std::vector<std::string> required = {}) {
  json out = {{"type", "object"}, {"properties", json::parse(properties)}};
  if (!required.empty()) out["required"] = required;
  out["additionalProperties"] = false;
  return std::make_shared<const json>(std::move(out));
}

/// tell's `status`: every status name (tessel/measurement.hpp).
std::string status_enum() {
  json names = json::array();
  for (const auto st : all_statuses()) names.push_back(to_string(st));
  return names.dump();
}

constexpr std::string_view config_property = R"("config": {"type": "object",
  "description": "parameter names to values as the space op gives them (numbers, strings, booleans, arrays for loop orders); parameters left out take their defaults"})";
constexpr std::string_view provenance_properties = R"(
  "source": {"type": "string", "description": "who proposes it; default \"agent\""},
  "tokens": {"type": "number", "minimum": 0, "description": "tokens spent proposing it"},
  "note": {"type": "string", "description": "the rationale, kept with the trial"})";
constexpr std::string_view trial_id_property =
    R"("trial_id": {"type": "integer", "minimum": 1, "description": "a trial id from ask or enqueue"})";

constexpr std::string_view model_properties = R"j(
  "file": {"type": "string", "description": "the .tsl file of the model"},
  "model": {"type": "string", "description": "which model of the file; default the first"},
  "target": {"type": "string", "default": "trn2"},
  "set": {"type": "object", "description": "the model's consts to override, NAME: value"},
  "backend": {"type": "string", "default": "sim", "description": "what times each kernel"},
  "backend_set": {"type": "object", "description": "settings of every kernel's backend, KEY: value"},
  "gate": {"type": "boolean", "default": true, "description": "false: the simulator skips the equivalence gate"})j";
constexpr std::string_view tuning_properties = R"j(
  "budget": {"type": "integer", "minimum": 0, "description": "evaluations over all kernels (resumed ones count)"},
  "cost_budget": {"type": "number", "minimum": 0, "description": "seconds of summed evaluation cost over all kernels"},
  "allocate": {"type": "string", "enum": ["utility", "even", "share"], "default": "utility"},
  "strategy": {"type": "string", "default": "auto"},
  "seed": {"type": "integer", "minimum": 0, "default": 0, "description": "kernel i uses seed + i"},
  "scheduler": {"type": "string", "enum": ["utility", "fifo"], "default": "utility"},
  "db_dir": {"type": "string", "description": "the folder of the kernels' study files; default <model>.tessel"},
  "no_db": {"type": "boolean", "default": false, "description": "keep nothing on disk"},
  "resume": {"type": "boolean", "default": false, "description": "continue the study files in db_dir"},
  "overwrite": {"type": "boolean", "default": false, "description": "delete the study files' trials and start over"})j";

std::string object(std::initializer_list<std::string_view> members) {
  std::string out = "{";
  for (const auto m : members) out += (out.size() > 1 ? "," : "") + std::string(m);
  return out + "}";
}

std::vector<op_info> make_op_list() {
  constexpr std::string_view none = "{}";
  return {
      {"space",
       "Describe the search space: each parameter's kind, typed values and default, the "
       "constants, the target's numbers, the constraints and how many configs are valid. Call "
       "it first.",
       schema(none)},
      {"ask",
       "Get up to n configs to evaluate next, best first. Each carries a prediction (mean, "
       "sigma, p_feasible, expected_gain, cost_s, utility; basis \"prior\" until a model is "
       "fitted) and the reason it was chosen. Measure them and report with tell.",
       schema(R"({"n": {"type": "integer", "minimum": 0, "maximum": 10000, "default": 1}})")},
      {"tell",
       "Report the result of a trial you measured yourself (from ask). The result is stored as "
       "agent-reported (unverified).",
       schema(object({trial_id_property, R"(
  "objective": {"type": "number", "description": "seconds (lower is better); needed when status is ok"},
  "status": {"type": "string", "default": "ok", "enum": )" +
                                             status_enum() + R"(},
  "message": {"type": "string"},
  "samples": {"type": "array", "items": {"type": "number"}},
  "cost": {"type": "object", "properties": {"compile_s": {"type": "number"}, "gate_s": {"type": "number"}, "run_s": {"type": "number"}}},
  "metrics": {"type": "object", "additionalProperties": {"type": "number"}},
  "tokens": {"type": "number", "minimum": 0, "description": "tokens spent on this trial"})"}),
              {"trial_id"})},
      {"enqueue",
       "Propose a config of your own; it is checked against the space and queued for ask (or "
       "run). Returns its trial id, or duplicate: true when it was already proposed.",
       schema(object({config_property, provenance_properties}), {"config"})},
      {"evaluate",
       "Evaluate one config now on the session's backend (equivalence-gated) and return the "
       "trial. Needs a backend.",
       schema(object({config_property, provenance_properties}), {"config"})},
      {"run",
       "Let tessel propose and evaluate `evaluations` more configs on its backend, reporting "
       "progress; stops early at `target` (seconds) if given. Needs a backend.",
       schema(
           R"({"evaluations": {"type": "integer", "minimum": 0, "maximum": 1000000, "default": 1},
                  "target": {"type": "number", "description": "stop once the best is at most this"}})")},
      {"best", "The best trial so far (null before any success).", schema(none)},
      {"trials", "Every trial so far, in proposal order.", schema(none)},
      {"explain",
       "Why a config is as fast as it is on the simulator: latency, roofline, bottleneck, engine "
       "busy fractions and ranked suggestions in terms of the space's parameters. Give a config, "
       "a trial_id, or nothing for the best trial.",
       schema(object({config_property, trial_id_property}))},
      {"interactions",
       "Which changes of a config (default the best) from a base (default the baseline) help on "
       "their own and which only together: each change alone, the config without each, and "
       "every pair. Figures the study has are measured; up to `budget` more are evaluated on "
       "the backend (gated, kept as trials); the rest are predicted by the surrogate. Each "
       "figure says whether it was measured or predicted.",
       schema(object({config_property, trial_id_property, R"(
  "against": {"type": "object", "description": "the base config, as config; default the space's baseline"},
  "budget": {"type": "integer", "minimum": 0, "maximum": 1000000, "default": 0, "description": "evaluations on the backend to spend at most; above 0 needs a backend"})"}))},
      {"why_failed",
       "Why trials failed: one trial (trial_id), whether a config is valid (config), or all "
       "failures grouped by status with examples.",
       schema(object({config_property, trial_id_property}))},
      {"verify",
       "Re-measure on the backend the best agent-reported results (tell) that would beat the "
       "best measured one, so an unverified time cannot be the answer. Needs a backend.",
       schema(R"({"max": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 1}})")},
      {"summary", "Counts by status, the best, cost and tokens spent, and the full text report.",
       schema(none)},
      {"model",
       "A model's step time at its kernels' default configs (a .tsl file with a model block, "
       "docs/models.md): per kernel and in total, by category and group, with FLOPs, bytes, "
       "each kernel's share and the roofline. Independent of the session's study.",
       schema(object({model_properties}), {"file"})},
      {"tune_model",
       "Tune every kernel of a model under one budget, one study file per kernel, each next "
       "evaluation going to the kernel with the largest expected step-time gain per unit of "
       "cost; returns the step before and after, per kernel its best config and its gap to the "
       "roofline. Independent of the session's study.",
       schema(object({model_properties, tuning_properties}), {"file"})},
      {"help", "The ops and their arguments (JSON Schema).",
       schema(R"({"op": {"type": "string", "description": "describe only this op"}})"), false},
      {"quit", "End the session after replying.", schema(none), false},
  };
}

}  // namespace

const std::vector<op_info>& op_list() {
  static const std::vector<op_info> list = make_op_list();
  return list;
}

std::string op_names() {
  std::string out;
  for (const auto& o : op_list()) out += (out.empty() ? "" : ", ") + o.name;
  return out;
}

}  // namespace tessel
