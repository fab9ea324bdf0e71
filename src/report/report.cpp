// report_html and report_svg (tessel/report.hpp): the page around the plots.
#include <tessel/error.hpp>
#include <tessel/report.hpp>

#include "plots.hpp"
#include "svg.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

namespace tessel {
namespace {

using report_detail::escape;
using report_detail::label;

void check(const report_input& in) {
  if (!in.record || !in.study_space || !in.trials)
    throw error("report: the study record, space and trials are all required");
}

constexpr std::string_view page_style =
    "body{font:14px/1.45 sans-serif;color:#222;max-width:1000px;margin:24px auto;padding:0 16px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left;"
    "vertical-align:top}th{color:#555;font-weight:normal}.num{text-align:right}"
    ".caption{color:#555;margin:4px 0}.absent{color:#888;font-style:italic}"
    "code,pre{font:12px monospace}pre{background:#f6f6f6;padding:8px;overflow-x:auto}"
    "nav a{margin-right:12px}svg{display:block;margin:6px 0}";

std::string header(const report_detail::study_view& v) {
  const auto& r = *v.in.record;
  std::map<status, std::size_t> by_status;
  double cost = 0;
  for (const auto* t : v.finished) {
    ++by_status[t->result.status];
    cost += t->result.cost.total();
  }
  std::string statuses;
  for (const auto& [st, n] : by_status)
    statuses += fmt::format("{}{} {}", statuses.empty() ? "" : ", ", n, to_string(st));
  std::string rows;
  auto row = [&](std::string_view name, const std::string& value) {
    rows += fmt::format("<tr><th>{}</th><td>{}</td></tr>", name, escape(value));
  };
  if (!v.in.source.empty()) row("study", v.in.source);
  row("space",
      fmt::format("{} ({} valid configs, {} parameters)", r.space_name, v.s.count(), v.s.size()));
  row("target", r.target);
  row("backend", r.backend);
  row("strategy", fmt::format("{} (seed {})", r.strategy, r.seed));
  row("trials",
      fmt::format("{} finished ({}), {} not finished", v.finished.size(),
                  statuses.empty() ? "none" : statuses, v.in.trials->size() - v.finished.size()));
  row("evaluation cost", fmt::format("{:.3f} s", cost));
  if (!v.best.empty())
    row("best", fmt::format("{} (trial {}) {}", label(v.best.front()->result.objective),
                            v.best.front()->id, v.s.to_json(v.best.front()->config)));
  return "<table class=\"meta\">" + rows + "</table>";
}

std::string best_table(const report_detail::study_view& v) {
  if (v.best.empty()) return "<p class=\"absent\">No trial finished ok yet.</p>";
  std::string out =
      "<table class=\"best\"><tr><th>trial</th><th class=\"num\">objective</th>"
      "<th>source</th><th>config</th></tr>";
  for (const auto* t : v.best)
    out += fmt::format(
        "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td></tr>", t->id,
        label(t->result.objective), escape(t->provenance.source), escape(v.s.to_json(t->config)));
  return out + "</table>";
}

std::string constraints_block(const report_input& in) {
  if (in.learned_constraints.empty())
    return "<p class=\"absent\">Nothing learned: no kind of failure is explained by a rule "
           "(or there were too few failures).</p>";
  std::string lines;
  for (const auto& l : in.learned_constraints) lines += escape(l) + "\n";
  return "<p class=\"caption\">Candidate <code>require</code> lines for the .tsl: each condition "
         "is met by the failures it counts and by no success so far. Check before pasting.</p>"
         "<pre>" +
         lines + "</pre>";
}

}  // namespace

const std::vector<std::string>& report_plot_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& p : report_detail::plots()) out.emplace_back(p.name);
    return out;
  }();
  return names;
}

std::string report_html(const report_input& in) {
  check(in);
  const report_detail::study_view v(in);
  std::string nav, sections;
  for (const auto& p : report_detail::plots()) {
    std::string why;
    const auto svg = p.draw(v, false, why);
    nav += fmt::format("<a href=\"#{}\">{}</a>", p.name, p.heading);
    std::string after;
    if (p.name == "interactions" && svg)
      for (const auto& line : in.interactions->only_together())
        after += "<li>" + escape(line) + "</li>";
    if (!after.empty()) after = "<p>Changes that pay off only together:</p><ul>" + after + "</ul>";
    sections +=
        fmt::format("<section id=\"{}\"><h2>{}</h2><p class=\"caption\">{}</p>{}{}</section>\n",
                    p.name, p.heading, p.caption,
                    svg ? *svg : "<p class=\"absent\">Not drawn: " + escape(why) + ".</p>", after);
  }
  nav += "<a href=\"#constraints\">Learned constraints</a><a href=\"#best\">Best trials</a>";
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>tessel report: {0}</title><style>{1}</style></head>\n<body>"
      "<h1>tessel report: {0}</h1>{2}<nav>{3}</nav>\n{4}"
      "<section id=\"constraints\"><h2>Learned constraints</h2>{5}</section>\n"
      "<section id=\"best\"><h2>Best trials</h2>{6}</section>\n"
      "<p class=\"caption\">Made by tessel report. Hover a point for its trial and config.</p>"
      "</body></html>\n",
      escape(in.record->space_name), page_style, header(v), nav, sections, constraints_block(in),
      best_table(v));
}

std::string report_svg(const report_input& in, std::string_view plot) {
  check(in);
  const auto& all = report_detail::plots();
  const auto found = std::ranges::find(all, plot, &report_detail::plot::name);
  if (found == all.end())
    throw error(fmt::format("report: no plot named '{}' (plots: {})", plot,
                            fmt::join(report_plot_names(), ", ")));
  const report_detail::study_view v(in);
  std::string why;
  auto svg = found->draw(v, true, why);
  if (!svg) throw error(fmt::format("report: plot '{}' has nothing to draw: {}", plot, why));
  return std::move(*svg);
}

}  // namespace tessel
