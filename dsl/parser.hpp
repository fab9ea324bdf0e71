// dsl/parser.hpp: text -> syntax tree. The grammar is Boost.Spirit X3 and
// lives in grammar.cpp alone, so no other file pays its compile time.
#pragma once

#include "ast.hpp"
#include "source.hpp"

#include <vector>

namespace tessel::dsl {

/// A parsed file: the tree, and the byte offsets its position ids refer to.
struct parse_tree {
  ast::file file;
  std::vector<std::size_t> offsets;  ///< by x3 position id

  /// Where `node` is in the text; {0, 0} for a node the grammar did not tag.
  [[nodiscard]] span span_of(const boost::spirit::x3::position_tagged& node) const;
  [[nodiscard]] std::size_t offset_of(const boost::spirit::x3::position_tagged& node) const {
    return span_of(node).begin;
  }
};

/// Parses every top-level item of `src`. A syntax error is reported to `out`
/// ("expected X, found 'Y'") and the parser resumes after the enclosing
/// `space` or `target` block, so one error per block is reported and the
/// blocks that parse are kept in the tree.
[[nodiscard]] parse_tree parse(const source& src, reporter& out);

}  // namespace tessel::dsl
