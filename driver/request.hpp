// request.hpp: reading one request line of `serve` or `mcp`, bounded in
// length and depth (docs/limits.md). Private to the driver.
#pragma once

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
#include <string_view>

namespace tessel {

/// Reads one line of at most max_request_line_bytes into `line`; false at the
/// end of input. The rest of a longer line is read and dropped, and
/// `too_long` says so.
bool read_request_line(std::istream& in, std::string& line, bool& too_long);

/// Parses one request line nested at most max_request_depth deep into `out`;
/// "" or why it is not a JSON value (a syntax error, bad UTF-8, a number
/// overflow, too deep). Never throws for bad input.
[[nodiscard]] std::string parse_request(std::string_view line, nlohmann::json& out);

}  // namespace tessel
