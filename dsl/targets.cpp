#include "targets.hpp"

#include "lower.hpp"

#include <tessel/did_you_mean.hpp>

#include <algorithm>

namespace tessel::dsl {

namespace {

/// Target declarations see no names: only literals and target.FIELD.
class no_names final : public name_table {
 public:
  no_names(const parse_tree& tree, reporter& out) : tree_(tree), out_(out) {}
  const name_info* resolve(const ast::identifier& id) override {
    out_.error(tree_.offset_of(id), "unknown name '" + id.name + "'",
               "target values may use integers, arithmetic and target.FIELD only");
    return nullptr;
  }
  const parameter& param(std::size_t) const override { return none_; }
  std::string symbol_name(std::int64_t) const override { return {}; }

 private:
  const parse_tree& tree_;
  reporter& out_;
  parameter none_;
};

std::vector<std::string> field_names(const target& t) {
  std::vector<std::string> names;
  for (const auto& [name, value] : t.constants) names.push_back(name);
  return names;
}

void assign(target& result, const ast::target_assignment& a, const parse_tree& tree, reporter& out,
            std::vector<std::string>& assigned) {
  const auto& field = a.name.name;
  auto at = tree.offset_of(a.name);
  if (!result.find(field)) {
    out.error(at, "target '" + result.base + "' has no field '" + field + "'",
              did_you_mean(field, field_names(result)));
    return;
  }
  if (std::find(assigned.begin(), assigned.end(), field) != assigned.end()) {
    out.error(at, "field '" + field + "' is assigned twice in target '" + result.name + "'");
    return;
  }
  assigned.push_back(field);
  no_names names(tree, out);
  lowerer lower(tree, out, result, names);
  auto value = lower.constant(a.value, "the value of '" + field + "'");
  if (!value) return;
  if (value->type != value_type::integer) {
    out.error(
        tree.offset_of(a.value),
        "the value of '" + field + "' must be an integer, but this is " + type_name(value->type));
    return;
  }
  result.constants[field] = value->value;
}

std::optional<target> declare(const ast::target_decl& d, const parse_tree& tree, reporter& out,
                              const std::vector<target>& earlier) {
  const auto& name = d.name.name;
  if (find_target(name, earlier)) {
    out.error(
        tree.offset_of(d.name), "target '" + name + "' is already defined",
        "choose another name; built-ins are " + [] {
          std::string list;
          for (const auto& n : builtin_target_names()) list += (list.empty() ? "" : ", ") + n;
          return list;
        }());
    return std::nullopt;
  }
  auto base = find_target(d.base.name, earlier);
  if (!base) {
    out.error(tree.offset_of(d.base), "unknown target '" + d.base.name + "'",
              did_you_mean(d.base.name, target_names(earlier)));
    return std::nullopt;
  }
  target result = *base;
  result.name = name;
  result.base = d.base.name;
  std::vector<std::string> assigned;
  for (const auto& a : d.assignments) assign(result, a, tree, out, assigned);
  return result;  // kept even after a bad assignment, so later uses do not cascade
}

}  // namespace

std::vector<target> resolve_targets(const parse_tree& tree, reporter& out) {
  std::vector<target> declared;
  for (const auto& d : tree.file.targets) {
    if (auto t = declare(d, tree, out, declared)) declared.push_back(std::move(*t));
  }
  return declared;
}

std::optional<target> find_target(std::string_view name, const std::vector<target>& declared) {
  for (const auto& t : declared) {
    if (t.name == name) return t;
  }
  return builtin_target(name);
}

std::vector<std::string> target_names(const std::vector<target>& declared) {
  auto names = builtin_target_names();
  for (const auto& t : declared) names.push_back(t.name);
  return names;
}

}  // namespace tessel::dsl
