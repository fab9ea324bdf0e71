// The rendering of diagnostics (include/tessel/error.hpp).
#include <tessel/codec.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>

#include <string_view>

namespace tessel {

std::string_view to_string(diagnostic::severity level) noexcept {
  switch (level) {
    case diagnostic::severity::warning: return "warning";
    case diagnostic::severity::note: return "note";
    case diagnostic::severity::error: break;
  }
  return "error";
}

namespace {

/// Spaces up to byte `column` of `line`, keeping its tabs so the caret lines up.
std::string caret_line(std::string_view line, int column) {
  std::string caret;
  for (std::size_t i = 0; i + 1 < static_cast<std::size_t>(column); ++i) {
    caret += i < line.size() && line[i] == '\t' ? '\t' : ' ';
  }
  return caret + '^';
}

std::string render_all(const std::vector<diagnostic>& diagnostics) {
  std::string text;
  for (const auto& d : diagnostics) {
    if (!text.empty()) text += '\n';
    text += d.render();
  }
  return text;
}

}  // namespace

std::string diagnostic::render() const {
  std::string text = file;
  if (line > 0) text += ":" + std::to_string(line) + ":" + std::to_string(column);
  text += ": ";
  text += to_string(level);
  text += ": " + message;
  if (line > 0 && column > 0 && !source_line.empty()) {
    text += "\n" + source_line + "\n" + caret_line(source_line, column);
  }
  if (!hint.empty()) text += "\n  hint: " + hint;
  return text;
}

space_error::space_error(std::vector<diagnostic> diagnostics)
    : error(render_all(diagnostics)), diagnostics_(std::move(diagnostics)) {}

namespace {

/// "FIELD = VALUE: RULE" with `separator` for " = ", or "FIELD: RULE".
std::string options_text(std::string_view field, const std::optional<std::string>& value,
                         std::string_view rule, std::string_view separator) {
  std::string out(field);
  if (value) out.append(separator).append(*value);
  return out.append(": ").append(rule);
}

}  // namespace

options_error::options_error(std::string field, std::optional<std::string> value, std::string rule,
                             std::string_view separator)
    : error(options_text(field, value, rule, separator)),
      field_(std::move(field)),
      value_(std::move(value)),
      rule_(std::move(rule)) {}

options_error::options_error(std::string field, std::string rule)
    : options_error(std::move(field), std::nullopt, std::move(rule), " = ") {}

options_error::options_error(std::string field, std::string value, std::string rule)
    : options_error(std::move(field), std::optional(std::move(value)), std::move(rule), " = ") {}

std::string options_error::double_text(double value) { return fmt::format("{}", value); }
std::string options_error::signed_text(long long value) { return fmt::format("{}", value); }
std::string options_error::unsigned_text(unsigned long long value) {
  return fmt::format("{}", value);
}

options_error options_error::renamed(std::string name, std::string_view separator) const {
  return {std::move(name), value_, rule_, separator};
}

bool options_error::names(std::string_view field) const noexcept {
  const std::string_view mine = field_;
  if (mine == field) return true;
  if (field.empty() || !mine.ends_with(field)) return false;
  const auto owner = mine.substr(0, mine.size() - field.size());
  return owner.ends_with("::") || owner.ends_with('.');
}

}  // namespace tessel
