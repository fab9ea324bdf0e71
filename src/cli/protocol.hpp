// src/cli/protocol.hpp: the JSON-lines protocol of `tessel serve`
// (docs/serve.md). One request per line, one response per line; a bad line
// gets {"ok": false, "error": "..."} and the session goes on.
#pragma once

#include <tessel/study.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace tessel::cli {

class protocol {
 public:
  /// `evaluates`: whether the study's backend really evaluates (so `evaluate`
  /// and `run` are allowed); without one the caller measures and tells.
  protocol(study& st, bool evaluates) : study_(st), evaluates_(evaluates) {}

  /// Most suggestions one `ask` returns, and evaluations one `run` makes.
  static constexpr std::uint64_t max_ask = 10'000;
  static constexpr std::uint64_t max_run = 1'000'000;
  /// Deepest nesting of a request's JSON (answers are written recursively).
  static constexpr int max_depth = 64;

  /// The response line (without a newline) to one request line: valid
  /// UTF-8 JSON on one line, whatever the request holds. Never throws.
  [[nodiscard]] std::string handle(std::string_view line);

  /// Whether a `quit` request was handled.
  [[nodiscard]] bool done() const noexcept { return done_; }

 private:
  [[nodiscard]] std::string answer(std::string_view line);

  study& study_;
  bool evaluates_;
  bool done_ = false;
};

}  // namespace tessel::cli
