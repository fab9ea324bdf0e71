// The JSON-lines protocol of `tessel serve` (tessel/ops.hpp, docs/serve.md),
// and the request reading it shares with the MCP server (driver/request.hpp).
#include "request.hpp"

#include <tessel/ops.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <istream>
#include <ostream>
#include <string_view>

namespace tessel {

namespace {

using json = nlohmann::json;

/// The one-line answer: user text in it (messages, constraint texts) may be
/// invalid UTF-8; it is replaced, never thrown.
std::string one_line(const json& answer) {
  return answer.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// The response to one request line; throws only what the ops cannot catch.
std::string answer(agent_ops& ops, std::string_view line) {
  json response = {{"ok", true}};
  json req;
  if (auto why = parse_request(line, req); !why.empty())
    return one_line({{"ok", false}, {"error", std::move(why)}});
  if (req.is_object() && req.contains("id")) response["id"] = req["id"];
  try {
    if (!req.is_object() || !req.contains("op") || !req["op"].is_string())
      throw op_error(op_error_kind::bad_arguments,
                     "each request is a JSON object with an \"op\": one of " + op_names());
    const auto op = req["op"].get<std::string>();
    json args = req;
    args.erase("op");
    args.erase("id");
    json result = ops.call(op, args);
    for (auto& [key, value] : result.items()) response[key] = std::move(value);
  } catch (const std::exception& e) {
    response["ok"] = false;
    response["error"] = e.what();
  }
  return one_line(response);
}

}  // namespace

bool read_request_line(std::istream& in, std::string& line, bool& too_long) {
  line.clear();
  too_long = false;
  std::streambuf* buffer = in.rdbuf();
  for (;;) {
    const auto c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) return !line.empty() || too_long;
    if (c == '\n') return true;
    if (line.size() < max_request_line_bytes)
      line.push_back(static_cast<char>(c));
    else
      too_long = true;
  }
}

std::string parse_request(std::string_view line, json& out) {
  bool too_deep = false;
  try {
    out = json::parse(line, [&](int depth, json::parse_event_t, json&) {
      too_deep = too_deep || depth > max_request_depth;
      return !too_deep;
    });
  } catch (const json::exception& e) {  // a syntax error, bad UTF-8, a number overflow
    // what() starts with the parser's own tag, "[json.exception.parse_error.101] ".
    std::string_view what = e.what();
    if (what.starts_with("[json.exception."))
      what.remove_prefix(std::min(what.size(), what.find("] ") + 2));
    return fmt::format("not a JSON object: {}", what);
  }
  if (too_deep) return fmt::format("a request nests at most {} levels deep", max_request_depth);
  return {};
}

std::string json_lines_session::handle(std::string_view line) {
  try {
    return answer(ops_, line);
  } catch (const std::exception& e) {  // e.g. bad_alloc: still one line, and the session goes on
    return one_line({{"ok", false}, {"error", fmt::format("internal error: {}", e.what())}});
  }
}

void json_lines_session::serve(std::istream& in, std::ostream& out) {
  std::string line;
  bool too_long = false;
  while (!ops_.done() && read_request_line(in, line, too_long)) {
    if (too_long) {
      out << one_line({{"ok", false},
                       {"error",
                        fmt::format("a request line is at most {} bytes", max_request_line_bytes)}})
          << '\n'
          << std::flush;
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out << handle(line) << '\n' << std::flush;
  }
}

}  // namespace tessel
