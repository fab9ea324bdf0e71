#include "scope.hpp"

#include <tessel/did_you_mean.hpp>

#include <algorithm>

namespace tessel::dsl {

namespace {

namespace x3 = boost::spirit::x3;

const char* kind_name(name_info::kind kind) {
  switch (kind) {
    case name_info::kind::constant: return "const";
    case name_info::kind::parameter: return "param";
    case name_info::kind::let: return "let";
    case name_info::kind::symbol: return "symbol";
  }
  return "name";
}

}  // namespace

void space_scope::collect(const ast::space_block& block) {
  collect_names(block.body, 0);
  collect_symbols(block.body);
}

void space_scope::collect_names(const std::vector<ast::statement>& body, int scope) {
  for (const auto& statement : body) {
    const auto& s = statement.get();
    if (const auto* c = boost::get<ast::const_decl>(&s))
      declare(c->name, name_info::kind::constant, scope);
    if (const auto* l = boost::get<ast::let_decl>(&s))
      declare(l->name, name_info::kind::let, scope);
    if (const auto* p = boost::get<ast::param_decl>(&s))
      declare(p->name, name_info::kind::parameter, scope);
    if (const auto* w = boost::get<x3::forward_ast<ast::when_block>>(&s)) {
      int id = static_cast<int>(parents_.size());
      parents_.push_back(scope);
      when_offsets_.push_back(tree_.offset_of(w->get()));
      collect_names(w->get().body, id);
    }
  }
}

void space_scope::collect_symbols(const std::vector<ast::statement>& body) {
  for (const auto& statement : body) {
    const auto& s = statement.get();
    if (const auto* c = boost::get<ast::const_decl>(&s)) {
      const auto* value = as_identifier(c->value);
      if (value != nullptr && !names_.contains(value->name)) add_symbol(*value, "");
    }
    if (const auto* p = boost::get<ast::param_decl>(&s)) {
      if (const auto* set = boost::get<ast::set_domain>(&p->dom.get())) {
        for (const auto& element : set->elements) {
          const auto* id = as_identifier(element);
          if (id != nullptr && !names_.contains(id->name)) add_symbol(*id, "");
        }
      }
      if (const auto* perm = boost::get<ast::perm_domain>(&p->dom.get())) {
        for (const auto& element : perm->elements) add_symbol(element, "perm element");
      }
    }
    if (const auto* w = boost::get<x3::forward_ast<ast::when_block>>(&s))
      collect_symbols(w->get().body);
  }
}

void space_scope::declare(const ast::identifier& id, name_info::kind kind, int scope) {
  auto offset = tree_.offset_of(id);
  auto [it, inserted] = names_.try_emplace(id.name);
  if (!inserted) {
    const auto& first = it->second;
    out_.error(offset, "'" + id.name + "' is already declared (" + kind_name(first.info.what) +
                           " at line " + std::to_string(out_.src().line_of(first.offset)) + ")");
    return;
  }
  it->second.info.what = kind;
  it->second.info.name = id.name;
  it->second.offset = offset;
  it->second.scope = scope;
}

void space_scope::add_symbol(const ast::identifier& id, std::string_view where) {
  auto it = names_.find(id.name);
  if (it != names_.end()) {
    if (it->second.info.what == name_info::kind::symbol) return;
    out_.error(tree_.offset_of(id),
               std::string(where) + " '" + id.name + "' has the same name as the " +
                   kind_name(it->second.info.what) + " declared at line " +
                   std::to_string(out_.src().line_of(it->second.offset)),
               "rename one of them: a bare name must mean one thing");
    return;
  }
  declaration d;
  d.info = {name_info::kind::symbol, value_type::symbol, def_.intern(id.name), id.name};
  d.offset = tree_.offset_of(id);
  d.defined = true;
  names_.emplace(id.name, std::move(d));
}

bool space_scope::owns(const ast::identifier& id) const {
  auto it = names_.find(id.name);
  return it != names_.end() && it->second.info.what != name_info::kind::symbol &&
         it->second.offset == tree_.offset_of(id);
}

void space_scope::define(const ast::identifier& id, name_info info) {
  if (!owns(id)) return;
  auto& d = names_.find(id.name)->second;
  info.name = id.name;
  d.info = std::move(info);
  d.defined = true;
}

void space_scope::open_when() { open_.push_back(++next_when_); }

void space_scope::close_when() {
  if (open_.size() > 1) open_.pop_back();
}

std::vector<std::string> space_scope::all_names() const {
  std::vector<std::string> names;
  for (const auto& [name, d] : names_) names.push_back(name);
  return names;
}

bool space_scope::declares_const(std::string_view name) const {
  auto it = names_.find(name);
  return it != names_.end() && it->second.info.what == name_info::kind::constant;
}

bool space_scope::visible(int scope) const {
  return std::find(open_.begin(), open_.end(), scope) != open_.end();
}

const name_info* space_scope::resolve(const ast::identifier& id) {
  auto it = names_.find(id.name);
  if (it == names_.end()) {
    out_.error(tree_.offset_of(id), "unknown name '" + id.name + "'",
               did_you_mean(id.name, all_names()));
    return nullptr;
  }
  const auto& d = it->second;
  if (d.info.what == name_info::kind::symbol) return &d.info;
  return explain(id, &d);
}

/// The meaning of a declared name at `id`, or nullptr after saying why not.
const name_info* space_scope::explain(const ast::identifier& id, const declaration* d) {
  auto use = tree_.offset_of(id);
  auto kind = std::string(kind_name(d->info.what));
  auto line = std::to_string(out_.src().line_of(d->offset));
  if (current_ != nullptr && d->offset == tree_.offset_of(*current_)) {
    out_.error(use, kind + " '" + id.name + "' refers to itself");
    return nullptr;
  }
  if (d->offset > use) {
    out_.error(use, kind + " '" + id.name + "' is used before its declaration at line " + line,
               "declare names before using them");
    return nullptr;
  }
  if (!visible(d->scope)) {
    auto when_line = out_.src().line_of(when_offsets_[static_cast<std::size_t>(d->scope - 1)]);
    out_.error(use,
               kind + " '" + id.name + "' is declared inside the 'when' block at line " +
                   std::to_string(when_line) + " and can only be used inside it",
               "use it only inside that block or in a block nested in it");
    return nullptr;
  }
  return d->defined ? &d->info : nullptr;
}

const parameter& space_scope::param(std::size_t index) const { return def_.parameters.at(index); }

std::string space_scope::symbol_name(std::int64_t id) const {
  return def_.symbols.at(static_cast<std::size_t>(id));
}

}  // namespace tessel::dsl
