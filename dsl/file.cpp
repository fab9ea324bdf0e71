#include "file.hpp"

#include "check.hpp"
#include "parser.hpp"
#include "targets.hpp"

#include <tessel/did_you_mean.hpp>

#include <algorithm>
#include <unordered_map>

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

/// Space names are unique in a file. Returns, per space, whether it is the
/// first of its name (a later one is reported here and not checked further).
std::vector<bool> check_space_names(const parse_tree& tree, reporter& out) {
  std::unordered_map<std::string_view, std::size_t> first_of;  // linear in the spaces
  std::vector<bool> first(tree.file.spaces.size(), true);
  for (std::size_t i = 0; i < tree.file.spaces.size(); ++i) {
    const auto& name = tree.file.spaces[i].name;
    const auto [it, inserted] = first_of.emplace(name.name, i);
    if (inserted) continue;
    first[i] = false;
    auto line = out.src().line_of(tree.offset_of(tree.file.spaces[it->second].name));
    out.error(tree.offset_of(name),
              "space '" + name.name + "' is already defined at line " + std::to_string(line));
  }
  return first;
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
  const auto first = check_space_names(tree, out);
  for (std::size_t i = 0; i < tree.file.spaces.size(); ++i) {
    if (!first[i]) continue;  // a duplicate name: an error already
    const auto& block = tree.file.spaces[i];
    auto def = check_space(block, tree, out, *selected, options.overrides);
    def.name = block.name.name;
    def.file = src.file();
    def.target = *selected;  // def.source is the caller's to fill (one copy per space kept)
    result.spaces.push_back(std::move(def));
  }
  out.throw_if_any();
  return result;
}

}  // namespace tessel::dsl
