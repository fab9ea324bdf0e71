#include "file.hpp"

#include "check.hpp"
#include "parser.hpp"
#include "suggest.hpp"
#include "targets.hpp"

#include <algorithm>

namespace tessel::dsl {

namespace {

/// Every --set names a const some space declares.
void check_overrides(const parse_tree& tree, const parse_options& options, reporter& out) {
  std::vector<std::string> consts;
  std::vector<std::string> names;
  for (const auto& block : tree.file.spaces) {
    for (auto& name : declared_consts(block)) consts.push_back(std::move(name));
    for (auto& name : declared_names(block)) names.push_back(std::move(name));
  }
  for (const auto& [name, value] : options.overrides) {
    if (std::find(consts.begin(), consts.end(), name) != consts.end()) continue;
    std::string message = "--set ";
    message.append(name).append("=").append(value).append(": ");
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      out.error(message.append("'").append(name).append("' is not a const"),
                "only consts can be set");
    } else {
      out.error(message.append("no space declares a const '").append(name).append("'"),
                did_you_mean(name, consts));
    }
  }
}

/// Space names are unique in a file.
void check_space_names(const parse_tree& tree, reporter& out) {
  for (std::size_t i = 0; i < tree.file.spaces.size(); ++i) {
    const auto& name = tree.file.spaces[i].name;
    for (std::size_t j = 0; j < i; ++j) {
      if (tree.file.spaces[j].name.name != name.name) continue;
      auto first = out.src().line_of(tree.offset_of(tree.file.spaces[j].name));
      out.error(tree.offset_of(name),
                "space '" + name.name + "' is already defined at line " + std::to_string(first));
      break;
    }
  }
}

}  // namespace

checked_file check_file(const source& src, const parse_options& options, bool spaces) {
  reporter out(src);
  parse_tree tree = parse(src, out);
  out.throw_if_any();  // later checks would only repeat what the syntax errors caused
  checked_file result;
  result.targets = resolve_targets(tree, out);
  if (!spaces) {
    out.throw_if_any();
    return result;
  }
  auto selected = find_target(options.target, result.targets);
  if (!selected) {
    out.error("unknown target '" + options.target + "'",
              did_you_mean(options.target, target_names(result.targets)));
    out.throw_if_any();
  }
  check_overrides(tree, options, out);
  check_space_names(tree, out);
  for (const auto& block : tree.file.spaces) {
    auto def = check_space(block, tree, out, *selected, options.overrides);
    def.name = block.name.name;
    def.file = src.file();
    def.source = std::string(src.text());
    def.target = *selected;
    result.spaces.push_back(std::move(def));
  }
  out.throw_if_any();
  return result;
}

}  // namespace tessel::dsl
