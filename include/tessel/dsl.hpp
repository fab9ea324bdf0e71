// tessel/dsl.hpp: the .tsl language (docs/language.md). Parses a text with
// one or more `space` blocks, checks it against a target, and builds spaces.
// The grammar (Boost.Spirit X3) lives in one compiled translation unit, so
// including this header costs nothing.
#pragma once

#include <tessel/space.hpp>
#include <tessel/target.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

struct parse_options {
  std::string file = "<input>";  ///< shown in diagnostics
  /// The target to check against: a built-in (trn1, trn2, cpu) or one the
  /// file declares (`target my_chip : trn2 { ... }`).
  std::string target = "trn2";
  /// `--set NAME=VALUE`: overrides of `const` values, by name. An override of
  /// a name no space declares is an error with a did-you-mean hint.
  std::map<std::string, std::string, std::less<>> overrides;
};

/// The checked definitions of every space in `text`, in file order. Throws
/// space_error holding every diagnostic of the text (never only the first).
[[nodiscard]] std::vector<space::definition> parse_definitions(std::string_view text,
                                                               const parse_options& options = {});

/// The space named `name` ("" for the only/first one) of `text`, built.
/// Throws space_error (bad text, unknown space name) or empty_space_error.
[[nodiscard]] space parse_space(std::string_view text, const parse_options& options = {},
                                std::string_view name = "");

/// As parse_space, reading the file at `path` (options.file defaults to it).
[[nodiscard]] space load_space(const std::filesystem::path& path, parse_options options = {},
                               std::string_view name = "");

/// Targets the text declares (`target NAME : BASE { ... }`), resolved against
/// the built-ins, in file order.
[[nodiscard]] std::vector<target> parse_targets(std::string_view text,
                                                const parse_options& options = {});

}  // namespace tessel
