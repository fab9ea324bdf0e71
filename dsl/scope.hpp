// dsl/scope.hpp: the names of one space. Before any statement is checked,
// `collect` records every declaration (with duplicates reported) and interns
// every symbol, so a use can tell an unknown name from one declared later or
// inside another `when` block. Rules (docs/language.md, "Names"):
// - a const, param or let is usable after its declaration only;
// - a param or let declared in a `when` block is visible only inside that
//   block and the blocks nested in it;
// - symbols (values of symbol domains, perm elements, symbol consts' values)
//   are visible everywhere in their space.
#pragma once

#include "lower.hpp"

#include <map>
#include <string>
#include <vector>

namespace tessel::dsl {

class space_scope final : public name_table {
 public:
  space_scope(const parse_tree& tree, reporter& out, space::definition& def)
      : tree_(tree), out_(out), def_(def) {}

  /// Records the declarations and symbols of `block`; reports duplicates.
  void collect(const ast::space_block& block);

  /// True when `id` is the declaration its name stands for (not a duplicate).
  [[nodiscard]] bool owns(const ast::identifier& id) const;
  /// Marks the declaration at `id` as checked, with its meaning.
  void define(const ast::identifier& id, name_info info);
  /// The statement whose declaration is being checked (for self references).
  void begin_declaration(const ast::identifier* id) { current_ = id; }
  /// Enters the next `when` block (in source order); leave with close_when.
  void open_when();
  void close_when();
  /// The names of every declaration and symbol, for did-you-mean hints.
  [[nodiscard]] std::vector<std::string> all_names() const;
  /// The const declared as `name`, if any (for --set).
  [[nodiscard]] bool declares_const(std::string_view name) const;

  [[nodiscard]] const name_info* resolve(const ast::identifier& id) override;
  [[nodiscard]] const parameter& param(std::size_t index) const override;
  [[nodiscard]] std::string symbol_name(std::int64_t id) const override;

 private:
  struct declaration {
    name_info info;
    std::size_t offset = 0;  ///< where the name is declared
    int scope = 0;           ///< its when block; 0 for the space body
    bool defined = false;    ///< checked without errors
  };

  void collect_names(const std::vector<ast::statement>& body, int scope);
  void collect_symbols(const std::vector<ast::statement>& body);
  void declare(const ast::identifier& id, name_info::kind kind, int scope);
  void add_symbol(const ast::identifier& id, std::string_view where);
  [[nodiscard]] bool visible(int scope) const;
  [[nodiscard]] const name_info* explain(const ast::identifier& id, const declaration* d);

  const parse_tree& tree_;
  reporter& out_;
  space::definition& def_;
  std::map<std::string, declaration, std::less<>> names_;
  std::vector<int> parents_{-1};           ///< parent of each when block; block 0 is the space
  std::vector<int> open_{0};               ///< the when blocks being checked, innermost last
  std::vector<std::size_t> when_offsets_;  ///< where when block i + 1 starts
  int next_when_ = 0;
  const ast::identifier* current_ = nullptr;
};

}  // namespace tessel::dsl
