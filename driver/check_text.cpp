// check_text.cpp: what `tessel check` prints about a space
// (tessel/space_check.hpp): the same pieces as check_json, as text.
#include <tessel/codec.hpp>
#include <tessel/space_check.hpp>
#include <tessel/text.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace tessel {
namespace {

using json = nlohmann::ordered_json;

std::string target_description(const target& t) {
  return t.base.empty() ? t.name : fmt::format("{} (based on {})", t.name, t.base);
}

void add_header(std::string& out, const loaded_space& loaded, const check_request& request) {
  const space& s = loaded.space;
  std::string where = request.file;
  if (loaded.space_names.size() > 1)
    where +=
        fmt::format("; space {} of {}: {}",
                    1 + static_cast<std::size_t>(std::find(loaded.space_names.begin(),
                                                           loaded.space_names.end(), s.name()) -
                                                 loaded.space_names.begin()),
                    loaded.space_names.size(), fmt::join(loaded.space_names, ", "));
  out += fmt::format("space         {} ({})\n", s.name(), where);
  out += fmt::format("target        {}\n", target_description(s.def().target));
  if (!s.def().constants.empty()) {
    std::vector<std::string> constants;
    for (const auto& c : s.def().constants)
      constants.push_back(fmt::format("{} = {}", c.name, constant_text(s.def(), c)));
    out += fmt::format("constants     {}\n", fmt::join(constants, ", "));
  }
}

void add_parameters(std::string& out, const space& s) {
  std::size_t name_width = 4;
  std::size_t size_width = 4;
  for (const auto& p : s.parameters()) {
    name_width = std::max(name_width, p.name.size());
    size_width = std::max(size_width, with_separators(p.dom.size()).size());
  }
  out += fmt::format("\nparameters ({})\n", s.size());
  out += fmt::format("  {:<{}}  {:<11}  {:>{}}  {}\n", "name", name_width, "kind", "size",
                     size_width, "domain");
  for (const auto& p : s.parameters()) {
    std::string notes;
    if (p.default_index) notes += fmt::format("  default {}", p.dom.label(*p.default_index));
    if (p.when) notes += "  conditional";
    out +=
        fmt::format("  {:<{}}  {:<11}  {:>{}}  {}{}\n", p.name, name_width, to_string(p.dom.kind),
                    with_separators(p.dom.size()), size_width, domain_preview(p.dom), notes);
  }
}

void add_sizes(std::string& out, const loaded_space& loaded) {
  const space& s = loaded.space;
  const auto raw = s.cartesian_size();
  out += fmt::format(
      "\nraw size      {}\n",
      raw ? with_separators(*raw) : fmt::format("~1e{:.1f} (over 2^64)", s.log10_cartesian_size()));
  out += fmt::format("valid         {} ({})\n", with_separators(s.count()),
                     percent(valid_fraction(s)));
  out += fmt::format("construction  {} (parse+check {}, engine {})\n",
                     milliseconds(loaded.parse_ms + loaded.build_ms), milliseconds(loaded.parse_ms),
                     milliseconds(loaded.build_ms));
}

void add_groups(std::string& out, const space& s) {
  out += fmt::format("\ngroups ({})\n", s.groups().size());
  std::size_t number = 0;
  for (const auto& g : s.groups()) {
    std::vector<std::string> names;
    for (auto p : g.parameters) names.push_back(parameter_name(s, p));
    out += fmt::format("  {}  {}: {} valid, {} nodes\n", ++number, fmt::join(names, ", "),
                       with_separators(g.valid), with_separators(g.nodes));
  }
}

void add_constraints(std::string& out, const space& s) {
  const auto& constraints = s.def().constraints;
  const auto& stats = s.constraint_stats();
  out += fmt::format("\nconstraints ({})\n", constraints.size());
  for (std::size_t i = 0; i < constraints.size(); ++i) {
    const auto& c = constraints[i];
    const std::string label =
        c.message.empty() ? c.text : fmt::format("\"{}\": {}", c.message, c.text);
    out +=
        fmt::format("  {}  {}\n",
                    c.line > 0 ? fmt::format("line {}", c.line) : fmt::format("#{}", i + 1), label);
    if (i < stats.size())
      out += fmt::format(
          "      attached to {}, rejects {} ({} of raw)\n", parameter_name(s, stats[i].attached_to),
          with_separators(stats[i].rejected), percent(raw_fraction(s, stats[i].rejected)));
  }
}

/// A JSON value on one line, arrays spaced: `["k", "m", "n"]`.
std::string spaced(const json& value) {
  if (!value.is_array()) return value.dump();
  std::vector<std::string> items;
  for (const auto& item : value) items.push_back(spaced(item));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

/// `{"tile": 16, "unroll": 4, "order": ["k", "m", "n"]}`: one line, spaced for reading.
std::string sample_line(const space& s, const config& c) {
  std::vector<std::string> fields;
  const json sample = sample_json(s, c);
  for (const auto& [name, value] : sample.items())
    fields.push_back(fmt::format("\"{}\": {}", name, spaced(value)));
  return fmt::format("{{{}}}", fmt::join(fields, ", "));
}

void add_samples(std::string& out, const space& s, const std::vector<config>& samples,
                 std::uint64_t seed) {
  if (samples.empty()) return;
  out += fmt::format("\nsamples ({}, seed {})\n", samples.size(), seed);
  for (const auto& c : samples) out += fmt::format("  {}\n", sample_line(s, c));
}

void add_backend(std::string& out, const std::optional<backend_review>& report) {
  if (!report) return;
  out += fmt::format("\nbackend       {}\n", report->name);
  for (const auto& note : report->notes) out += fmt::format("  {}\n", note);
}

}  // namespace

std::string check_text(const loaded_space& loaded, const check_request& request) {
  const space& s = loaded.space;
  std::string out;
  add_header(out, loaded, request);
  add_parameters(out, s);
  add_sizes(out, loaded);
  add_groups(out, s);
  add_constraints(out, s);
  add_backend(out, request.backend);
  add_samples(out, s, draw_samples(s, request.samples, request.seed), request.seed);
  return out;
}

}  // namespace tessel
