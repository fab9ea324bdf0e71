// dsl/check.hpp: checks one `space` block and lowers it to a
// space::definition. Statements are checked in source order (names must be
// declared before use); every problem is reported, none thrown.
//
// Lowering of conditional parts (docs/language.md, "when"):
// - a param declared inside `when C1 { when C2 { ... } }` gets
//   parameter::when = C1 and C2;
// - a require R inside them becomes the constraint `not (C1 and C2) or R`;
// - a let inside them is an ordinary let, usable only inside the blocks, so
//   every use is guarded by the blocks' conditions.
#pragma once

#include "lower.hpp"
#include "parser.hpp"

#include <tessel/space.hpp>

#include <map>
#include <string>

namespace tessel::dsl {

/// `--set NAME=VALUE` overrides of consts, by name.
using override_map = std::map<std::string, std::string, std::less<>>;

/// The definition of `block` checked against `tgt`, with `overrides` applied
/// to the consts it declares. Its symbols, constants, parameters, lets and
/// constraints are filled; name, file, source and target are left to the
/// caller. Problems go to `out`; the result is meaningful only if none.
[[nodiscard]] space::definition check_space(const ast::space_block& block, const parse_tree& tree,
                                            reporter& out, const target& tgt,
                                            const override_map& overrides);

/// `--set` text as a value: an integer, true/false, or a symbol name (interned
/// in `def`); nullopt when it is none of these.
[[nodiscard]] std::optional<constant_value> parse_override(std::string_view text,
                                                           space::definition& def);

/// The consts `block` declares, by name (for validating --set).
[[nodiscard]] std::vector<std::string> declared_consts(const ast::space_block& block);

/// Every name `block` declares at its top level or in when blocks.
[[nodiscard]] std::vector<std::string> declared_names(const ast::space_block& block);

}  // namespace tessel::dsl
