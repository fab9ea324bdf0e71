// src/cli/common.hpp: what every subcommand that reads a space shares:
// the FILE/--space/--target/--set options, loading and timing the space, and
// turning exceptions into diagnostics on stderr and an exit code.
#pragma once

#include <tessel/dsl.hpp>
#include <tessel/space.hpp>

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace tessel::cli {

/// The process exit codes of every subcommand (docs/cli.md).
enum exit_code : int {
  success = 0,
  bad_input = 1,  ///< diagnostics in the .tsl text, an empty space, an unreadable file
  usage = 2,      ///< the command line itself is wrong (reported by CLI11)
  internal = 3,   ///< an unexpected exception: a bug in tessel
};

/// `FILE [--space NAME] [--target T] [--set K=V]...`
struct space_options {
  std::string file;
  std::string space;  ///< "" selects the first space of FILE
  std::string target = "trn2";
  bool target_given = false;      ///< --target was on the command line (else a backend may pick it)
  std::vector<std::string> sets;  ///< "NAME=VALUE", checked by add_space_options
};

/// Adds the space options to `command`, storing into `options` (which must
/// outlive parsing). A --set without '=' is a usage error.
void add_space_options(CLI::App& command, space_options& options);

/// A space read from a file, with what it took to build it.
struct loaded_space {
  tessel::space space;
  std::vector<std::string> space_names;  ///< every space FILE declares, in file order
  double parse_ms = 0;                   ///< reading, parsing and checking the text
  double build_ms = 0;                   ///< building the engine (counting, prefix trees)
};

/// Reads, checks and builds the space `options` selects. Throws tessel::error
/// (unreadable file), space_error (diagnostics, unknown space name) or
/// empty_space_error, as the DSL does.
[[nodiscard]] loaded_space load(const space_options& options);

/// Runs `body`; on an exception prints what a person needs on stderr (every
/// rendered diagnostic, the constraint that emptied a space) and returns the
/// matching exit_code. With `json`, also prints one JSON object
/// `{"ok": false, "error": {...}}` on stdout so scripts can parse failures
/// (on one line with `one_line`, as `serve` needs). Never exits the process:
/// bad input is exit_code::bad_input, only a bug is exit_code::internal.
[[nodiscard]] int report_errors(const std::function<int()>& body, bool json, bool one_line = false);

}  // namespace tessel::cli
