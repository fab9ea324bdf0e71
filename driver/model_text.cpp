// model_text.cpp: a model's step and its tuning as the tables people read
// (tessel/model_driver.hpp, docs/models.md): `tessel model`, `tessel
// tune-model` and Python print these.
#include <tessel/model_driver.hpp>
#include <tessel/text.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace tessel {
namespace {

/// The categories any kernel spends time in, in declaration order.
std::vector<time_category> used_categories(const step_breakdown& step) {
  std::vector<time_category> out;
  for (auto c : all_time_categories())
    if (step.by_category[static_cast<std::size_t>(c)] > 0) out.push_back(c);
  return out;
}

std::string short_name(time_category c) {
  switch (c) {
    case time_category::elementwise: return "elemwise";
    case time_category::collective: return "collect";
    default: return std::string(to_string(c));
  }
}

}  // namespace

model_step_report model_step(const model_spec& spec, const std::string& from,
                             bool several_targets) {
  model_step_report r;
  r.spec = spec;
  r.model = read_model(spec);
  if (!from.empty()) r.from = model_db_dir(r.model, from, several_targets);
  r.timed = from.empty() ? time_defaults(r.model, spec) : time_bests(r.model, spec, r.from);
  r.step = step_for(r.model, r.timed);
  return r;
}

nlohmann::json model_step_report::to_json() const {
  auto j = step_json(model, step);
  j["notes"] = timed.notes;
  j["configs"] = from.empty() ? "default" : "best of " + from.string();
  return j;
}

std::string model_step_report::text() const {
  return fmt::format("model {} ({}) on {}, backend {}: {} kernels, step {} at the {}\n\n{}",
                     model.name, model.file, spec.target, spec.backend, model.kernels.size(),
                     seconds_as_ms(step.step_s),
                     from.empty() ? "default configs" : "best configs of " + from.string(),
                     step_text(model, step, timed));
}

std::string step_text(const model_definition& m, const step_breakdown& step,
                      const timed_kernels& timed) {
  const auto cats = used_categories(step);
  std::string out = fmt::format("{:<18} {:>6} {:>10} {:>10} {:>7}", "kernel", "calls", "per call",
                                "per step", "share");
  for (auto c : cats) out += fmt::format(" {:>8}", short_name(c));
  out += fmt::format(" {:>9} {:>8} {:>10}\n", "GFLOP", "GB", "roofline");
  for (const auto& k : step.kernels) {
    if (!k.timed) {
      out += fmt::format("{:<18} {:>6} {:>10}\n", k.name, k.calls, "no time");
      continue;
    }
    out += fmt::format("{:<18} {:>6} {:>10} {:>10} {:>7}", k.name, k.calls,
                       seconds_as_ms(k.per_call_s), seconds_as_ms(k.step_s), percent(k.share));
    for (auto c : cats)
      out += fmt::format(" {:>8}", percent(k.by_category[static_cast<std::size_t>(c)] / k.step_s));
    out += fmt::format(" {:>9.3g} {:>8.3g} {:>10}\n", k.flops * 1e-9, k.hbm_bytes * 1e-9,
                       k.roofline_s > 0 ? seconds_as_ms(k.roofline_s) : "-");
  }
  out += fmt::format("{:<18} {:>6} {:>10} {:>10} {:>7}", "step", "", "", seconds_as_ms(step.step_s),
                     "100%");
  for (auto c : cats)
    out +=
        fmt::format(" {:>8}", percent(step.by_category[static_cast<std::size_t>(c)] / step.step_s));
  out += fmt::format(" {:>9.3g} {:>8.3g} {:>10}\n", step.flops * 1e-9, step.hbm_bytes * 1e-9,
                     step.roofline_s > 0 ? seconds_as_ms(step.roofline_s) : "-");

  out += "\nby category:";
  for (auto c : all_time_categories()) {
    const double s = step.by_category[static_cast<std::size_t>(c)];
    if (c == time_category::other && s <= 0) continue;
    out += fmt::format(" {} {} ({}){}", to_string(c), seconds_as_ms(s),
                       percent(step.step_s > 0 ? s / step.step_s : 0),
                       c == time_category::other ? "" : ",");
  }
  if (out.back() == ',') out.pop_back();
  out += "\n";
  if (const auto groups = groups_of(m, step); !groups.empty()) {
    out += "by group:";
    for (std::size_t i = 0; i < groups.size(); ++i)
      out += fmt::format("{} {} {} ({})", i == 0 ? "" : ",", groups[i].first,
                         seconds_as_ms(groups[i].second), percent(groups[i].second / step.step_s));
    out += "\n";
    if (groups.size() >= 2 && groups[1].second > 0)
      out += fmt::format("{} takes {:.2f}x the time of {}\n", groups[0].first,
                         groups[0].second / groups[1].second, groups[1].first);
  }
  if (step.roofline_s > 0)
    out += fmt::format("roofline: every kernel at its roofline would take {} ({:.2f}x faster)\n",
                       seconds_as_ms(step.roofline_s), step.step_s / step.roofline_s);
  if (!step.untimed.empty())
    out += fmt::format("not timed (left out of the step): {}\n", fmt::join(step.untimed, ", "));
  for (std::size_t i = 0; i < step.kernels.size(); ++i)
    if (!step.kernels[i].timed)
      out += fmt::format("  {}: {}\n", step.kernels[i].name,
                         outcome_text(timed.results[i].status, timed.results[i].message));
  for (const auto& note : timed.notes) out += fmt::format("note: {}\n", note);
  return out;
}

std::string compare_text(const std::vector<target_step>& steps) {
  if (steps.size() < 2) return {};
  std::size_t fastest = 0, cheapest = 0;
  auto core_s = [](const target_step& t) { return t.step_s * static_cast<double>(t.cores); };
  for (std::size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].step_s < steps[fastest].step_s) fastest = i;
    if (core_s(steps[i]) < core_s(steps[cheapest])) cheapest = i;
  }
  const auto& f = steps[fastest];
  std::string out = fmt::format("shortest step: {}, {} on {} physical core{}", f.target,
                                seconds_as_ms(f.step_s), f.cores, f.cores == 1 ? "" : "s");
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (i != fastest)
      out += fmt::format("; {} takes {} ({:.2f}x, {:+.1f}%)", steps[i].target,
                         seconds_as_ms(steps[i].step_s), steps[i].step_s / f.step_s,
                         100.0 * (steps[i].step_s - f.step_s) / f.step_s);
  out += "\nper physical core (step time x cores, what a chip's throughput follows):";
  for (std::size_t i = 0; i < steps.size(); ++i)
    out += fmt::format("{} {} {}", i == 0 ? "" : ",", steps[i].target,
                       seconds_as_ms(core_s(steps[i])));
  return out + fmt::format(": {} gives the most steps per chip\n", steps[cheapest].target);
}

std::string model_tuning::text() const {
  const auto& t = *this;
  const auto& m = t.model;
  const auto& sum = t.summary;
  const auto& dir = t.db_dir;
  const auto policy = to_string(t.spec.policy);
  std::string out = fmt::format("model {} on {}: {} evaluations ({} allocation), {}\n", m.name,
                                m.target, sum.evaluations, policy, sum.stopped);
  if (sum.before_s && sum.after_s)
    out += fmt::format(
        "step {} -> {} ({:+.1f}%, {:.2f}x faster){}\n\n", seconds_as_ms(*sum.before_s),
        seconds_as_ms(*sum.after_s), 100.0 * (*sum.after_s - *sum.before_s) / *sum.before_s,
        *sum.before_s / *sum.after_s, dir.empty() ? "" : fmt::format("; study files in {}", dir));
  out += fmt::format("{:<18} {:>6} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "kernel",
                     "calls", "evals", "before/call", "best/call", "step before", "step after",
                     "roofline", "gap/step");
  const auto gaps = roofline_gaps(sum);
  double gap = 0;
  for (std::size_t i = 0; i < sum.kernels.size(); ++i) {
    const auto& k = sum.kernels[i];
    const auto& r = gaps[i];
    const double calls = static_cast<double>(k.calls);
    auto cell = [&](const trial* tr, double times) {
      return tr ? seconds_as_ms(times * tr->result.objective) : std::string("-");
    };
    out +=
        fmt::format("{:<18} {:>6} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", k.name,
                    k.calls, k.evaluations, cell(k.first, 1), cell(k.best, 1), cell(k.first, calls),
                    cell(k.best, calls), r.roofline_s > 0 ? seconds_as_ms(r.roofline_s) : "-",
                    r.roofline_s > 0 ? seconds_as_ms(r.gap_s) : "-");
    gap += r.gap_s;
  }
  if (gap > 0) {
    std::vector<std::size_t> order(gaps.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](auto a, auto b) { return gaps[a].gap_s > gaps[b].gap_s; });
    out += fmt::format("\nthe gap to the roofline left in the step, {}:", seconds_as_ms(gap));
    for (std::size_t i = 0; i < order.size() && i < 5 && gaps[order[i]].gap_s > 0; ++i)
      out += fmt::format("{} {} {} ({})", i == 0 ? "" : ",", sum.kernels[order[i]].name,
                         seconds_as_ms(gaps[order[i]].gap_s), percent(gaps[order[i]].gap_s / gap));
    out += "\n";
  }
  out += "\nbest configs:\n";
  for (std::size_t i = 0; i < t.study.size(); ++i)
    out += fmt::format("  {:<16} {}\n", t.study.member(i).name,
                       t.study.member(i).study->current_summary().best_config_text);
  return out;
}

}  // namespace tessel
