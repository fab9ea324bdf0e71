// Strategy specs with options: "bo[initial_draws=1;rule_test_after=50]",
// "auto[lead=60;initial_draws=1]" (tessel/strategies.hpp, make_strategy).
// The spec is what a study records as its strategy, so a resumed study
// rebuilds the same options. Keys are the options' field paths
// ("model.max_model_points" for bo_options::model's); auto takes its own
// and its bo arm's.
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/error.hpp>
#include <tessel/settings.hpp>
#include <tessel/strategies.hpp>

#include <functional>
#include <map>
#include <string>

namespace tessel::detail {
namespace {

/// What went wrong with `spec`, for the user.
[[noreturn]] void spec_failure(std::string_view spec, const std::string& why) {
  throw error("strategy '" + std::string(spec) + "': " + why);
}

/// A value read from the text after "KEY=", one overload per field type.
struct reader {
  std::string_view spec;
  const std::string& key;
  const std::string& text;

  [[noreturn]] void fail(const std::string& expected) const {
    spec_failure(spec, key + ": '" + text + "' is not " + expected);
  }
  void read(std::size_t& out) const {
    const auto v = parse_whole(text);
    if (!v) fail("a whole number");
    out = *v;
  }
  void read(double& out) const {
    const auto v = parse_number(text);
    if (!v) fail("a number");
    out = *v;
  }
  void read(bool& out) const {
    const auto v = parse_flag(text);
    if (!v) fail(std::string(flag_spellings()));
    out = *v;
  }
  void read(acquisition_kind& out) const {
    static const std::map<std::string, acquisition_kind, std::less<>> kinds{
        {"log_ei", acquisition_kind::log_ei},
        {"ucb", acquisition_kind::ucb},
        {"thompson", acquisition_kind::thompson}};
    const auto it = kinds.find(text);
    if (it == kinds.end()) fail("log_ei, ucb or thompson");
    out = it->second;
  }
  void read(std::vector<std::string>& out) const {  // arms, joined by '+'
    out.clear();
    for (std::size_t at = 0; at <= text.size();) {
      const auto plus = std::min(text.find('+', at), text.size());
      out.push_back(text.substr(at, plus - at));
      at = plus + 1;
    }
  }
};

/// Options a spec may set: auto's own (unused by bo) and bo's.
struct spec_options {
  auto_options automatic;
  bo_options bo;
  auto_options& part(auto_options*) { return automatic; }
  bo_options& part(bo_options*) { return bo; }
  gp_options& part(gp_options*) { return bo.model; }
};
using setter = std::function<void(spec_options&, const reader&)>;

template <class>
struct member_of;
template <class Owner, class Value>
struct member_of<Value Owner::*> {
  using owner = Owner;
};

/// Sets the field `member` points to (of auto_options, bo_options or its model).
template <auto member>
setter field() {
  return [](spec_options& o, const reader& r) {
    r.read(o.part(static_cast<typename member_of<decltype(member)>::owner*>(nullptr)).*member);
  };
}

const std::map<std::string, setter, std::less<>>& bo_keys() {
  static const std::map<std::string, setter, std::less<>> keys{
      {"initial_samples", field<&bo_options::initial_samples>()},
      {"initial_draws", field<&bo_options::initial_draws>()},
      {"acquisition", field<&bo_options::acquisition>()},
      {"ucb_kappa", field<&bo_options::ucb_kappa>()},
      {"ucb_after", field<&bo_options::ucb_after>()},
      {"pool_size", field<&bo_options::pool_size>()},
      {"incumbents", field<&bo_options::incumbents>()},
      {"local_starts", field<&bo_options::local_starts>()},
      {"local_steps", field<&bo_options::local_steps>()},
      {"feasibility_cutoff", field<&bo_options::feasibility_cutoff>()},
      {"rule_test_after", field<&bo_options::rule_test_after>()},
      {"initial_share", field<&bo_options::initial_share>()},
      {"explore_runway", field<&bo_options::explore_runway>()},
      {"phase_share", field<&bo_options::phase_share>()},
      {"model.learn_constraints", field<&gp_options::learn_constraints>()},
      {"model.max_model_points", field<&gp_options::max_model_points>()},
      {"model.alignment_features", field<&gp_options::alignment_features>()},
      {"model.ordinal_features", field<&gp_options::ordinal_features>()},
      {"model.refit_growth", field<&gp_options::refit_growth>()},
      {"model.fit_restarts", field<&gp_options::fit_restarts>()},
  };
  return keys;
}

const std::map<std::string, setter, std::less<>>& auto_keys() {
  static const std::map<std::string, setter, std::less<>> keys{
      {"arms", field<&auto_options::arms>()},
      {"lead", field<&auto_options::lead>()},
      {"exploration", field<&auto_options::exploration>()},
      {"window", field<&auto_options::window>()},
      {"learn_constraints", field<&auto_options::learn_constraints>()},
      {"explore_rejected", field<&auto_options::explore_rejected>()},
      {"interaction_groups", field<&auto_options::interaction_groups>()},
      {"interaction_threshold", field<&auto_options::interaction_threshold>()},
  };
  return keys;
}

}  // namespace

std::unique_ptr<strategy> make_strategy_from_spec(std::string_view spec) {
  const auto open = spec.find('[');
  const auto name = spec.substr(0, open);
  if (spec.back() != ']') spec_failure(spec, "options go in [KEY=VALUE;...], closed by ']'");
  const bool automatic = name == "auto";
  if (!automatic && name != "bo") spec_failure(spec, "only bo and auto take options in [...]");
  spec_options o;
  const auto body = std::string(spec.substr(open + 1, spec.size() - open - 2));
  for (std::size_t at = 0; at < body.size();) {
    const auto semi = std::min(body.find(';', at), body.size());
    const auto item = body.substr(at, semi - at);
    at = semi + 1;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) spec_failure(spec, "'" + item + "' is not KEY=VALUE");
    const auto key = item.substr(0, eq);
    const setter* set = nullptr;
    if (const auto it = bo_keys().find(key); it != bo_keys().end()) set = &it->second;
    if (automatic)
      if (const auto it = auto_keys().find(key); it != auto_keys().end()) set = &it->second;
    if (!set) {
      std::vector<std::string_view> known;
      if (automatic)
        for (const auto& [k, _] : auto_keys()) known.push_back(k);
      for (const auto& [k, _] : bo_keys()) known.push_back(k);
      std::string listed;
      for (const auto k : known) listed += (listed.empty() ? "" : ", ") + std::string(k);
      spec_failure(spec, "unknown key '" + key + "'" + did_you_mean_suffix(key, known) + "; " +
                             std::string(name) + " takes " + listed);
    }
    const auto value = item.substr(eq + 1);
    (*set)(o, reader{spec, key, value});
  }
  try {
    if (!automatic) return make_bo_strategy(o.bo);
    o.automatic.validate();
    std::vector<std::unique_ptr<strategy>> arms;
    for (const auto& arm : o.automatic.arms)
      arms.push_back(arm == "bo" ? make_bo_strategy(o.bo) : make_strategy(arm));
    return make_auto_strategy(o.automatic, std::move(arms));
  } catch (const options_error& e) {  // a value out of range: say which spec and key set it
    const auto said = "strategy '" + std::string(spec) + "': ";
    for (const auto& [owner, keys] :
         {std::pair{"bo_options.", &bo_keys()}, std::pair{"auto_options.", &auto_keys()}})
      for (const auto& [key, set] : *keys)
        if (e.field() == owner + key) throw e.renamed(said + key, "=");
    throw e.renamed(said + e.field(), " = ");
  }
}

}  // namespace tessel::detail
