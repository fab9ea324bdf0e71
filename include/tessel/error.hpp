// tessel/error.hpp: the misuse channel. Bad options, bad .tsl text and empty
// spaces fail before tuning starts with an exception a person can act on;
// evaluation outcomes are data (tessel::status), never exceptions.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tessel {

/// Base of every exception tessel throws on misuse.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One located problem in a .tsl source, rendered compiler-style:
/// `file:line:col: error: message`, the source line, a caret, and a hint.
struct diagnostic {
  enum class severity : std::uint8_t { error, warning, note };
  severity level = severity::error;
  std::string file;         ///< path as given by the caller, or "<input>"
  int line = 0;             ///< 1-based; 0 when the problem has no location
  int column = 0;           ///< 1-based, in bytes
  std::string message;      ///< what is wrong, e.g. "unknown parameter 'tile_q'"
  std::string hint;         ///< optional, e.g. "did you mean 'tile_k'?"
  std::string source_line;  ///< the offending line's text, for the caret display

  /// The full rendering: header line, source line, caret line, hint line.
  [[nodiscard]] std::string render() const;
};

/// Thrown when a .tsl text (or a space built in C++) has one or more errors.
/// Holds every diagnostic of the input, not only the first.
class space_error : public error {
 public:
  explicit space_error(std::vector<diagnostic> diagnostics);
  [[nodiscard]] const std::vector<diagnostic>& diagnostics() const noexcept { return diagnostics_; }

 private:
  std::vector<diagnostic> diagnostics_;
};

/// Thrown when every config of a space is invalid. Names the constraint that
/// rejected the last surviving configs and how many configs it rejected.
class empty_space_error : public error {
 public:
  empty_space_error(std::string message, std::string constraint, std::uint64_t rejected)
      : error(std::move(message)), constraint_(std::move(constraint)), rejected_(rejected) {}
  [[nodiscard]] const std::string& constraint() const noexcept { return constraint_; }
  [[nodiscard]] std::uint64_t rejected() const noexcept { return rejected_; }

 private:
  std::string constraint_;
  std::uint64_t rejected_ = 0;
};

namespace detail {
/// A number options_error writes as a field's value.
template <class T>
concept option_number = std::is_same_v<T, double> ||
    (std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>);
}  // namespace detail

/// Thrown by Options::validate() and friends: the field that breaks a rule
/// ("study::options::jobs"), the value it holds as printed (when the message
/// shows it) and the rule, composed into one format: "FIELD = VALUE: RULE",
/// or "FIELD: RULE" without a value. A caller that knows what a person typed
/// to set the field renames it (renamed()) instead of rewording the text.
class options_error : public error {
 public:
  /// "FIELD: RULE".
  options_error(std::string field, std::string rule);
  /// "FIELD = VALUE: RULE".
  options_error(std::string field, std::string value, std::string rule);
  /// "FIELD = VALUE: RULE" with a number for the value, written as fmt's
  /// "{}" writes it: an integer in full, a double as the shortest text that
  /// reads back (0.5, 1e+300, nan).
  template <detail::option_number Number>
  options_error(std::string field, Number value, std::string rule)
      : options_error(std::move(field), number_text(value), std::move(rule)) {}

  [[nodiscard]] const std::string& field() const noexcept { return field_; }
  [[nodiscard]] const std::optional<std::string>& value() const noexcept { return value_; }
  [[nodiscard]] const std::string& rule() const noexcept { return rule_; }

  /// The same error naming `name` instead of the field, the value written
  /// after `separator`: renamed("--jobs", " ") is "--jobs 100000: must be at
  /// most 4096"; renamed("backend sim: setting target", "=") is "backend
  /// sim: setting target=x: ...".
  [[nodiscard]] options_error renamed(std::string name, std::string_view separator) const;
  /// Whether the field is `field`, or ends with it after "::" or ".": a
  /// field relative to its owner ("racing.margin" names
  /// "cpu_options::racing.margin").
  [[nodiscard]] bool names(std::string_view field) const noexcept;

 private:
  options_error(std::string field, std::optional<std::string> value, std::string rule,
                std::string_view separator);
  template <class Number>
  static std::string number_text(Number value) {
    if constexpr (std::is_same_v<Number, double>)
      return double_text(value);
    else if constexpr (std::is_signed_v<Number>)
      return signed_text(value);
    else
      return unsigned_text(value);
  }
  static std::string double_text(double value);
  static std::string signed_text(long long value);
  static std::string unsigned_text(unsigned long long value);

  std::string field_;
  std::optional<std::string> value_;
  std::string rule_;
};

}  // namespace tessel
