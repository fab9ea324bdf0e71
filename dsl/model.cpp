// dsl/model.cpp: a `model` block checked (docs/models.md). Its consts are
// folded in order (`--set` overrides them); each kernel's space is read (from
// the file it names, relative to the model's file, or from the model's own
// text), its sets and dtype checked against the space's consts and applied,
// and the space built, so every problem of a model is reported at its line.
#include "model.hpp"

#include "check.hpp"
#include "lower.hpp"
#include "targets.hpp"

#include <tessel/did_you_mean.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace tessel::dsl {
namespace {

namespace x3 = boost::spirit::x3;

/// The names a model's expressions see: its consts declared so far.
class model_scope final : public name_table {
 public:
  model_scope(const parse_tree& tree, reporter& out, const ast::model_block& block)
      : tree_(tree), out_(out) {
    for (const auto& item : block.body)
      if (const auto* c = boost::get<ast::const_decl>(&item))
        declared_.emplace(c->name.name, tree.offset_of(c->name));
  }

  [[nodiscard]] bool declares(const std::string& name) const { return declared_.contains(name); }
  /// Where the first const named `name` is declared (it must be).
  [[nodiscard]] std::size_t offset_of(const std::string& name) const {
    return declared_.find(name)->second;
  }
  /// Whether `id` is the first declaration of its name (a later one is a duplicate).
  [[nodiscard]] bool owns(const ast::identifier& id) const {
    const auto it = declared_.find(id.name);
    return it != declared_.end() && it->second == tree_.offset_of(id);
  }
  void define(const std::string& name, constant_value v) {
    defined_[name] = {name_info::kind::constant, v.type, v.value, name};
  }
  void begin_declaration(const ast::identifier* id) { current_ = id; }
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, offset] : declared_) out.push_back(name);
    return out;
  }
  /// A symbol's id in the model's symbol table.
  std::int64_t intern(std::string_view name) { return symbols_.intern(name); }
  [[nodiscard]] space::definition& symbols() { return symbols_; }

  const name_info* resolve(const ast::identifier& id) override {
    if (const auto it = defined_.find(id.name); it != defined_.end()) return &it->second;
    const auto use = tree_.offset_of(id);
    const auto it = declared_.find(id.name);
    if (it == declared_.end()) {
      out_.error(use, "unknown name '" + id.name + "'", did_you_mean(id.name, names()));
    } else if (current_ != nullptr && it->second == tree_.offset_of(*current_)) {
      out_.error(use, "const '" + id.name + "' refers to itself");
    } else if (it->second > use) {
      out_.error(use,
                 "const '" + id.name + "' is used before its declaration at line " +
                     std::to_string(out_.src().line_of(it->second)),
                 "declare names before using them");
    }
    return nullptr;  // declared earlier with errors: those are reported
  }
  const parameter& param(std::size_t index) const override {
    return symbols_.parameters.at(index);  // a model has no parameters; never called
  }
  [[nodiscard]] std::string symbol_name(std::int64_t id) const override {
    return symbols_.symbols.at(static_cast<std::size_t>(id));
  }

 private:
  const parse_tree& tree_;
  reporter& out_;
  std::map<std::string, std::size_t, std::less<>> declared_;  ///< first declaration's offset
  std::map<std::string, name_info, std::less<>> defined_;
  const ast::identifier* current_ = nullptr;
  space::definition symbols_;  ///< only its symbol table is used
};

/// A kernel's fields, each at most once (`set` may repeat).
struct kernel_fields {
  const x3::position_tagged* space = nullptr;  ///< the space field
  std::string path;                            ///< as written; "" for a space of this file
  std::string space_name;                      ///< "" for the file's first space
  std::vector<const ast::target_assignment*> sets;
  const ast::dtype_field* dtype = nullptr;
  const ast::calls_field* calls = nullptr;
  const ast::group_field* group = nullptr;
};

/// A space's text, read once per file.
struct space_text {
  std::string shown;  ///< the path diagnostics show
  std::string text;
};

class model_checker {
 public:
  model_checker(const source& src, const parse_tree& tree, reporter& out, const target& tgt,
                const parse_options& options, const ast::model_block& block)
      : src_(src),
        tree_(tree),
        out_(out),
        options_(options),
        scope_(tree, out, block),
        lower_(tree, out, tgt, scope_) {}

  model_definition run(const ast::model_block& block) {
    def_.name = block.name.name;
    def_.file = src_.file();
    def_.target = options_.target;
    for (const auto& item : block.body) {
      if (const auto* c = boost::get<ast::const_decl>(&item)) constant(*c);
      if (const auto* k = boost::get<ast::kernel_decl>(&item)) kernel(*k);
    }
    check_overrides(block);
    if (def_.kernels.empty() && kernel_names_.empty())
      out_.error(tree_.offset_of(block.name), "model '" + block.name.name + "' has no kernel",
                 "declare one with: kernel NAME { space \"FILE.tsl\" calls N }");
    return std::move(def_);
  }

 private:
  void constant(const ast::const_decl& node);
  void kernel(const ast::kernel_decl& node);
  std::optional<kernel_fields> fields_of(const ast::kernel_decl& node);
  /// The value of a model expression as `--set` text: a bare name that is
  /// not a const is a symbol; otherwise a constant expression of the consts.
  std::optional<std::string> text_of(const ast::expression& e, std::string_view what);
  [[nodiscard]] std::string render(constant_value v) {
    switch (v.type) {
      case value_type::boolean: return v.value != 0 ? "true" : "false";
      case value_type::symbol: return scope_.symbol_name(v.value);
      default: return std::to_string(v.value);
    }
  }
  const space_text* read(const kernel_fields& f, const std::string& kernel);
  /// The checked definition of the kernel's space under `sets`; nullopt
  /// after reporting (its own diagnostics are appended once per file).
  std::optional<space::definition> definition(const space_text& t, const kernel_fields& f,
                                              const override_map& sets, const std::string& what);
  void check_overrides(const ast::model_block& block);
  std::size_t at(const x3::position_tagged& node) const { return tree_.offset_of(node); }

  const source& src_;
  const parse_tree& tree_;
  reporter& out_;
  const parse_options& options_;
  model_scope scope_;
  lowerer lower_;
  model_definition def_;
  std::map<std::string, std::size_t> kernel_names_;  ///< name -> offset
  std::map<std::string, space_text> texts_;          ///< by resolved path
  std::set<std::string> reported_;                   ///< files whose errors are in `out_`
};

void model_checker::constant(const ast::const_decl& node) {
  const auto& name = node.name.name;
  if (!scope_.owns(node.name)) {
    out_.error(at(node.name), "const '" + name + "' is already declared at line " +
                                  std::to_string(src_.line_of(scope_.offset_of(name))));
    return;
  }
  scope_.begin_declaration(&node.name);
  std::optional<constant_value> value;
  if (const auto* id = as_identifier(node.value); id && !scope_.declares(id->name)) {
    value = constant_value{value_type::symbol, scope_.intern(id->name)};
  } else {
    value = lower_.constant(node.value, "the value of const '" + name + "'");
  }
  scope_.begin_declaration(nullptr);
  if (!value) return;
  if (const auto it = options_.overrides.find(name); it != options_.overrides.end()) {
    const auto prefix = "--set " + name + "=" + it->second + ": ";
    const auto given = parse_override(it->second, scope_.symbols());
    if (!given) {
      out_.error(at(node.name),
                 prefix + "'" + it->second + "' is not an integer, true, false or a name");
      return;
    }
    if (given->type != value->type) {
      out_.error(at(node.name), prefix + "const '" + name + "' is " + type_name(value->type) +
                                    ", but '" + it->second + "' is " + type_name(given->type));
      return;
    }
    value = given;
  }
  scope_.define(name, *value);
  def_.constants.emplace_back(name, render(*value));
}

void model_checker::check_overrides(const ast::model_block& block) {
  for (const auto& [name, value] : options_.overrides)
    if (!scope_.declares(name))
      out_.error("--set " + name + "=" + value + ": model '" + block.name.name +
                     "' has no const '" + name + "'",
                 did_you_mean(name, scope_.names()));
}

std::optional<std::string> model_checker::text_of(const ast::expression& e, std::string_view what) {
  if (const auto* id = as_identifier(e); id && !scope_.declares(id->name)) return id->name;
  const auto value = lower_.constant(e, what);
  if (!value) return std::nullopt;
  return render(*value);
}

std::optional<kernel_fields> model_checker::fields_of(const ast::kernel_decl& node) {
  kernel_fields f;
  const auto& name = node.name.name;
  bool ok = true;
  auto once = [&](const void* seen, const x3::position_tagged& field, const char* what) {
    if (seen == nullptr) return true;
    out_.error(at(field), "kernel '" + name + "' gives its " + what + " twice");
    ok = false;
    return false;
  };
  for (const auto& field : node.fields) {
    const auto& v = field.get();
    if (const auto* file = boost::get<ast::space_file_ref>(&v)) {
      if (!once(f.space, *file, "space")) continue;
      f.space = file;
      f.path = file->path;
      f.space_name = file->name ? file->name->name : "";
    } else if (const auto* local = boost::get<ast::space_name_ref>(&v)) {
      if (!once(f.space, *local, "space")) continue;
      f.space = local;
      f.space_name = local->name.name;
    } else if (const auto* sets = boost::get<ast::set_field>(&v)) {
      for (const auto& a : sets->assignments) f.sets.push_back(&a);
    } else if (const auto* dtype = boost::get<ast::dtype_field>(&v)) {
      if (once(f.dtype, *dtype, "dtype")) f.dtype = dtype;
    } else if (const auto* calls = boost::get<ast::calls_field>(&v)) {
      if (once(f.calls, *calls, "calls")) f.calls = calls;
    } else if (const auto* group = boost::get<ast::group_field>(&v)) {
      if (once(f.group, *group, "group")) f.group = group;
    }
  }
  if (f.space == nullptr) {
    out_.error(at(node.name), "kernel '" + name + "' names no space",
               "add: space \"FILE.tsl\" (or space NAME for a space of this file)");
    return std::nullopt;
  }
  return ok ? std::optional(f) : std::nullopt;
}

const space_text* model_checker::read(const kernel_fields& f, const std::string& kernel) {
  if (f.path.empty()) {  // a space of the model's own file
    auto [it, fresh] = texts_.try_emplace("", space_text{src_.file(), std::string(src_.text())});
    return &it->second;
  }
  namespace fs = std::filesystem;
  const fs::path given(f.path);
  const fs::path base = fs::path(options_.file).parent_path();
  const fs::path resolved = given.is_absolute() || base.empty() ? given : base / given;
  const auto key = resolved.lexically_normal().string();
  if (const auto it = texts_.find(key); it != texts_.end()) return &it->second;
  // At most one byte past the limit: the parser then refuses the text by name.
  std::string text;
  try {  // names the path it looked at and the cause (missing, a folder, a silent pipe)
    text = read_file_at_most_bytes(resolved, max_source_bytes);
  } catch (const error& e) {
    out_.error(at(*f.space), "kernel '" + kernel + "': " + e.what(),
               "a space file's path is relative to the model's file");
    return nullptr;
  }
  return &texts_.emplace(key, space_text{key, std::move(text)}).first->second;
}

std::optional<space::definition> model_checker::definition(const space_text& t,
                                                           const kernel_fields& f,
                                                           const override_map& sets,
                                                           const std::string& what) {
  parse_options o;
  o.file = t.shown;
  o.target = options_.target;
  o.overrides = sets;
  std::vector<std::string> names;  // filled once the text checks
  try {
    return parse_definition(t.text, o, f.space_name, &names);
  } catch (const space_error& e) {
    if (!names.empty()) {  // the text checks, but has no such space
      out_.error(
          at(*f.space),
          what.substr(0, what.find(':')) + ": " + t.shown + " has no space '" + f.space_name + "'",
          did_you_mean(f.space_name, names));
      return std::nullopt;
    }
    const bool first = reported_.insert(t.shown + (sets.empty() ? "" : "\n" + what)).second;
    out_.error(at(*f.space), what + (first ? " (its errors follow)" : " (its errors are above)"));
    if (first)
      for (const auto& d : e.diagnostics()) out_.add(d);
    return std::nullopt;
  }
}

void model_checker::kernel(const ast::kernel_decl& node) {
  const auto& name = node.name.name;
  if (const auto [it, fresh] = kernel_names_.emplace(name, at(node.name)); !fresh) {
    out_.error(at(node.name), "kernel '" + name + "' is already declared at line " +
                                  std::to_string(src_.line_of(it->second)));
    return;
  }
  const auto f = fields_of(node);
  if (!f) return;
  std::int64_t calls = 1;
  std::string calls_text = "1";
  std::vector<std::pair<std::string, std::string>> given;
  if (f->calls) {
    const auto value = lower_.constant(f->calls->value, "the calls of kernel '" + name + "'");
    if (!value) return;
    if (value->type != value_type::integer || value->value < 1) {
      out_.error(at(f->calls->value), "kernel '" + name + "' runs " + render(*value) +
                                          " times per step: calls must be an integer >= 1");
      return;
    }
    calls = value->value;
    calls_text = src_.normalized(tree_.span_of(f->calls->value));
  }
  // The sets' values first: their errors do not depend on the space.
  override_map sets;
  bool values_ok = true;
  for (const auto* a : f->sets) {
    const auto value = text_of(a->value, "the value of set '" + a->name.name + "'");
    if (!value) {
      values_ok = false;
      continue;
    }
    if (!sets.emplace(a->name.name, *value).second) {
      out_.error(at(a->name), "kernel '" + name + "' sets '" + a->name.name + "' twice");
      values_ok = false;
      continue;
    }
    given.emplace_back(a->name.name, *value);
  }
  if (f->dtype) {
    if (!sets.emplace("dtype", f->dtype->value.name).second) {
      out_.error(at(*f->dtype), "kernel '" + name + "' sets its dtype twice (dtype and set dtype)");
      values_ok = false;
    }
    given.emplace_back("dtype", f->dtype->value.name);
  }
  const auto* text = read(*f, name);
  if (!text || !values_ok) return;
  const auto shown = f->space_name.empty() ? text->shown : text->shown + ":" + f->space_name;
  const auto plain =
      definition(*text, *f, {}, "kernel '" + name + "': the space " + shown + " does not check");
  if (!plain) return;
  // Every set names a const of that space.
  std::vector<std::string> consts;
  for (const auto& c : plain->constants) consts.push_back(c.name);
  bool names_ok = true;
  auto check_name = [&](const std::string& set, std::size_t offset) {
    if (std::find(consts.begin(), consts.end(), set) != consts.end()) return;
    names_ok = false;
    const bool declared = std::any_of(plain->parameters.begin(), plain->parameters.end(),
                                      [&](const parameter& p) { return p.name == set; }) ||
                          std::any_of(plain->lets.begin(), plain->lets.end(),
                                      [&](const auto& l) { return l.name == set; });
    out_.error(offset,
               "kernel '" + name + "': space '" + plain->name + "' has " +
                   (declared ? "'" + set + "', but not as a const (only consts can be set)"
                             : "no const '" + set + "'"),
               declared ? "" : did_you_mean(set, consts));
  };
  for (const auto* a : f->sets) check_name(a->name.name, at(a->name));
  if (f->dtype) check_name("dtype", at(*f->dtype));
  if (!names_ok) return;
  auto checked =
      definition(*text, *f, sets, "kernel '" + name + "': its sets do not fit the space " + shown);
  if (!checked) return;
  std::string dtype;
  for (const auto& c : checked->constants)
    if (c.name == "dtype" && c.type == value_type::symbol)
      dtype = checked->symbols.at(static_cast<std::size_t>(c.value));
  const auto space_name = checked->name;
  try {
    def_.kernels.push_back(model_kernel{.name = name,
                                        .space = space(std::move(*checked)),
                                        .space_file = text->shown,
                                        .space_name = space_name,
                                        .sets = std::move(given),
                                        .dtype = std::move(dtype),
                                        .calls = calls,
                                        .calls_text = std::move(calls_text),
                                        .group = f->group ? f->group->value.name : "",
                                        .line = src_.line_of(at(node))});
  } catch (const error& e) {  // empty, or malformed
    out_.error(at(node.name), "kernel '" + name + "': " + e.what());
  }
}

}  // namespace

model_definition check_model(const source& src, const parse_options& options,
                             std::string_view name) {
  reporter out(src);
  const parse_tree tree = parse(src, out);
  out.throw_if_any();
  const auto targets = resolve_targets(tree, out);
  const auto selected = find_target(options.target, targets);
  if (!selected)
    out.error("unknown target '" + options.target + "'",
              did_you_mean(options.target, target_names(targets)));
  out.throw_if_any();
  std::vector<std::string> names;
  const ast::model_block* block = nullptr;
  for (const auto& m : tree.file.models) {
    names.push_back(m.name.name);
    if (!block && (name.empty() || m.name.name == name)) block = &m;
  }
  if (!block) {
    if (names.empty())
      out.error("no model is defined", "declare one with: model NAME { kernel ... }");
    else
      out.error("unknown model '" + std::string(name) + "'", did_you_mean(name, names));
    out.throw_if_any();
  }
  model_checker checker(src, tree, out, *selected, options, *block);
  auto def = checker.run(*block);
  out.throw_if_any();
  return def;
}

}  // namespace tessel::dsl
