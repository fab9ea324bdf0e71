#include "protocol.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessel::cli {

std::string protocol::handle(std::string_view line) {
  using json = nlohmann::json;
  json response = {{"ok", true}};
  json req;
  try {
    req = json::parse(line);
  } catch (const json::parse_error& e) {
    return json{{"ok", false}, {"error", fmt::format("not a JSON object: {}", e.what())}}.dump();
  }
  if (req.is_object() && req.contains("id")) response["id"] = req["id"];
  try {
    if (!req.is_object() || !req.contains("op") || !req["op"].is_string())
      throw op_error(
          op_error_kind::bad_arguments,
          R"(each request is a JSON object with an "op": space, ask, tell, enqueue, evaluate, run, best, trials, explain, why_failed, verify, summary, help or quit)");
    const auto op = req["op"].get<std::string>();
    json args = req;
    args.erase("op");
    args.erase("id");
    json result = ops_.call(op, args);
    for (auto& [key, value] : result.items()) response[key] = std::move(value);
  } catch (const std::exception& e) {
    response["ok"] = false;
    response["error"] = e.what();
  }
  return response.dump();
}

}  // namespace tessel::cli
