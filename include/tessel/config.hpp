// tessel/config.hpp: one point of a space, as a compact vector of domain
// indices (one per parameter, in the space's parameter order). Typed values
// are read through the tessel::space that made it. Cheap to copy, hash and
// compare; the stable 64-bit key (space::key) is what studies store.
#pragma once

#include <tessel/hash.hpp>

#include <compare>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace tessel {

class config {
 public:
  using index_type = std::uint32_t;
  /// The index of a conditional parameter whose `when` condition is false.
  static constexpr index_type inactive = 0xFFFF'FFFFu;

  config() = default;
  explicit config(std::vector<index_type> indices) : indices_(std::move(indices)) {}
  config(std::initializer_list<index_type> indices) : indices_(indices) {}

  [[nodiscard]] std::size_t size() const noexcept { return indices_.size(); }
  [[nodiscard]] bool empty() const noexcept { return indices_.empty(); }
  [[nodiscard]] index_type operator[](std::size_t parameter) const { return indices_[parameter]; }
  [[nodiscard]] index_type& operator[](std::size_t parameter) { return indices_[parameter]; }
  [[nodiscard]] const std::vector<index_type>& indices() const noexcept { return indices_; }

  friend bool operator==(const config&, const config&) = default;
  friend auto operator<=>(const config&, const config&) = default;

 private:
  std::vector<index_type> indices_;
};

/// Hash of the indices, for unordered containers of configs of one space.
/// (Use space::key for a hash that is stable across runs and domain edits.)
struct config_hash {
  std::size_t operator()(const config& c) const noexcept {
    std::uint64_t h = fnv1a_offset_basis;
    for (auto i : c.indices()) h = fnv1a_step(h, i);
    return static_cast<std::size_t>(h);
  }
};

}  // namespace tessel
