// dsl/model.hpp: a `model` block of a .tsl text checked into a
// model_definition (tessel/model.hpp, docs/models.md).
#pragma once

#include "source.hpp"

#include <tessel/dsl.hpp>
#include <tessel/model.hpp>

#include <string_view>

namespace tessel::dsl {

/// The model named `name` ("" for the first) of `src`, checked against
/// options.target with options.overrides applied to its consts. Throws
/// space_error with every diagnostic found (a kernel's space's own errors
/// follow the error that locates the kernel).
[[nodiscard]] model_definition check_model(const source& src, const parse_options& options,
                                           std::string_view name);

}  // namespace tessel::dsl
