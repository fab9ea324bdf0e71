// tessel/ops.hpp: the operations an agent drives a study with
// (docs/agents.md), one implementation behind every way in: the JSON-lines
// protocol of `tessel serve` (docs/serve.md), the MCP server of `tessel mcp`,
// and the Python package's Study. An op takes a JSON object of arguments and
// returns a JSON object of results, in the forms of tessel/codec.hpp; what
// goes wrong is an op_error whose kind says who must act. Part of the driver
// module: link tessel::driver.
#pragma once

#include <tessel/error.hpp>
#include <tessel/study.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

class backend;
class sim_backend;
struct sim_explanation;
struct interaction_report;

/// Why an op failed. bad_arguments: the caller's arguments (fix and retry);
/// unavailable: the session cannot do it (no backend, no simulator);
/// unknown_op: no op of that name; failed: the op ran and could not complete.
enum class op_error_kind : unsigned char { bad_arguments, unavailable, unknown_op, failed };

class op_error : public error {
 public:
  op_error(op_error_kind kind, const std::string& message) : error(message), kind_(kind) {}
  [[nodiscard]] op_error_kind kind() const noexcept { return kind_; }

 private:
  op_error_kind kind_;
};

/// One op as `help` and MCP's tools/list describe it.
struct op_info {
  std::string name;
  std::string description;  ///< what it does and when to use it, for people and LLMs
  std::shared_ptr<const nlohmann::json> arguments;  ///< a JSON Schema object of its arguments
  bool tool = true;  ///< offered as an MCP tool (help and quit are not)
};

/// Every op, in the order help lists them.
[[nodiscard]] const std::vector<op_info>& op_list();
/// "space, ask, tell, ..." (every op's name, for messages).
[[nodiscard]] std::string op_names();

/// Progress of a long op (run): done of total, with a line of text.
using progress_sink = std::function<void(double done, double total, const std::string& message)>;

class agent_ops {
 public:
  /// Most suggestions one `ask` returns, and evaluations one `run` makes.
  static constexpr std::uint64_t max_ask = 10'000;
  static constexpr std::uint64_t max_run = 1'000'000;

  /// `evaluates`: whether `backend` really evaluates (evaluate, run and
  /// verify need it). The study and backend must outlive this.
  agent_ops(study& st, std::shared_ptr<tessel::backend> backend, bool evaluates);
  ~agent_ops();
  agent_ops(const agent_ops&) = delete;
  agent_ops& operator=(const agent_ops&) = delete;

  /// Runs op `name` on `args` (a JSON object; null is taken as {}).
  /// `progress` (optional) hears of each trial `run` finishes. Throws op_error.
  nlohmann::json call(std::string_view name, const nlohmann::json& args,
                      const progress_sink& progress = {});

  /// Whether `quit` was called.
  [[nodiscard]] bool done() const noexcept { return done_; }
  [[nodiscard]] const study& session() const noexcept { return study_; }
  [[nodiscard]] const tessel::backend& backend() const noexcept { return *backend_; }
  [[nodiscard]] bool evaluates() const noexcept { return evaluates_; }

  // Documents an MCP client can read (resources).
  [[nodiscard]] std::string report_text() const;  ///< the study's full report
  [[nodiscard]] std::string best_config() const;  ///< the best config as JSON text, or "null"
  /// The Perfetto trace JSON of the best config on the simulator. Throws op_error.
  [[nodiscard]] std::string best_trace();

 private:
  struct observer_bridge;
  nlohmann::json dispatch(std::string_view name, const nlohmann::json& args,
                          const progress_sink& progress);
  nlohmann::json run_op(const nlohmann::json& args, const progress_sink& progress);
  nlohmann::json explain_op(const nlohmann::json& args);
  nlohmann::json interactions_op(const nlohmann::json& args);
  /// Throws op_error (unavailable) when the session has no backend.
  void need_backend(std::string_view name) const;
  const sim_backend& simulator();

  study& study_;
  std::shared_ptr<tessel::backend> backend_;
  std::shared_ptr<tessel::backend> own_simulator_;  ///< made on demand when backend_ is not one
  std::shared_ptr<observer_bridge> observer_;
  bool evaluates_;
  bool done_ = false;
};

/// A space as the `space` op describes it: typed values, defaults, kinds,
/// constants, the target's numbers, constraints, the count of valid configs.
[[nodiscard]] nlohmann::json space_json(const space& s);
/// A simulator explanation as `explain` (op and command) reports it.
[[nodiscard]] nlohmann::json explanation_json(const sim_explanation& e, const space& s,
                                              const config& c);

/// An interaction analysis as the `interactions` op reports it: the changes,
/// each point's config, objective, gain and basis ("measured", "predicted",
/// or null with a note), the only-together sentences, the counts and the
/// table as text (interaction_report::text).
[[nodiscard]] nlohmann::json interactions_json(const interaction_report& r, const space& s);

// --- the transports -------------------------------------------------------------

/// The most bytes of one request line of `serve` or `mcp` (docs/limits.md).
inline constexpr std::size_t max_request_line_bytes = std::size_t{16} << 20;
/// The deepest nesting of a request's JSON (answers are written recursively).
inline constexpr int max_request_depth = 64;

/// The JSON-lines protocol of `tessel serve` (docs/serve.md): one request
/// per line, one response per line of valid UTF-8 JSON, whatever the request
/// holds; a bad line gets {"ok": false, "error": "..."} and the session goes on.
class json_lines_session {
 public:
  explicit json_lines_session(agent_ops& o) : ops_(o) {}
  /// The response line (without a newline) to one request line. Never throws.
  [[nodiscard]] std::string handle(std::string_view line);
  /// Answers every line of `in` on `out` until `quit` or the end of input.
  void serve(std::istream& in, std::ostream& out);

 private:
  agent_ops& ops_;
};

/// `tessel mcp`: a Model Context Protocol server (JSON-RPC 2.0, one message
/// per line, the stdio transport) whose tools are the agent ops, until the
/// end of input. Problems with a line that is not a request go to `log`.
/// `version` is what serverInfo reports.
void serve_mcp(agent_ops& ops, std::istream& in, std::ostream& out, std::ostream& log,
               std::string_view version);

}  // namespace tessel
