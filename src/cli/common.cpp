#include "common.hpp"

#include "format.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessel::cli {
namespace {

using clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;  // keys in the order written: "ok" first

double elapsed_ms(clock::time_point from, clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

/// `NAME=VALUE` with a non-empty NAME; CLI11 reports the message as a usage error.
std::string check_assignment(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return "expected NAME=VALUE, got '" + text + "'";
  return {};
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_source_bytes)  // say so before reading it
    throw tessel::error(fmt::format("'{}' is {} bytes; at most {} are read (docs/limits.md)", path,
                                    size, max_source_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tessel::error(fmt::format("cannot read '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw tessel::error(fmt::format("cannot read '{}'", path));
  return std::move(text).str();
}

parse_options to_parse_options(const space_options& options) {
  parse_options parse;
  parse.file = options.file;
  parse.target = options.target;
  for (const auto& assignment : options.sets) {
    const auto eq = assignment.find('=');
    parse.overrides[assignment.substr(0, eq)] = assignment.substr(eq + 1);  // last one wins
  }
  return parse;
}

std::string_view severity_name(diagnostic::severity level) {
  switch (level) {
    case diagnostic::severity::error: return "error";
    case diagnostic::severity::warning: return "warning";
    case diagnostic::severity::note: return "note";
  }
  return "error";
}

void print_to_stderr(std::string_view text) {
  fmt::print(stderr, "{}", text);
  if (text.empty() || text.back() != '\n') fmt::print(stderr, "\n");
}

json to_json(const diagnostic& d) {
  return {{"severity", severity_name(d.level)},
          {"file", d.file},
          {"line", d.line},
          {"column", d.column},
          {"message", d.message},
          {"hint", d.hint},
          {"rendered", d.render()}};
}

/// Whether print_json_error writes one line (serve) or an indented object.
bool json_one_line = false;

/// `{"ok": false, "error": {...}}` on stdout, for --json callers.
void print_json_error(json error) {
  const json out = {{"ok", false}, {"error", std::move(error)}};
  // User text (messages, source lines) may hold invalid UTF-8: replaced, never thrown.
  fmt::print("{}\n", out.dump(json_one_line ? -1 : 2, ' ', false, json::error_handler_t::replace));
}

int report(const space_error& e, bool as_json) {
  for (const auto& d : e.diagnostics()) print_to_stderr(d.render());
  if (e.diagnostics().empty()) print_to_stderr(fmt::format("tessel: error: {}", e.what()));
  if (as_json) {
    json diagnostics = json::array();
    for (const auto& d : e.diagnostics()) diagnostics.push_back(to_json(d));
    print_json_error(
        {{"kind", "diagnostics"}, {"message", e.what()}, {"diagnostics", diagnostics}});
  }
  return exit_code::bad_input;
}

int report(const empty_space_error& e, bool as_json) {
  print_to_stderr(fmt::format("tessel: error: {}", e.what()));
  print_to_stderr(fmt::format("  emptied by: {} (rejected {} configs)", e.constraint(),
                              with_separators(e.rejected())));
  if (as_json) {
    print_json_error({{"kind", "empty_space"},
                      {"message", e.what()},
                      {"constraint", e.constraint()},
                      {"rejected", e.rejected()}});
  }
  return exit_code::bad_input;
}

}  // namespace

void add_space_options(CLI::App& command, space_options& options) {
  command.add_option("FILE", options.file, "The .tsl file to read")
      ->type_name("PATH")
      ->required()
      ->check(CLI::ExistingFile.description(""));  // keep "PATH" alone in --help
  command
      .add_option("--space", options.space,
                  "The space to use when FILE declares several (default: the first)")
      ->type_name("NAME");
  command
      .add_option("--target", options.target,
                  "The target to check against: trn1, trn2, cpu, or a target FILE declares "
                  "(default trn2; cpu with --backend cpu)")
      ->type_name("TARGET")
      ->each([&options](const std::string&) { options.target_given = true; })
      ->capture_default_str();
  command
      .add_option("--set", options.sets,
                  "Override a const of the space, e.g. --set M=8192; repeatable")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_assignment, "", "assignment"));
}

loaded_space load(const space_options& options) {
  const std::string text = read_file(options.file);
  const parse_options parse = to_parse_options(options);

  const auto start = clock::now();
  std::vector<std::string> names;
  space::definition chosen = parse_definition(text, parse, options.space, &names);
  const auto parsed = clock::now();

  const auto building = clock::now();
  tessel::space built(std::move(chosen));
  const auto done = clock::now();
  return loaded_space{.space = std::move(built),
                      .space_names = std::move(names),
                      .parse_ms = elapsed_ms(start, parsed),
                      .build_ms = elapsed_ms(building, done)};
}

int report_errors(const std::function<int()>& body, bool as_json, bool one_line) {
  json_one_line = one_line;
  try {
    return body();
  } catch (const space_error& e) {
    return report(e, as_json);
  } catch (const empty_space_error& e) {
    return report(e, as_json);
  } catch (const tessel::error& e) {
    print_to_stderr(fmt::format("tessel: error: {}", e.what()));
    if (as_json) print_json_error({{"kind", "error"}, {"message", e.what()}});
    return exit_code::bad_input;
  } catch (const std::exception& e) {
    print_to_stderr(fmt::format("tessel: internal error: {}", e.what()));
    if (as_json) print_json_error({{"kind", "internal"}, {"message", e.what()}});
    return exit_code::internal;
  }
}

}  // namespace tessel::cli
