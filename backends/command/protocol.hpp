// protocol.hpp: what a command backend's program reports, read from its
// stdout, exit status and stderr (docs/backends.md, "The command protocol").
// Private to the command backend.
#pragma once

#include "command/process.hpp"

#include <tessel/backends.hpp>
#include <tessel/measurement.hpp>

#include <string>
#include <string_view>

namespace tessel::detail {

/// The measurement a finished program stands for. Never throws.
[[nodiscard]] measurement interpret(const process_result& result, const command_options& options);

/// Why a run that ran past options.limit_s() was killed: the limit, whether
/// it was set (timeout) or the default, and how to change it.
[[nodiscard]] std::string timeout_message(const command_options& options);

/// `text` safe to show on a terminal: ANSI escape sequences (colours, cursor
/// moves, window titles) removed, "\r\n" read as "\n", and every other control
/// character but newline and tab replaced by '?'.
[[nodiscard]] std::string printable(std::string_view text);

/// The last `lines` lines of `text`, at most `bytes` bytes of them ("" when
/// `text` is blank), printable (a program's stderr carries colours and
/// control characters that would reach the terminal from `tessel show`); a
/// cut is marked with "...".
[[nodiscard]] std::string tail_of(std::string_view text, std::size_t lines, std::size_t bytes);

}  // namespace tessel::detail
