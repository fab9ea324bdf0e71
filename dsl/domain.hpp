// dsl/domain.hpp: parameter domains. Evaluates a domain's constant
// expressions and builds the tessel::domain the engine reads, reporting
// empty domains, duplicate values, a zero or negative step, mixed value
// types, a perm of more than 8 elements and domains over a million values.
#pragma once

#include "lower.hpp"

#include <tessel/dsl.hpp>

#include <optional>

namespace tessel::dsl {

/// Domains of more values than this are an error (the engine stores them).
inline constexpr std::size_t max_domain_size = tessel::max_domain_values;
/// perm(...) of more elements than this is an error (8! = 40320 orders).
inline constexpr std::size_t max_perm_elements = 8;

/// The domain of parameter `name`; nullopt after reporting errors.
/// Symbols must already be interned in `def`.
[[nodiscard]] std::optional<domain> build_domain(const ast::domain& d, const std::string& name,
                                                 lowerer& lower, const parse_tree& tree,
                                                 reporter& out, space::definition& def);

}  // namespace tessel::dsl
