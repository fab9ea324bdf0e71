// dsl/targets.hpp: `target NAME : BASE { FIELD = VALUE ... }` declarations.
// A declared target copies its base (a built-in or an earlier declaration)
// and replaces the fields it assigns; it cannot add fields its base lacks
// (so a misspelt field is an error, not a silent new constant). Values are
// constant integer expressions; `target.FIELD` in them reads the target as
// built so far (the base's values, then earlier assignments).
#pragma once

#include "parser.hpp"

#include <tessel/target.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tessel::dsl {

/// The targets `tree` declares, in file order. Problems go to `out`; a
/// declaration whose name or base is bad is left out.
[[nodiscard]] std::vector<target> resolve_targets(const parse_tree& tree, reporter& out);

/// The target `name`: one of `declared`, else a built-in; nullopt if neither.
[[nodiscard]] std::optional<target> find_target(std::string_view name,
                                                const std::vector<target>& declared);

/// The names find_target knows, built-ins first (for did-you-mean hints).
[[nodiscard]] std::vector<std::string> target_names(const std::vector<target>& declared);

}  // namespace tessel::dsl
