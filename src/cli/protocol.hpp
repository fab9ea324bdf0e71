// src/cli/protocol.hpp: the JSON-lines protocol of `tessel serve`
// (docs/serve.md). One request per line, one response per line; a bad line
// gets {"ok": false, "error": "..."} and the session goes on.
#pragma once

#include <tessel/study.hpp>

#include <string>
#include <string_view>

namespace tessel::cli {

class protocol {
 public:
  /// `evaluates`: whether the study's backend really evaluates (so `evaluate`
  /// and `run` are allowed); without one the caller measures and tells.
  protocol(study& st, bool evaluates) : study_(st), evaluates_(evaluates) {}

  /// The response line (without a newline) to one request line. Never throws.
  [[nodiscard]] std::string handle(std::string_view line);

  /// Whether a `quit` request was handled.
  [[nodiscard]] bool done() const noexcept { return done_; }

 private:
  study& study_;
  bool evaluates_;
  bool done_ = false;
};

}  // namespace tessel::cli
