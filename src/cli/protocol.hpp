// src/cli/protocol.hpp: the JSON-lines transport of `tessel serve`
// (docs/serve.md). One request per line, one response per line of valid
// UTF-8 JSON, whatever the request holds; a bad line gets {"ok": false,
// "error": "..."} and the session goes on. The ops themselves are in
// ops.hpp, shared with `tessel mcp`.
#pragma once

#include "ops.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>

namespace tessel::cli {

/// The most bytes of one request line of `serve` or `mcp` (docs/limits.md).
constexpr std::size_t max_request_line_bytes = std::size_t{16} << 20;
/// The deepest nesting of a request's JSON (answers are written recursively).
constexpr int max_request_depth = 64;

/// Reads one line of at most max_request_line_bytes into `line`; false at the
/// end of input. The rest of a longer line is read and dropped, and
/// `too_long` says so.
bool read_request_line(std::istream& in, std::string& line, bool& too_long);

/// Parses one request line nested at most max_request_depth deep into `out`;
/// "" or why it is not a JSON value (a syntax error, bad UTF-8, a number overflow, too
/// deep). Never throws for bad input.
[[nodiscard]] std::string parse_request(std::string_view line, nlohmann::json& out);

class protocol {
 public:
  explicit protocol(ops& o) : ops_(o) {}

  /// The response line (without a newline) to one request line. Never throws.
  [[nodiscard]] std::string handle(std::string_view line);

  /// Whether a `quit` request was handled.
  [[nodiscard]] bool done() const noexcept { return ops_.done(); }

 private:
  [[nodiscard]] std::string answer(std::string_view line);

  ops& ops_;
};

}  // namespace tessel::cli
