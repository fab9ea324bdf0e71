// src/cli/protocol.hpp: the JSON-lines transport of `tessel serve`
// (docs/serve.md). One request per line, one response per line of valid
// UTF-8 JSON, whatever the request holds; a bad line gets {"ok": false,
// "error": "..."} and the session goes on. The ops themselves are in
// ops.hpp, shared with `tessel mcp`.
#pragma once

#include "ops.hpp"

#include <string>
#include <string_view>

namespace tessel::cli {

class protocol {
 public:
  explicit protocol(ops& o) : ops_(o) {}

  /// Deepest nesting of a request's JSON (answers are written recursively).
  static constexpr int max_depth = 64;

  /// The response line (without a newline) to one request line. Never throws.
  [[nodiscard]] std::string handle(std::string_view line);

  /// Whether a `quit` request was handled.
  [[nodiscard]] bool done() const noexcept { return ops_.done(); }

 private:
  [[nodiscard]] std::string answer(std::string_view line);

  ops& ops_;
};

}  // namespace tessel::cli
