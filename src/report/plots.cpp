#include "plots.hpp"

#include "svg.hpp"

#include <tessel/fidelity.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

namespace tessel::report_detail {

study_view::study_view(const report_input& input) : in(input), s(*input.study_space) {
  for (const auto& t : *in.trials)
    if (t.state == trial_state::finished) finished.push_back(&t);
  std::stable_sort(finished.begin(), finished.end(),
                   [](auto* a, auto* b) { return a->finished_at < b->finished_at; });
  for (const auto* t : finished)
    if (t->result.ok() && !t->result.low_fidelity() && std::isfinite(t->result.objective))
      measured.push_back(t);
  best = measured;
  std::stable_sort(best.begin(), best.end(),
                   [](auto* a, auto* b) { return a->result.objective < b->result.objective; });
  if (best.size() > in.top) best.resize(in.top);
}

namespace {

constexpr std::string_view nothing_ok = "no trial finished ok yet";

std::string circle(double x, double y, double r, std::string_view cls, std::string_view tip) {
  return fmt::format(
      "<circle class=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\"><title>{}</title></circle>",
      cls, x, y, r, escape(tip));
}

/// A failure's mark: an x at (x, y).
std::string cross(double x, double y, std::string_view tip) {
  return fmt::format(
      "<path class=\"fail\" d=\"M{0:.1f} {1:.1f}l6 6m0 -6l-6 6\"><title>{2}</title></path>", x - 3,
      y - 3, escape(tip));
}

std::string trial_tip(const study_view& v, const trial& t) {
  return fmt::format(
      "trial {}: {} {}", t.id,
      t.result.ok() ? label(t.result.objective) : std::string(to_string(t.result.status)),
      v.s.to_json(t.config));
}

/// Best so far against evaluations (by_cost false) or cumulative cost.
std::optional<std::string> convergence(const study_view& v, bool standalone, std::string& why,
                                       bool by_cost) {
  if (v.measured.empty()) {
    why = nothing_ok;
    return std::nullopt;
  }
  std::vector<double> xs, ys;
  double spent = 0;
  for (const auto* t : v.finished) {
    spent += t->result.cost.total();
    xs.push_back(by_cost ? spent : static_cast<double>(xs.size() + 1));
  }
  for (const auto* t : v.measured) ys.push_back(t->result.objective);
  figure f(by_cost ? "convergence_cost" : "convergence", 900, 320);
  scale x = fit(xs, f.x0(), f.x1(), false);
  x.lo = 0;
  const scale y = fit(ys, f.y0(), f.y1() + 12);
  f.title(by_cost ? "Best so far against evaluation cost" : "Best so far against evaluations");
  f.axes(x, y, by_cost ? "cumulative evaluation cost (s)" : "evaluations (in finishing order)",
         "objective");
  std::string line;
  std::optional<double> best;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < v.finished.size(); ++i) {
    const trial& t = *v.finished[i];
    const double px = x(xs[i]);
    const bool counts =
        t.result.ok() && !t.result.low_fidelity() && std::isfinite(t.result.objective);
    if (!t.result.ok()) {
      f.add(cross(px, f.y1() + 6, trial_tip(v, t)));
      ++failures;
      continue;
    }
    if (!counts) continue;
    f.add(circle(px, y(t.result.objective), 2.5, "ok", trial_tip(v, t)));
    if (best && t.result.objective >= *best) {
      line += fmt::format("H{:.1f}", px);
      continue;
    }
    line += best ? fmt::format("H{:.1f}V{:.1f}", px, y(t.result.objective))
                 : fmt::format("M{:.1f} {:.1f}", px, y(t.result.objective));
    best = t.result.objective;
  }
  line += fmt::format("H{:.1f}", x(xs.back()));
  f.add(fmt::format("<path class=\"best\" d=\"{}\"/>", line));
  f.text(f.x1() - 4, f.y1() + 28,
         fmt::format("best {}  |  {} ok, {} failed (x, top row)", label(*best), v.measured.size(),
                     failures),
         "text-anchor=\"end\"");
  return f.svg(standalone);
}

std::optional<std::string> by_evaluations(const study_view& v, bool standalone, std::string& why) {
  return convergence(v, standalone, why, false);
}
std::optional<std::string> by_cost(const study_view& v, bool standalone, std::string& why) {
  return convergence(v, standalone, why, true);
}

/// A deterministic jitter in [-1, 1] from a trial id.
double jitter(std::uint64_t id) {
  return static_cast<double>((id * 0x9E3779B97F4A7C15ULL) >> 40) / static_cast<double>(1ULL << 23) -
         1.0;
}

/// One panel per parameter: the ok objectives at each value it took.
std::optional<std::string> objective_by_parameter(const study_view& v, bool standalone,
                                                  std::string& why) {
  if (v.measured.empty()) {
    why = nothing_ok;
    return std::nullopt;
  }
  const auto& params = v.s.parameters();
  constexpr double panel_w = 320, panel_h = 200;
  constexpr std::size_t columns = 3;
  const std::size_t rows = (params.size() + columns - 1) / columns;
  std::vector<double> ys;
  for (const auto* t : v.measured) ys.push_back(t->result.objective);
  std::string panels;
  for (std::size_t p = 0; p < params.size(); ++p) {
    // The values this parameter took among ok trials, in domain order.
    std::map<config::index_type, std::vector<const trial*>> at;
    for (const auto* t : v.measured) at[t->config[p]].push_back(t);
    figure f(params[p].name, panel_w, panel_h, 56, 34);
    const scale y = fit(ys, f.y0(), f.y1());
    const scale x{
        .lo = -0.5, .hi = static_cast<double>(at.size()) - 0.5, .from = f.x0(), .to = f.x1()};
    f.title(params[p].name);
    f.axes(scale{.lo = 0, .hi = 0, .from = 0, .to = 0}, y, "", "objective");
    std::vector<double> ticks;
    std::vector<std::string> labels;
    const std::size_t every = (at.size() + 7) / 8;  // at most 8 labels
    std::size_t k = 0;
    for (const auto& [index, ts] : at) {
      const double cx = x(static_cast<double>(k));
      const double half = std::min(0.3 * (x(1) - x(0)), 14.0);
      if (k % every == 0) {
        ticks.push_back(cx);
        labels.push_back(index == config::inactive ? "off" : params[p].dom.label(index));
      }
      std::vector<double> values;
      for (const auto* t : ts) {
        f.add(circle(cx + half * jitter(t->id), y(t->result.objective), 2, "ok",
                     fmt::format("trial {}: {}", t->id, label(t->result.objective))));
        values.push_back(t->result.objective);
      }
      std::nth_element(values.begin(), values.begin() + static_cast<long>(values.size() / 2),
                       values.end());
      const double median = y(values[values.size() / 2]);
      f.add(fmt::format("<path class=\"best\" d=\"M{:.1f} {:.1f}H{:.1f}\"/>", cx - half - 2, median,
                        cx + half + 2));
      ++k;
    }
    f.x_categories(ticks, labels);
    panels += f.panel(static_cast<double>(p % columns) * panel_w,
                      static_cast<double>(p / columns) * panel_h);
  }
  figure all("objective_by_parameter", panel_w * columns, panel_h * static_cast<double>(rows));
  all.add(panels);
  return all.svg(standalone);
}

std::optional<std::string> importance(const study_view& v, bool standalone, std::string& why) {
  if (!v.in.importance || v.in.importance->parameters.empty()) {
    why = v.in.importance_note.empty() ? "no importance was computed (no surrogate given)"
                                       : v.in.importance_note;
    return std::nullopt;
  }
  const auto& ps = v.in.importance->parameters;
  const double row = 22;
  figure f("importance", 900, 90 + row * static_cast<double>(ps.size()), 150, 64);
  const scale x{.lo = 0, .hi = 1, .from = f.x0(), .to = f.x1()};
  f.title("Parameter importance");
  f.axes(x, scale{.lo = 0, .hi = 0, .from = 0, .to = 0}, "", "");
  f.text((f.x0() + f.x1()) / 2, f.y0() + 32, "share of the predicted variance",
         "class=\"axis\" text-anchor=\"middle\"");
  f.text(f.x0() - 140, f.y0() + 56, "method: " + v.in.importance->method, "class=\"tick\"");
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const double top = f.y1() + 4 + row * static_cast<double>(i);
    f.add(fmt::format(
        "<rect class=\"bar\" fill=\"#4477aa\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
        "height=\"{:.1f}\"><title>{}: {:.3f}</title></rect>",
        f.x0(), top, std::max(x(ps[i].share) - f.x0(), 0.5), row - 6, escape(ps[i].parameter),
        ps[i].share));
    f.text(f.x0() - 6, top + row / 2 + 1, ps[i].parameter, "text-anchor=\"end\"");
    f.text(x(ps[i].share) + 4, top + row / 2 + 1, fmt::format("{:.0f}%", 100 * ps[i].share));
  }
  return f.svg(standalone);
}

/// Per change of the best config from the base: its gain alone (standalone)
/// and what it adds on top of every other change (target minus target
/// without it), hatched where a figure is predicted.
std::optional<std::string> interactions(const study_view& v, bool standalone, std::string& why) {
  const auto& r = v.in.interactions;
  if (!r || r->changes.empty() || !r->gain(r->target)) {
    why = v.in.interactions_note.empty() ? "no interaction analysis was given"
                                         : v.in.interactions_note;
    return std::nullopt;
  }
  const std::size_t k = r->changes.size();
  const double row = 34;
  figure f("interactions", 900, 96 + row * static_cast<double>(k), 190, 62);
  std::vector<double> gains{0};
  for (std::size_t i = 0; i < k; ++i) {
    if (const auto g = r->gain(r->alone[i])) gains.push_back(*g);
    if (const auto g = r->gain(r->without[i])) gains.push_back(*r->gain(r->target) - *g);
  }
  scale x = fit(gains, f.x0(), f.x1(), false);
  x.hi += (x.hi - x.lo) * 0.12;  // room for the labels at the bars' ends
  f.title("Each change alone, and on top of all the others (gain over the base)");
  f.axes(x, scale{.lo = 0, .hi = 0, .from = 0, .to = 0}, "", "");
  f.text((f.x0() + f.x1()) / 2, f.y0() + 32, "fraction of the base's objective saved",
         "class=\"axis\" text-anchor=\"middle\"");
  auto bar = [&](double top, std::optional<double> g, bool measured, std::string_view fill,
                 std::string_view what) {
    if (!g) {
      f.text(x(0) + 4, top + 10, what == "alone" ? "alone: n/a" : "on top: n/a", "class=\"tick\"");
      return;
    }
    const double from = std::min(x(0), x(*g)), to = std::max(x(0), x(*g));
    f.add(fmt::format(
        "<rect class=\"bar\" fill=\"{}\" {}x=\"{:.1f}\" y=\"{:.1f}\" "
        "width=\"{:.1f}\" height=\"12\"><title>{}: {:+.1f}% ({})</title></rect>",
        fill, measured ? "" : "fill-opacity=\"0.4\" stroke=\"#555\" stroke-dasharray=\"3 2\" ",
        from, top, std::max(to - from, 0.5), what, 100 * *g, measured ? "measured" : "predicted"));
    f.text(to + 4, top + 10, fmt::format("{:+.0f}%{}", 100 * *g, measured ? "" : " (predicted)"),
           "class=\"tick\"");
  };
  for (std::size_t i = 0; i < k; ++i) {
    const double top = f.y1() + 4 + row * static_cast<double>(i);
    f.text(f.x0() - 6, top + 16, r->changes[i], "text-anchor=\"end\"");
    bar(top, r->gain(r->alone[i]), r->alone[i].measured, "#88ccee", "alone");
    const auto without = r->gain(r->without[i]);
    bar(top + 14, without ? std::optional(*r->gain(r->target) - *without) : std::nullopt,
        r->without[i].measured && r->target.measured, "#332288", "on top of the others");
  }
  f.text(f.x0() - 180, f.y0() + 54,
         fmt::format("light: the base plus the change alone; dark: what it adds to all the others. "
                     "{} figures measured, {} predicted by the surrogate (dashed).",
                     r->measured, r->predicted),
         "class=\"tick\"");
  return f.svg(standalone);
}

/// The top trials as polylines over one vertical axis per parameter (each
/// value's position in its domain) and the objective.
std::optional<std::string> parallel(const study_view& v, bool standalone, std::string& why) {
  if (v.best.empty()) {
    why = nothing_ok;
    return std::nullopt;
  }
  const auto& params = v.s.parameters();
  const std::size_t axes = params.size() + 1;
  figure f("parallel", 960, 340, 40, 60);
  f.title(fmt::format("The best {} trials (darker is better)", v.best.size()));
  const scale x{
      .lo = 0, .hi = static_cast<double>(axes - 1), .from = f.x0() + 20, .to = f.x1() - 30};
  std::vector<double> objectives;
  for (const auto* t : v.best) objectives.push_back(t->result.objective);
  const scale yo = fit(objectives, f.y0(), f.y1() + 10);
  auto position = [&](const trial& t, std::size_t p) {
    const auto& dom = params[p].dom;
    const auto i = t.config[p];
    const double at = i == config::inactive || dom.size() < 2
                          ? 0.5
                          : static_cast<double>(i) / static_cast<double>(dom.size() - 1);
    return f.y0() - at * (f.y0() - f.y1() - 10);
  };
  for (std::size_t a = 0; a < axes; ++a) {
    const double px = x(static_cast<double>(a));
    f.add(
        fmt::format("<line class=\"grid\" stroke=\"#888\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" "
                    "y1=\"{1:.1f}\" y2=\"{2:.1f}\"/>",
                    px, f.y1() + 10, f.y0()));
    const bool last = a == params.size();
    f.text(px, f.y0() + 16, last ? "objective" : params[a].name,
           "class=\"axis\" text-anchor=\"middle\"");
    if (last) {
      f.text(px + 4, f.y1() + 14, label(yo.hi));
      f.text(px + 4, f.y0(), label(yo.lo));
    } else {
      const auto& dom = params[a].dom;
      f.text(px + 3, f.y0() + 30, dom.label(0), "class=\"tick\"");
      if (dom.size() > 1) f.text(px + 3, f.y1() + 8, dom.label(dom.size() - 1), "class=\"tick\"");
    }
  }
  for (std::size_t k = v.best.size(); k-- > 0;) {  // the best drawn last, on top
    const trial& t = *v.best[k];
    std::string d;
    for (std::size_t p = 0; p < params.size(); ++p)
      d += fmt::format("{}{:.1f} {:.1f}", p == 0 ? "M" : "L", x(static_cast<double>(p)),
                       position(t, p));
    d += fmt::format("L{:.1f} {:.1f}", x(static_cast<double>(params.size())),
                     yo(t.result.objective));
    const int shade =
        static_cast<int>(40 + 170 * static_cast<double>(k) /
                                  static_cast<double>(std::max<std::size_t>(v.best.size(), 2) - 1));
    f.add(fmt::format(
        "<path class=\"top\" stroke=\"rgb({0},{0},{1})\" d=\"{2}\"><title>{3}</title></path>",
        shade / 2, shade, d, escape(trial_tip(v, t))));
  }
  return f.svg(standalone);
}

/// Stacked bars: each status's share of the trials finished in each tenth
/// (at most 20 bins) of the study.
std::optional<std::string> status_over_time(const study_view& v, bool standalone,
                                            std::string& why) {
  if (v.finished.empty()) {
    why = "no trial has finished";
    return std::nullopt;
  }
  const std::size_t n = v.finished.size(), bins = std::min<std::size_t>(20, n);
  const auto& statuses = all_statuses();
  std::vector<std::vector<std::size_t>> counts(bins, std::vector<std::size_t>(statuses.size()));
  std::vector<bool> seen(statuses.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto st = static_cast<std::size_t>(v.finished[i]->result.status);
    ++counts[i * bins / n][st];
    seen[st] = true;
  }
  figure f("status", 900, 260);
  f.title("Status of the trials over the study");
  const scale x{.lo = 0, .hi = static_cast<double>(n), .from = f.x0(), .to = f.x1() - 110};
  const scale y{.lo = 0, .hi = 1, .from = f.y0(), .to = f.y1()};
  f.axes(x, y, "evaluations (in finishing order)", "share of the bin");
  for (std::size_t b = 0; b < bins; ++b) {
    const double first = static_cast<double>(b * n / bins),
                 last = static_cast<double>((b + 1) * n / bins);
    const double total = last - first;
    double below = 0;
    for (std::size_t k = 0; k < statuses.size(); ++k) {
      if (counts[b][k] == 0) continue;
      const double share = static_cast<double>(counts[b][k]) / total;
      f.add(fmt::format(
          "<rect class=\"bar\" fill=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
          "height=\"{:.1f}\"><title>{}: {} of {}</title></rect>",
          colour(k), x(first) + 0.5, y(below + share), std::max(x(last) - x(first) - 1, 0.5),
          y(below) - y(below + share), to_string(statuses[k]), counts[b][k], total));
      below += share;
    }
  }
  double legend = f.y1() + 10;
  for (std::size_t k = 0; k < statuses.size(); ++k) {
    if (!seen[k]) continue;
    f.add(fmt::format("<rect fill=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\"/>",
                      colour(k), f.x1() - 100, legend));
    f.text(f.x1() - 86, legend + 9, to_string(statuses[k]));
    legend += 16;
  }
  return f.svg(standalone);
}

/// The simulator's busy fraction of each engine in the best trial.
std::optional<std::string> engines(const study_view& v, bool standalone, std::string& why) {
  static constexpr std::array<std::string_view, 5> names{"tensor", "vector", "scalar", "gpsimd",
                                                         "dma"};
  const trial* best = v.best.empty() ? nullptr : v.best.front();
  if (!best || !best->result.metrics.contains("tensor_busy")) {
    why = "the best trial has no engine busy fractions (they come from the simulator)";
    return std::nullopt;
  }
  figure f("engines", 900, 60 + 22.0 * names.size() + 24, 80, 34);
  f.title(fmt::format("Engine busy fractions of the best trial ({})", best->id));
  const scale x{.lo = 0, .hi = 1, .from = f.x0(), .to = f.x1()};
  f.axes(x, scale{.lo = 0, .hi = 0, .from = 0, .to = 0}, "fraction of the kernel's time busy", "");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto m = best->result.metrics.find(std::string(names[i]) + "_busy");
    const double busy = m == best->result.metrics.end() ? 0 : std::clamp(m->second, 0.0, 1.0);
    const double top = f.y1() + 4 + 22.0 * static_cast<double>(i);
    f.add(
        fmt::format("<rect class=\"bar\" fill=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                    "height=\"16\"><title>{}: {:.3f}</title></rect>",
                    colour(i), f.x0(), top, std::max(x(busy) - f.x0(), 0.5), names[i], busy));
    f.text(f.x0() - 6, top + 12, names[i], "text-anchor=\"end\"");
    if (busy > 0.9)  // the label inside the bar's end
      f.text(x(busy) - 4, top + 12, fmt::format("{:.0f}%", 100 * busy),
             "text-anchor=\"end\" style=\"fill:#fff\"");
    else
      f.text(x(busy) + 4, top + 12, fmt::format("{:.0f}%", 100 * busy));
  }
  f.text(f.x0(), f.y1() + 4 + 22.0 * names.size() + 14,
         best->result.message.empty() ? "" : "bottleneck: " + best->result.message);
  return f.svg(standalone);
}

/// Multi-fidelity: each promoted config's low-fidelity objective against
/// its high-fidelity one.
std::optional<std::string> fidelity(const study_view& v, bool standalone, std::string& why) {
  std::vector<std::pair<double, const trial*>> pairs;
  for (const auto* t : v.measured)
    if (const auto low = t->result.metrics.find(fidelity_metric::low_objective);
        low != t->result.metrics.end() && std::isfinite(low->second))
      pairs.emplace_back(low->second, t);
  if (pairs.size() < 2) {
    why = "fewer than two configs were measured at both fidelities (--fidelity)";
    return std::nullopt;
  }
  std::vector<double> xs, ys;
  for (const auto& [low, t] : pairs) {
    xs.push_back(low);
    ys.push_back(t->result.objective);
  }
  figure f("fidelity", 560, 360);
  const scale x = fit(xs, f.x0(), f.x1()), y = fit(ys, f.y0(), f.y1());
  f.title("Low against high fidelity (configs measured at both)");
  f.axes(x, y, "low-fidelity objective", "high-fidelity objective");
  for (const auto& [low, t] : pairs)
    f.add(circle(x(low), y(t->result.objective), 3, "ok", trial_tip(v, *t)));
  return f.svg(standalone);
}

}  // namespace

const std::vector<plot>& plots() {
  static const std::vector<plot> all{
      {"convergence", "Convergence",
       "Each ok trial's objective (dots), the best so far (line), failures (x, top row) in the "
       "order trials finished.",
       by_evaluations},
      {"convergence_cost", "Convergence against cost",
       "The same against the evaluation cost spent (compile + gate + run seconds, summed).",
       by_cost},
      {"objective_by_parameter", "Objective against each parameter",
       "The ok objectives at each value of each parameter (jittered dots; the bar is the median).",
       objective_by_parameter},
      {"importance", "Parameter importance",
       "How much of the surrogate's predicted variation each parameter explains on its own.",
       importance},
      {"interactions", "Standalone and cascading effects",
       "The best config against the baseline: what each change gains alone, and what it adds on "
       "top of every other change. A change that gains nothing alone but much on top of the "
       "others only pays off together with another (the pairs: tessel explain --interactions).",
       interactions},
      {"parallel", "Parallel coordinates of the best trials",
       "The best trials across every parameter: each axis runs from the domain's first value "
       "(bottom) to its last (top); the last axis is the objective.",
       parallel},
      {"status", "Status over time",
       "The share of each status among the trials, over the course of the study.",
       status_over_time},
      {"engines", "Simulator: the best config's engines",
       "Where the best config spends its time on the simulator: each engine's busy fraction and "
       "the bottleneck it reports.",
       engines},
      {"fidelity", "Multi-fidelity agreement",
       "Multi-fidelity studies: how well the low fidelity ranks the configs the high fidelity "
       "measured.",
       fidelity},
  };
  return all;
}

}  // namespace tessel::report_detail
