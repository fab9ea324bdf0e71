// The public entry points of the language (include/tessel/dsl.hpp).
#include "file.hpp"

#include <tessel/did_you_mean.hpp>
#include <tessel/dsl.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tessel {

namespace {

[[noreturn]] void fail(const std::string& file, std::string message, std::string hint = {}) {
  diagnostic d;
  d.file = file;
  d.message = std::move(message);
  d.hint = std::move(hint);
  throw space_error({std::move(d)});
}

}  // namespace

std::vector<space::definition> parse_definitions(std::string_view text,
                                                 const parse_options& options) {
  dsl::source src(text, options.file);
  auto spaces = dsl::check_file(src, options).spaces;
  if (spaces.size() > 1 && text.size() > max_copied_source_bytes / spaces.size())
    fail(options.file,
         "the text declares " + std::to_string(spaces.size()) + " spaces in " +
             std::to_string(text.size()) + " bytes: a copy of it for each would pass " +
             std::to_string(max_copied_source_bytes >> 20) + " MiB",
         "read one space by name (parse_definition, parse_space; tessel --space NAME)");
  for (auto& def : spaces) def.source = std::string(text);
  return spaces;
}

space::definition parse_definition(std::string_view text, const parse_options& options,
                                   std::string_view name, std::vector<std::string>* names) {
  dsl::source src(text, options.file);
  auto spaces = dsl::check_file(src, options).spaces;
  std::vector<std::string> all;
  all.reserve(spaces.size());
  for (const auto& def : spaces) all.push_back(def.name);
  if (names != nullptr) *names = all;
  if (spaces.empty())
    fail(options.file, "no space is defined", "declare one with: space NAME { ... }");
  auto chosen = name.empty() ? spaces.begin()
                             : std::find_if(spaces.begin(), spaces.end(),
                                            [&](const auto& def) { return def.name == name; });
  if (chosen == spaces.end())
    fail(options.file, "unknown space '" + std::string(name) + "'", did_you_mean(name, all));
  chosen->source = std::string(text);
  return std::move(*chosen);
}

space parse_space(std::string_view text, const parse_options& options, std::string_view name) {
  return space(parse_definition(text, options, name));
}

space load_space(const std::filesystem::path& path, parse_options options, std::string_view name) {
  if (options.file == parse_options{}.file) options.file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(options.file, "cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_space(text.str(), options, name);
}

std::vector<target> parse_targets(std::string_view text, const parse_options& options) {
  dsl::source src(text, options.file);
  return dsl::check_file(src, options, false).targets;
}

}  // namespace tessel
