// mcp.cpp: the Model Context Protocol server of `tessel mcp` (tessel/ops.hpp,
// docs/agents.md). JSON-RPC 2.0, one message per line (the MCP stdio
// transport); its tools are the agent ops, the same ones `tessel serve`
// speaks as JSON lines.
#include "request.hpp"

#include <tessel/did_you_mean.hpp>
#include <tessel/ops.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace tessel {
namespace {

using json = nlohmann::json;

/// MCP revisions this server speaks (modelcontextprotocol.io/specification),
/// newest first; the newest is offered when the client asks for one not listed.
constexpr std::array<const char*, 4> protocol_versions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                          "2024-11-05"};

// JSON-RPC 2.0 error codes, and MCP's for a missing resource.
enum rpc_code : int {
  parse_error = -32700,
  invalid_request = -32600,
  method_not_found = -32601,
  invalid_params = -32602,
  internal_error = -32603,
  resource_not_found = -32002,
};

struct rpc_error {
  int code;
  std::string message;
};

struct resource {
  const char* uri;
  const char* name;
  const char* title;
  const char* description;
  const char* mime;
};

constexpr std::array<resource, 3> resources = {{
    {"tessel://study/report", "report", "Study report",
     "The study's full text report: counts by status, time and cost, tokens, the best config",
     "text/plain"},
    {"tessel://study/best", "best", "Best config",
     "The best config found so far, as a JSON object of parameter values (null before any)",
     "application/json"},
    {"tessel://study/trace", "trace", "Trace of the best config",
     "A Chrome/Perfetto trace (JSON) of the best config on the NeuronCore simulator",
     "application/json"},
}};

class server {
 public:
  server(agent_ops& ops, std::ostream& out, std::string_view version)
      : ops_(ops), out_(out), version_(version) {}

  /// Handles one line; writes the response (if any) and notifications.
  void handle(const std::string& line, bool too_long) {
    if (too_long)
      return reply_error(nullptr, invalid_request,
                         fmt::format("a request line is at most {} bytes", max_request_line_bytes));
    json msg;
    if (auto why = parse_request(line, msg); !why.empty())
      return reply_error(nullptr, parse_error, why);
    if (!msg.is_object() || msg.value("jsonrpc", "") != "2.0" || !msg.contains("method") ||
        !msg["method"].is_string()) {
      if (msg.is_object() && (msg.contains("result") || msg.contains("error"))) return;
      return reply_error(msg.is_object() && msg.contains("id") ? msg["id"] : json(nullptr),
                         invalid_request,
                         "expected a JSON-RPC 2.0 request: {\"jsonrpc\": \"2.0\", \"id\": ..., "
                         "\"method\": ..., \"params\": {...}}");
    }
    const bool notification = !msg.contains("id");
    const auto method = msg["method"].get<std::string>();
    const json params = msg.contains("params") ? msg["params"] : json::object();
    if (notification) return;  // initialized, cancelled, ...: nothing to answer
    const json id = msg["id"];
    try {
      reply(id, dispatch(method, params));
    } catch (const rpc_failure& f) {
      reply_error(id, f.error.code, f.error.message);
    } catch (const std::exception& e) {
      reply_error(id, internal_error, e.what());
    }
  }

  [[nodiscard]] bool done() const { return ops_.done(); }

 private:
  struct rpc_failure {
    rpc_error error;
  };

  json dispatch(const std::string& method, const json& params) {
    if (method == "initialize") return initialize(params);
    if (method == "ping") return json::object();
    if (method == "tools/list") return tools_list();
    if (method == "tools/call") return tools_call(params);
    if (method == "resources/list") return resources_list();
    if (method == "resources/templates/list") return {{"resourceTemplates", json::array()}};
    if (method == "resources/read") return resources_read(params);
    throw rpc_failure{{method_not_found, fmt::format("method '{}' is not supported by tessel "
                                                     "(tools/*, resources/*, ping)",
                                                     method)}};
  }

  json initialize(const json& params) {
    std::string version = protocol_versions.front();
    if (params.is_object() && params.contains("protocolVersion") &&
        params["protocolVersion"].is_string())
      for (const char* v : protocol_versions)
        if (params["protocolVersion"] == v) version = v;
    const auto& s = ops_.session().space();
    return {
        {"protocolVersion", version},
        {"capabilities",
         {{"tools", {{"listChanged", false}}},
          {"resources", {{"listChanged", false}, {"subscribe", false}}}}},
        {"serverInfo", {{"name", "tessel"}, {"title", "tessel auto-tuner"}, {"version", version_}}},
        {"instructions",
         fmt::format("tessel tunes the kernel space '{}' ({} valid configs) on backend '{}'. Start "
                     "with the space tool. Then either ask for configs, measure them yourself and "
                     "tell the results, or {}. enqueue your own ideas (with the tokens they cost); "
                     "explain says why a config is slow on the simulator; interactions says which "
                     "changes help alone and which only together; why_failed says why trials "
                     "failed.",
                     s.name(), s.count(), ops_.backend().name(),
                     ops_.evaluates() ? "let tessel measure with evaluate and run"
                                      : "(this session has no backend) use ask/tell only")}};
  }

  static json tools_list() {
    json tools = json::array();
    for (const auto& o : op_list())
      if (o.tool)
        tools.push_back(
            {{"name", o.name}, {"description", o.description}, {"inputSchema", *o.arguments}});
    return {{"tools", tools}};
  }

  json tools_call(const json& params) {
    if (!params.is_object() || !params.contains("name") || !params["name"].is_string())
      throw rpc_failure{{invalid_params,
                         "tools/call needs params {\"name\": TOOL, \"arguments\": "
                         "{...}}"}};
    const auto name = params["name"].get<std::string>();
    std::vector<std::string> tools;
    for (const auto& o : op_list())
      if (o.tool) tools.push_back(o.name);
    if (std::find(tools.begin(), tools.end(), name) == tools.end())
      throw rpc_failure{{invalid_params, unknown_name("tool", name, fmt::format("'{}'", name),
                                                      tools, "tools/list names them")}};
    const json args = params.contains("arguments") ? params["arguments"] : json::object();
    progress_sink progress;
    if (params.contains("_meta") && params["_meta"].is_object() &&
        params["_meta"].contains("progressToken")) {
      const json token = params["_meta"]["progressToken"];
      progress = [this, token](double done, double total, const std::string& message) {
        send({{"jsonrpc", "2.0"},
              {"method", "notifications/progress"},
              {"params",
               {{"progressToken", token},
                {"progress", done},
                {"total", total},
                {"message", message}}}});
      };
    }
    try {
      const json result = ops_.call(name, args, progress);
      return {{"content",
               {{{"type", "text"},
                 {"text", result.dump(-1, ' ', false, json::error_handler_t::replace)}}}},
              {"structuredContent", result},
              {"isError", false}};
    } catch (const op_error& e) {
      // A tool error is a result the model reads and can act on (MCP, "Error Handling").
      return {{"content", {{{"type", "text"}, {"text", e.what()}}}}, {"isError", true}};
    }
  }

  static json resources_list() {
    json out = json::array();
    for (const auto& r : resources)
      out.push_back({{"uri", r.uri},
                     {"name", r.name},
                     {"title", r.title},
                     {"description", r.description},
                     {"mimeType", r.mime}});
    return {{"resources", out}};
  }

  json resources_read(const json& params) {
    const auto uri = params.is_object() ? params.value("uri", std::string()) : std::string();
    std::string text;
    const char* mime = "application/json";
    if (uri == resources[0].uri) {
      text = ops_.report_text();
      mime = "text/plain";
    } else if (uri == resources[1].uri) {
      text = ops_.best_config();
    } else if (uri == resources[2].uri) {
      try {
        text = ops_.best_trace();
      } catch (const op_error& e) {
        throw rpc_failure{{resource_not_found, e.what()}};
      }
    } else {
      throw rpc_failure{
          {resource_not_found, fmt::format("no resource '{}': resources/list names them", uri)}};
    }
    return {{"contents", {{{"uri", uri}, {"mimeType", mime}, {"text", text}}}}};
  }

  void reply(const json& id, json result) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
  }
  void reply_error(const json& id, int code, const std::string& message) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
  }
  void send(const json& message) {
    out_ << message.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
  }

  agent_ops& ops_;
  std::ostream& out_;
  std::string version_;
};

}  // namespace

void serve_mcp(agent_ops& ops, std::istream& in, std::ostream& out, std::ostream& log,
               std::string_view version) {
  server srv(ops, out, version);
  std::string line;
  bool too_long = false;
  while (!srv.done() && read_request_line(in, line, too_long)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos && !too_long) continue;
    try {
      srv.handle(line, too_long);
    } catch (const std::exception& e) {  // e.g. bad_alloc: log it, and the session goes on
      log << "tessel mcp: internal error: " << e.what() << '\n';
    }
  }
}

}  // namespace tessel
