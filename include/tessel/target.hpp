// tessel/target.hpp: the hardware a space is checked against. A target is
// data: a name, the target it derives from, and integer constants that .tsl
// expressions read as `target.NAME`. Units are in each constant's name
// (_bytes, _mhz, _ns, _bytes_per_us, ...). Built-ins: trn1, trn2, cpu; the
// figures and their sources are in docs/targets.md and
// shared/hardware/neuroncore.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

struct target {
  std::string name;  ///< e.g. "trn2"
  std::string base;  ///< the target it derives from, or ""
  std::map<std::string, std::int64_t, std::less<>> constants;  ///< target.NAME values

  /// The constant `name`, or nullopt if the target has none of that name.
  [[nodiscard]] std::optional<std::int64_t> find(std::string_view key) const {
    auto it = constants.find(key);
    if (it == constants.end()) return std::nullopt;
    return it->second;
  }
};

/// The built-in target `name` ("trn1", "trn2", "cpu"), or nullopt.
/// `cpu` describes the host this process runs on (cores, cache sizes).
[[nodiscard]] std::optional<target> builtin_target(std::string_view name);

/// Names of the built-in targets, in a stable order.
[[nodiscard]] std::vector<std::string> builtin_target_names();

}  // namespace tessel
