// tessel/space_check.hpp: what `tessel check` learns about a space, for a C++
// caller or Python as well as the tool: the valid fraction, what each
// constraint rejects, uniform samples, what a backend refuses in the space and
// the defaults it applies, and all of it as one JSON object (docs/cli.md,
// `check --json`). Part of tessel::driver.
#pragma once

#include <tessel/driver.hpp>
#include <tessel/settings.hpp>
#include <tessel/space.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

/// The most values of a domain `check --json` lists; larger domains set "values_truncated".
inline constexpr std::size_t max_check_values = 1024;

/// Valid configs / Cartesian product, also when the product overflows 64 bits.
[[nodiscard]] double valid_fraction(const space& s);
/// The fraction of the Cartesian product that `rejected` configs are.
[[nodiscard]] double raw_fraction(const space& s, std::uint64_t rejected);
/// Parameter `index`'s name, or "#index" when the space has no such parameter.
[[nodiscard]] std::string parameter_name(const space& s, std::size_t index);
/// A constant's value as written: a symbol's name, true/false, or the integer.
[[nodiscard]] std::string constant_text(const space::definition& def, const constant& c);
/// A short, faithful view of a domain: "128 .. 4096 step 128", "pow2(128 .. 2048)",
/// "{sbuf, hbm}", "{1, 3, 7, ..., 99}" (at most `max_items` values), "perm(m, n, k)".
[[nodiscard]] std::string domain_preview(const domain& dom, std::size_t max_items = 6);
/// The first `max_values` values of a domain, typed (codec::value_json): what
/// both `check --json` and the `space` op list.
[[nodiscard]] nlohmann::json domain_values_json(const domain& dom, std::size_t max_values);

/// `count` configs drawn uniformly from the valid ones with `seed`.
[[nodiscard]] std::vector<config> draw_samples(const space& s, std::size_t count,
                                               std::uint64_t seed);
/// A config as a JSON object with the parameters in the space's order.
[[nodiscard]] nlohmann::ordered_json sample_json(const space& s, const config& c);

/// What a backend says about a space: its name and its notes (defaults that
/// apply, names it does not read).
struct backend_review {
  std::string name;
  std::vector<std::string> notes;
};
/// Makes backend `spec` with `settings` and prepares it for `s`; throws what
/// prepare() throws on what the backend refuses.
[[nodiscard]] backend_review review_backend(const space& s, const std::string& spec,
                                            const settings_map& settings);

/// What `check` is asked besides the space.
struct check_request {
  std::string file;                       ///< as the user named it
  std::size_t samples = 3;                ///< configs drawn uniformly
  std::uint64_t seed = 0;                 ///< of the draw
  std::optional<backend_review> backend;  ///< review_backend's answer, if asked
};

/// `check --json`'s object: ok, file, space, spaces, target, constants,
/// parameters (values up to max_check_values), sizes, valid fraction,
/// construction times, groups, constraints with what each rejects, samples
/// and, when reviewed, the backend.
[[nodiscard]] nlohmann::ordered_json check_json(const loaded_space& loaded,
                                                const check_request& request);
/// The same as `tessel check` prints it: header (space, file, target,
/// constants), parameters with their domains, raw and valid sizes and the
/// construction time, groups, constraints with what each rejects, the
/// backend's notes, samples. Throws what draw_samples throws.
[[nodiscard]] std::string check_text(const loaded_space& loaded, const check_request& request);

}  // namespace tessel
