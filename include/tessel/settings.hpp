// tessel/settings.hpp: settings given as text, KEY=VALUE, read one way
// everywhere: backend settings (--backend-set, "sim:target=trn2"), strategy
// options ("bo[initial_draws=1]"), multi-fidelity settings (--fidelity-set).
// One list of boolean spellings, numbers read whole (no trailing text), and
// every problem an error that names the owner, the key and what it expects.
#pragma once

#include <tessel/error.hpp>

#include <cstddef>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel {

/// Settings as text, by key ("timeout" -> "5").
using settings_map = std::map<std::string, std::string, std::less<>>;

/// true for 1, true, yes, on; false for 0, false, no, off; nullopt otherwise.
[[nodiscard]] std::optional<bool> parse_flag(std::string_view text) noexcept;
/// The spellings parse_flag accepts, as a person reads them: "true or false (also 1/0, yes/no,
/// on/off)".
[[nodiscard]] std::string_view flag_spellings() noexcept;
/// A finite or infinite double written whole ("1e-3", "inf"); nullopt for
/// anything else ("", "3 s", "1e999").
[[nodiscard]] std::optional<double> parse_number(std::string_view text) noexcept;
/// A whole number from 0 to 2^64-1 written in decimal digits; nullopt otherwise.
[[nodiscard]] std::optional<std::size_t> parse_whole(std::string_view text) noexcept;

/// "KEY=VALUE" strings into settings, the last of a repeated key winning.
/// Throws tessel::error naming `what` (the option, e.g. "--backend-set")
/// for an assignment without '=' or with an empty key.
[[nodiscard]] settings_map parse_assignments(const std::vector<std::string>& assignments,
                                             std::string_view what);

/// A field of an options struct as options_error names it
/// ("study::options::jobs", "sim_options.target", or relative to its owner:
/// "racing.margin", see options_error::names) and what a person typed to set
/// it ("--jobs", a setting's key "target").
struct typed_name {
  std::string_view field, name;
};

/// Reads settings by key, each in the type its owner expects, and rejects
/// the keys nobody read (finish()). `owner` starts every message:
/// "backend sim: setting gate must be true or false ..., got 'maybe'".
class settings_reader {
 public:
  /// `given` must outlive the reader.
  settings_reader(std::string owner, const settings_map& given);

  [[nodiscard]] std::optional<std::string> text(std::string_view key);
  [[nodiscard]] std::optional<double> number(std::string_view key);
  /// A whole number >= `min`.
  [[nodiscard]] std::optional<std::size_t> count(std::string_view key, std::size_t min = 0);
  [[nodiscard]] std::optional<bool> flag(std::string_view key);
  /// One of `choices` (listed in the message otherwise).
  [[nodiscard]] std::optional<std::string> choice(std::string_view key,
                                                  const std::vector<std::string_view>& choices);
  /// Every setting whose key starts with `prefix` ("env."), prefix removed;
  /// listed as PREFIXNAME among the known keys.
  [[nodiscard]] std::map<std::string, std::string> prefixed(std::string_view prefix);

  /// Throws tessel::error for a setting no one read, naming the known ones.
  void finish() const;

  /// Fields validated() names by their settings, as well as its own list:
  /// those a shared reader sets (the racing settings of every timing
  /// backend). `fields` must outlive the reader.
  void also_names(std::span<const typed_name> fields);

  /// `make()`, which builds what the settings configure; an options_error
  /// it throws naming one of `fields` (an options field and the key that
  /// sets it) or of also_names() is thrown again naming the setting, as a
  /// person gave it: "backend sim: setting target: unknown target 'x' (...)"
  /// rather than "sim_options.target: ...". A C++ caller of the options
  /// keeps the field.
  template <class Make>
  auto validated(std::initializer_list<typed_name> fields, Make&& make) const {
    try {
      return std::forward<Make>(make)();
    } catch (const options_error& e) {
      rethrow_named(e, fields);
    }
  }

  /// Throws tessel::error "OWNER: setting KEY must be EXPECTED, got 'TEXT'".
  [[noreturn]] void reject(std::string_view key, std::string_view expected,
                           std::string_view text) const;

 private:
  /// Throws `e` naming the setting of the first of `fields` it names, else `e` itself.
  [[noreturn]] void rethrow_named(const options_error& e,
                                  std::initializer_list<typed_name> fields) const;

  std::string owner_;
  const settings_map& given_;
  std::vector<std::span<const typed_name>> also_;
  std::set<std::string, std::less<>> known_, used_;
};

}  // namespace tessel
