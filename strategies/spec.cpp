// Strategy specs with options: "bo[initial_draws=1;rule_test_after=50]",
// "auto[lead=60;initial_draws=1]" (tessel/strategies.hpp, make_strategy).
// The spec is what a study records as its strategy, so a resumed study
// rebuilds the same options. Keys are the options' field names; auto takes
// its own and its bo arm's.
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>

#include <charconv>
#include <functional>
#include <map>
#include <string>

namespace tessel::detail {
namespace {

/// What went wrong with `spec`, for the user.
[[noreturn]] void spec_failure(std::string_view spec, const std::string& why) {
  throw error("strategy '" + std::string(spec) + "': " + why);
}

template <class T>
T number(std::string_view spec, const std::string& key, const std::string& value) {
  T out{};
  const auto* end = value.data() + value.size();
  const auto [at, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc{} || at != end || value.empty())
    spec_failure(spec, key + ": '" + value + "' is not " +
                           (std::is_integral_v<T> ? "a whole number" : "a number"));
  return out;
}

bool boolean(std::string_view spec, const std::string& key, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  spec_failure(spec, key + ": '" + value + "' is not true or false");
}

acquisition_kind acquisition(std::string_view spec, const std::string& value) {
  if (value == "log_ei") return acquisition_kind::log_ei;
  if (value == "ucb") return acquisition_kind::ucb;
  if (value == "thompson") return acquisition_kind::thompson;
  spec_failure(spec, "acquisition: '" + value + "' is not log_ei, ucb or thompson");
}

/// Options a spec may set: auto's own (unused by bo) and bo's.
struct spec_options {
  auto_options automatic;
  bo_options bo;
};
using setter = std::function<void(spec_options&, std::string_view spec, const std::string& key,
                                  const std::string& value)>;

template <auto member>
setter whole_bo() {
  return [](spec_options& o, std::string_view s, const std::string& k, const std::string& v) {
    o.bo.*member = number<std::size_t>(s, k, v);
  };
}
template <auto member>
setter real_bo() {
  return [](spec_options& o, std::string_view s, const std::string& k, const std::string& v) {
    o.bo.*member = number<double>(s, k, v);
  };
}

const std::map<std::string, setter, std::less<>>& bo_keys() {
  static const std::map<std::string, setter, std::less<>> keys{
      {"initial_samples", whole_bo<&bo_options::initial_samples>()},
      {"initial_draws", whole_bo<&bo_options::initial_draws>()},
      {"acquisition", [](spec_options& o, std::string_view s, const std::string&,
                         const std::string& v) { o.bo.acquisition = acquisition(s, v); }},
      {"ucb_kappa", real_bo<&bo_options::ucb_kappa>()},
      {"ucb_after", whole_bo<&bo_options::ucb_after>()},
      {"pool_size", whole_bo<&bo_options::pool_size>()},
      {"incumbents", whole_bo<&bo_options::incumbents>()},
      {"local_starts", whole_bo<&bo_options::local_starts>()},
      {"local_steps", whole_bo<&bo_options::local_steps>()},
      {"feasibility_cutoff", real_bo<&bo_options::feasibility_cutoff>()},
      {"rule_test_after", whole_bo<&bo_options::rule_test_after>()},
      {"learn_constraints",
       [](spec_options& o, std::string_view s, const std::string& k, const std::string& v) {
         o.bo.model.learn_constraints = o.automatic.learn_constraints = boolean(s, k, v);
       }},
  };
  return keys;
}

const std::map<std::string, setter, std::less<>>& auto_keys() {
  static const std::map<std::string, setter, std::less<>> keys{
      {"arms",
       [](spec_options& o, std::string_view, const std::string&, const std::string& v) {
         o.automatic.arms.clear();
         for (std::size_t at = 0; at <= v.size();) {
           const auto plus = std::min(v.find('+', at), v.size());
           o.automatic.arms.push_back(v.substr(at, plus - at));
           at = plus + 1;
         }
       }},
      {"lead", [](spec_options& o, std::string_view s, const std::string& k,
                  const std::string& v) { o.automatic.lead = number<std::size_t>(s, k, v); }},
      {"exploration",
       [](spec_options& o, std::string_view s, const std::string& k, const std::string& v) {
         o.automatic.exploration = number<double>(s, k, v);
       }},
      {"window", [](spec_options& o, std::string_view s, const std::string& k,
                    const std::string& v) { o.automatic.window = number<std::size_t>(s, k, v); }},
      {"explore_rejected",
       [](spec_options& o, std::string_view s, const std::string& k, const std::string& v) {
         o.automatic.explore_rejected = number<double>(s, k, v);
       }},
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
      spec_failure(spec, "unknown key '" + key + "'" + did_you_mean(key, known) + "; " +
                             std::string(name) + " takes " + listed);
    }
    (*set)(o, spec, key, item.substr(eq + 1));
  }
  try {
    if (!automatic) return make_bo_strategy(o.bo);
    o.automatic.validate();
    std::vector<std::unique_ptr<strategy>> arms;
    for (const auto& arm : o.automatic.arms)
      arms.push_back(arm == "bo" ? make_bo_strategy(o.bo) : make_strategy(arm));
    return make_auto_strategy(o.automatic, std::move(arms));
  } catch (const options_error& e) {  // a value out of range: say which spec set it
    throw options_error("strategy '" + std::string(spec) + "': " + e.what());
  }
}

}  // namespace tessel::detail
