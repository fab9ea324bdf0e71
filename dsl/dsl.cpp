// The public entry points of the language (include/tessel/dsl.hpp).
#include "file.hpp"
#include "model.hpp"

#include <tessel/did_you_mean.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>

#include <algorithm>

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
  if (chosen == spaces.end()) {
    auto hint = did_you_mean(name, all);
    if (hint.empty()) {  // no near name: say which there are, the first 8
      hint = "the file declares " + std::to_string(all.size()) +
             (all.size() == 1 ? " space: " : " spaces: ");
      for (std::size_t i = 0; i < all.size() && i < 8; ++i) hint += (i > 0 ? ", " : "") + all[i];
      if (all.size() > 8) hint += ", ...";
    }
    fail(options.file, "unknown space '" + std::string(name) + "'", hint);
  }
  chosen->source = std::string(text);
  return std::move(*chosen);
}

space parse_space(std::string_view text, const parse_options& options, std::string_view name) {
  return space(parse_definition(text, options, name));
}

namespace {

/// The file's text; a file too large or unreadable is a diagnostic of `shown`.
std::string read_text(const std::filesystem::path& path, const std::string& shown) {
  try {
    return read_text_file(path);
  } catch (const error& e) {
    fail(shown, e.what());
  }
}

}  // namespace

std::optional<std::string> read_file_at_most(const std::filesystem::path& path, std::size_t limit) {
  try {
    return read_file_at_most_bytes(path, limit);
  } catch (const error&) {
    return std::nullopt;
  }
}

std::string read_text_file(const std::filesystem::path& path, std::size_t limit) {
  const auto shown = "'" + path.string() + "'";
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > limit)  // a regular file: said before reading it
    throw error(shown + " is " + std::to_string(size) + " bytes; at most " + std::to_string(limit) +
                " are read (docs/limits.md)");
  auto text = read_file_at_most_bytes(path, limit);  // names the path and the cause
  if (text.size() > limit)  // a device or a pipe, whose size is known only now
    throw error(shown + " holds more than " + std::to_string(limit) +
                " bytes; at most that many are read (docs/limits.md)");
  return text;
}

space load_space(const std::filesystem::path& path, parse_options options, std::string_view name) {
  if (options.file == parse_options{}.file) options.file = path.string();
  return parse_space(read_text(path, options.file), options, name);
}

model_definition parse_model(std::string_view text, const parse_options& options,
                             std::string_view name) {
  const dsl::source src(text, options.file);
  return dsl::check_model(src, options, name);
}

model_definition load_model(const std::filesystem::path& path, parse_options options,
                            std::string_view name) {
  if (options.file == parse_options{}.file) options.file = path.string();
  return parse_model(read_text(path, options.file), options, name);
}

std::vector<target> parse_targets(std::string_view text, const parse_options& options) {
  dsl::source src(text, options.file);
  return dsl::check_file(src, options, false).targets;
}

}  // namespace tessel
