// The rendering of diagnostics (include/tessel/error.hpp).
#include <tessel/codec.hpp>
#include <tessel/error.hpp>

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

}  // namespace tessel
