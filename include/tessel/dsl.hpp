// tessel/dsl.hpp: the .tsl language (docs/language.md). Parses a text with
// one or more `space` blocks, checks it against a target, and builds spaces.
// The grammar (Boost.Spirit X3) lives in one compiled translation unit, so
// including this header costs nothing.
#pragma once

#include <tessel/model.hpp>
#include <tessel/space.hpp>
#include <tessel/target.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
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

/// Limits on what the language reads (docs/limits.md). Past one, parsing
/// stops early with a space_error that names the limit.
inline constexpr std::size_t max_source_bytes = std::size_t{16} << 20;  ///< 16 MiB of text
inline constexpr std::size_t max_domain_values = 1'000'000;             ///< values of one domain
inline constexpr std::size_t max_diagnostics = 100;  ///< errors kept; the rest are counted
/// parse_definitions copies the text into each definition (`source`); past
/// this many bytes in all it asks for one space by name instead.
inline constexpr std::size_t max_copied_source_bytes = std::size_t{256} << 20;

/// The bytes of the file at `path`, read in blocks and never more than
/// `limit` + 1 of them, so a device or a pipe that never ends (/dev/zero)
/// costs at most that: a result longer than `limit` means the file holds more,
/// and the caller refuses it. std::nullopt when it cannot be opened or read
/// (a folder, no permission, a FIFO that nothing writes to: never waits);
/// read_file_at_most_bytes (tessel/files.hpp) says why.
[[nodiscard]] std::optional<std::string> read_file_at_most(const std::filesystem::path& path,
                                                           std::size_t limit);
/// The text of the file at `path`, refused past `limit` bytes (a regular
/// file by its size, before it is read; a device or a pipe after limit + 1
/// bytes, read_file_at_most). Throws tessel::error naming the path and the
/// limit, "'PATH' holds more than LIMIT bytes; at most that many are read
/// (docs/limits.md)", or why it cannot be read (check_path in
/// tessel/files.hpp: a folder, a FIFO that nothing writes to, the OS's
/// message); a caller adds its context
/// (the option or the diagnostic that names the file).
[[nodiscard]] std::string read_text_file(const std::filesystem::path& path,
                                         std::size_t limit = max_source_bytes);

/// The checked definitions of every space in `text`, in file order, each
/// holding the whole text as `source`. Throws space_error holding every
/// diagnostic of the text (never only the first), or naming
/// max_copied_source_bytes when the copies would pass it.
[[nodiscard]] std::vector<space::definition> parse_definitions(std::string_view text,
                                                               const parse_options& options = {});

/// The checked definition of the space named `name` ("" for the first) of
/// `text`: as parse_definitions, with the text copied once. `names`, when
/// given, receives the name of every space of the text, in file order.
/// Throws space_error (bad text, no space, an unknown name with a hint).
[[nodiscard]] space::definition parse_definition(std::string_view text,
                                                 const parse_options& options = {},
                                                 std::string_view name = "",
                                                 std::vector<std::string>* names = nullptr);

/// The space named `name` ("" for the only/first one) of `text`, built
/// (parse_definition, then the engine).
/// Throws space_error (bad text, unknown space name) or empty_space_error.
[[nodiscard]] space parse_space(std::string_view text, const parse_options& options = {},
                                std::string_view name = "");

/// As parse_space, reading the file at `path` (options.file defaults to it).
[[nodiscard]] space load_space(const std::filesystem::path& path, parse_options options = {},
                               std::string_view name = "");

/// The model named `name` ("" for the first) of `text` (docs/models.md): its
/// consts (options.overrides set them, by name), and each kernel's space read
/// from the file it names (relative to the directory of options.file) or
/// from `text`, with the kernel's sets and dtype applied, checked against
/// options.target and built. Throws space_error holding every diagnostic,
/// each at its line in the model (a kernel's space's own errors follow the
/// one that names the kernel).
[[nodiscard]] model_definition parse_model(std::string_view text, const parse_options& options = {},
                                           std::string_view name = "");

/// As parse_model, reading the file at `path` (options.file defaults to it).
[[nodiscard]] model_definition load_model(const std::filesystem::path& path,
                                          parse_options options = {}, std::string_view name = "");

/// Targets the text declares (`target NAME : BASE { ... }`), resolved against
/// the built-ins, in file order.
[[nodiscard]] std::vector<target> parse_targets(std::string_view text,
                                                const parse_options& options = {});

}  // namespace tessel
