// The public entry points of the language (include/tessel/dsl.hpp).
#include "file.hpp"
#include "suggest.hpp"

#include <tessel/dsl.hpp>

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
  return dsl::check_file(src, options).spaces;
}

space parse_space(std::string_view text, const parse_options& options, std::string_view name) {
  auto definitions = parse_definitions(text, options);
  if (definitions.empty())
    fail(options.file, "no space is defined", "declare one with: space NAME { ... }");
  if (name.empty()) return space(std::move(definitions.front()));
  std::vector<std::string> names;
  for (auto& def : definitions) {
    if (def.name == name) return space(std::move(def));
    names.push_back(def.name);
  }
  fail(options.file, "unknown space '" + std::string(name) + "'", dsl::did_you_mean(name, names));
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
