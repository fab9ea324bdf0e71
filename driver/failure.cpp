// failure.cpp: an exception as front-ends report it (tessel/driver.hpp).
#include <tessel/codec.hpp>
#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessel {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written

/// `text` as a line: a newline added unless it ends in one.
std::string line(std::string text) {
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

json to_json(const diagnostic& d) {
  return {{"severity", to_string(d.level)},
          {"file", d.file},
          {"line", d.line},
          {"column", d.column},
          {"message", d.message},
          {"hint", d.hint},
          {"rendered", d.render()}};
}

}  // namespace

std::string failure_text(const std::exception& e) {
  if (const auto* bad = dynamic_cast<const space_error*>(&e); bad && !bad->diagnostics().empty()) {
    std::string out;
    for (const auto& d : bad->diagnostics()) out += line(d.render());
    return out;
  }
  if (const auto* empty = dynamic_cast<const empty_space_error*>(&e))
    return line(fmt::format("tessel: error: {}", e.what())) +
           line(fmt::format("  emptied by: {} (rejected {} configs)", empty->constraint(),
                            with_separators(empty->rejected())));
  return line(fmt::format("tessel: {}error: {}", dynamic_cast<const error*>(&e) ? "" : "internal ",
                          e.what()));
}

json failure_json(const std::exception& e) {
  if (const auto* bad = dynamic_cast<const space_error*>(&e)) {
    json diagnostics = json::array();
    for (const auto& d : bad->diagnostics()) diagnostics.push_back(to_json(d));
    return {{"kind", "diagnostics"}, {"message", e.what()}, {"diagnostics", diagnostics}};
  }
  if (const auto* empty = dynamic_cast<const empty_space_error*>(&e))
    return {{"kind", "empty_space"},
            {"message", e.what()},
            {"constraint", empty->constraint()},
            {"rejected", empty->rejected()}};
  return {{"kind", dynamic_cast<const error*>(&e) ? "error" : "internal"}, {"message", e.what()}};
}

}  // namespace tessel
