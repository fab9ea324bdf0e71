// protocol.cpp: reading a program's report. Its stdout's last line of JSON
// (an object, or a bare number on the last line) says what happened; the exit
// status and signal say whether to believe it; stderr's tail explains failures.
#include "command/protocol.hpp"

#include <tessel/codec.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <variant>
#include <vector>

namespace tessel::detail {
namespace {

using json = nlohmann::json;

using report = codec::measurement_report;

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::string shorten(std::string_view s, std::size_t limit = 200) {
  if (s.size() <= limit) return std::string(s);
  return std::string(s.substr(0, limit)) + "...";
}

/// The most bytes of the report (its JSON line, or the whole output for a
/// pretty-printed object) and the deepest nesting read (docs/limits.md):
/// longer lines are not parsed, so megabytes of other output cost a scan.
constexpr std::size_t max_report_bytes = std::size_t{1} << 20;
constexpr int max_report_depth = 64;

/// `text` as JSON, or discarded when it is malformed or nested too deep.
json parse_bounded(std::string_view text) {
  if (text.size() > max_report_bytes) return json(json::value_t::discarded);
  bool too_deep = false;
  auto j = json::parse(
      text,
      [&](int depth, json::parse_event_t, json&) {
        too_deep = too_deep || depth > max_report_depth;
        return !too_deep;
      },
      false);
  return too_deep ? json(json::value_t::discarded) : j;
}

/// The program's report, or why it could not be read.
std::variant<report, std::string> parse_report(std::string_view output) {
  const auto lines = lines_of(output);
  std::optional<json> found;
  bool last = true;  // the last non-empty line may be a bare number
  for (auto it = lines.rbegin(); it != lines.rend() && !found; ++it) {
    const auto line = trim(*it);
    if (line.empty()) continue;
    if (line.front() == '{' || last) {  // only an object, or a number on the last line
      auto j = parse_bounded(line);
      if (!j.is_discarded() && (j.is_object() || (last && j.is_number()))) found = std::move(j);
    }
    last = false;
  }
  if (!found && trim(output).starts_with('{')) {  // a multi-line (pretty-printed) object
    auto j = parse_bounded(trim(output));
    if (!j.is_discarded() && j.is_object()) found = std::move(j);
  }
  if (!found) {
    const auto final_line = std::find_if(lines.rbegin(), lines.rend(),
                                         [](std::string_view line) { return !trim(line).empty(); });
    if (final_line != lines.rend())
      return fmt::format("no JSON object on stdout (last line: '{}')", shorten(trim(*final_line)));
    return std::string("the program printed nothing on stdout");
  }
  try {
    return codec::read_measurement(*found);
  } catch (const error& problem) {
    return fmt::format("{} in '{}'", problem.what(),
                       shorten(found->dump(-1, ' ', false, json::error_handler_t::replace)));
  }
}

/// `message` followed by the stderr tail, if any.
std::string with_stderr(std::string message, const process_result& result,
                        const command_options& options) {
  const auto tail = tail_of(result.errors, options.stderr_tail_lines, options.stderr_tail_bytes);
  if (!tail.empty()) message += "\nstderr:\n" + tail;
  return message;
}

cost cost_of(const report* r, double wall_s) {
  cost paid;
  if (r != nullptr) {
    paid.compile_s = r->compile_s.value_or(0);
    paid.gate_s = r->gate_s.value_or(0);
  }
  paid.run_s =
      (r != nullptr && r->run_s) ? *r->run_s : std::max(0.0, wall_s - paid.compile_s - paid.gate_s);
  return paid;
}

measurement from_report(report r, const process_result& result, const command_options& options) {
  const auto paid = cost_of(&r, result.wall_s);
  const auto st = r.status.value_or(tessel::status::ok);
  if (st != tessel::status::ok) {
    auto message =
        r.message.empty() ? fmt::format("the program reported {}", to_string(st)) : r.message;
    auto m = measurement::failure(st, with_stderr(std::move(message), result, options), paid);
    m.metrics = std::move(r.metrics);
    m.samples = std::move(r.samples);
    return m;
  }
  if (!r.objective && !r.samples.empty())
    r.objective = std::accumulate(r.samples.begin(), r.samples.end(), 0.0) /
                  static_cast<double>(r.samples.size());
  if (!r.objective)
    return measurement::failure(
        tessel::status::runtime_error,
        with_stderr("could not parse the program's output: no 'objective' (or 'time') "
                    "in its JSON",
                    result, options),
        paid);
  if (!std::isfinite(*r.objective))
    return measurement::failure(
        tessel::status::runtime_error,
        with_stderr("the program's objective is not finite", result, options), paid);
  auto m = measurement::success(*r.objective, paid);
  m.samples = std::move(r.samples);
  m.metrics = std::move(r.metrics);
  m.message = std::move(r.message);
  return m;
}

}  // namespace

std::string printable(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = byte(i);
    if (c == 0x1b) {  // an escape sequence: dropped whole
      std::size_t j = i + 1;
      if (j < text.size() && text[j] == '[') {  // CSI: parameters 0x20-0x3F, a final 0x40-0x7E
        for (++j; j < text.size() && byte(j) >= 0x20 && byte(j) <= 0x3f;) ++j;
        if (j < text.size() && byte(j) >= 0x40 && byte(j) <= 0x7e) ++j;
      } else if (j < text.size() &&
                 std::string_view("]PX^_").find(text[j]) != std::string_view::npos) {
        // OSC and the other strings (a window title, a hyperlink): to BEL or ESC '\'
        for (++j; j < text.size() && text[j] != '\a' && text[j] != 0x1b;) ++j;
        if (j < text.size() && text[j] == '\a')
          ++j;
        else if (j + 1 < text.size() && text[j + 1] == '\\')
          j += 2;  // ESC '\' ends it; another ESC starts the next sequence
      } else {     // ESC, intermediates 0x20-0x2F, one final byte ("ESC c", "ESC ( B")
        while (j < text.size() && byte(j) >= 0x20 && byte(j) <= 0x2f) ++j;
        if (j < text.size()) ++j;
      }
      i = j - 1;
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // CRLF: a line end
    out += (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : text[i];
  }
  return out;
}

std::string tail_of(std::string_view raw, std::size_t lines, std::size_t bytes) {
  const auto last = raw.find_last_not_of(" \t\r\n");
  if (last == std::string_view::npos || lines == 0 || bytes == 0) return {};
  const auto clean = printable(raw.substr(0, last + 1));
  std::string_view text = clean;
  std::size_t start = 0, count = 0;
  for (std::size_t i = text.size(); i-- > 0;) {
    if (text[i] == '\n' && ++count == lines) {
      start = i + 1;
      break;
    }
  }
  start = std::max(start, text.size() > bytes ? text.size() - bytes : 0);
  return (start > 0 ? "..." : "") + std::string(text.substr(start));
}

std::string timeout_message(const command_options& options) {
  const auto how = "--backend-set timeout=S or command_options::timeout_s; 0: no limit";
  if (options.timeout_s)
    return fmt::format(
        "timed out after {} s (the limit set by timeout; change it with {}); its process group "
        "was killed",
        *options.timeout_s, how);
  return fmt::format(
      "timed out after {} s (the default limit: no timeout was set; set one with {}); its "
      "process group was killed",
      options.default_timeout_s, how);
}

namespace {

measurement interpret_run(const process_result& result, const command_options& options) {
  if (!result.started)
    return measurement::failure(tessel::status::runtime_error,
                                "could not start the program: " + result.start_error);
  if (result.timed_out) {
    auto m = measurement::failure(tessel::status::timeout,
                                  with_stderr(timeout_message(options), result, options),
                                  cost_of(nullptr, result.wall_s));
    return m;
  }
  auto parsed = parse_report(result.output);
  report* r = std::get_if<report>(&parsed);
  if (result.signal != 0)
    return measurement::failure(tessel::status::runtime_error,
                                with_stderr(fmt::format("killed by signal {} ({})", result.signal,
                                                        signal_name(result.signal)),
                                            result, options),
                                cost_of(r, result.wall_s));
  if (result.exit_code != 0) {
    // A program that failed may say how (e.g. compile_error) before exiting non-zero.
    if (r != nullptr && r->status && *r->status != tessel::status::ok)
      return from_report(std::move(*r), result, options);
    auto message = fmt::format("exited with code {}", result.exit_code);
    if (r != nullptr && !r->message.empty()) message += ": " + r->message;
    return measurement::failure(tessel::status::runtime_error,
                                with_stderr(std::move(message), result, options),
                                cost_of(r, result.wall_s));
  }
  if (r == nullptr)
    return measurement::failure(
        tessel::status::runtime_error,
        with_stderr("could not parse the program's output: " + std::get<std::string>(parsed),
                    result, options),
        cost_of(nullptr, result.wall_s));
  return from_report(std::move(*r), result, options);
}

}  // namespace

measurement interpret(const process_result& result, const command_options& options) {
  auto m = interpret_run(result, options);
  // Which isolation the run got (docs/backends.md, "Process groups"): 1, a
  // PID namespace of its own; 0, the supervisor alone.
  m.metrics["pid_namespace"] = result.pid_namespace ? 1.0 : 0.0;
  return m;
}

}  // namespace tessel::detail
