// dsl/source.hpp: a .tsl text with its file name, and the diagnostics found
// in it. Maps byte offsets to 1-based line and column and builds diagnostics
// that carry the offending line, so a rendering needs nothing else.
#pragma once

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::dsl {

/// A half-open byte range [begin, end) of the source text.
struct span {
  std::size_t begin = 0;
  std::size_t end = 0;
};

class source {
 public:
  /// `text` must outlive this object.
  source(std::string_view text, std::string file);

  [[nodiscard]] std::string_view text() const noexcept { return text_; }
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  /// 1-based line of `offset` (offsets past the end map to the last line).
  [[nodiscard]] int line_of(std::size_t offset) const;
  /// 1-based byte column of `offset`.
  [[nodiscard]] int column_of(std::size_t offset) const;
  /// The text of 1-based `line`, without its newline.
  [[nodiscard]] std::string_view line_text(int line) const;
  /// The text of `s` with comments removed and whitespace runs collapsed to one
  /// space: how a constraint is shown in reports.
  [[nodiscard]] std::string normalized(span s) const;

 private:
  std::string_view text_;
  std::string file_;
  std::vector<std::size_t> line_starts_;
};

/// Collects the diagnostics of one source; every check appends, none throws.
/// Keeps the first tessel::max_diagnostics and counts the rest.
class reporter {
 public:
  explicit reporter(const source& src) : source_(&src) {}

  /// An error located at byte `offset`.
  void error(std::size_t offset, std::string message, std::string hint = {});
  /// An error with no location (bad options, unknown target or space name).
  void error(std::string message, std::string hint = {});
  /// A diagnostic of another text (a space file a model names), kept as it is.
  void add(diagnostic d);

  [[nodiscard]] bool empty() const noexcept { return list_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
  [[nodiscard]] const std::vector<diagnostic>& list() const noexcept { return list_; }
  [[nodiscard]] const source& src() const noexcept { return *source_; }
  /// Throws space_error holding every diagnostic, if there is any.
  void throw_if_any() const;

 private:
  const source* source_;
  std::vector<diagnostic> list_;
  std::size_t dropped_ = 0;
};

}  // namespace tessel::dsl
