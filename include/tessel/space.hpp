// tessel/space.hpp: a search space and its engine. A space is an ordered list
// of parameters with finite domains, derived values (`let`) and constraints,
// checked against a target. Once built it is immutable and cheap to copy
// (copies share the engine); every query is const and thread-safe.
//
// The engine (DESIGN.md §2): each constraint is attached to the earliest
// parameter at which all its inputs are bound; parameters that no constraint
// ties form independent groups whose counts multiply; each group is a prefix
// tree of its valid partial configs. Counting is exact and needs no
// enumeration; configs are ranked 0..count()-1 so sampling is uniform over
// valid configs. The numeric encoding is described in docs/space.md.
#pragma once

#include <tessel/config.hpp>
#include <tessel/expr.hpp>
#include <tessel/random.hpp>
#include <tessel/target.hpp>

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessel {

enum class param_kind : std::uint8_t { integer, symbol, boolean, permutation };

/// A finite domain. `values[i]` is what index i evaluates to in expressions:
/// integers their value (kept sorted ascending), booleans 0/1 (false, true),
/// symbols their id in the space's symbol table (declared order), and
/// permutations their rank in lexicographic order of element indices.
struct domain {
  param_kind kind = param_kind::integer;
  std::vector<std::int64_t> values;
  std::vector<std::string> labels;        ///< symbol names; permutation elements
  std::vector<std::int64_t> element_ids;  ///< permutation: symbol id of each element
  bool log_scale = false;                 ///< declared as pow2(..): encoded on log2 scale

  [[nodiscard]] std::size_t size() const noexcept { return values.size(); }
  /// The element indices of permutation `rank`, outermost first.
  [[nodiscard]] std::vector<std::size_t> permutation(std::size_t rank) const;
  /// The display form of index i: `512`, `true`, `vector`, `[k, m, n]`.
  [[nodiscard]] std::string label(std::size_t i) const;
};

struct parameter {
  std::string name;
  domain dom;
  expr when;                                 ///< null: always active
  std::optional<std::size_t> default_index;  ///< `= value` in the .tsl: the baseline
  int line = 0;                              ///< where it was declared (0 for C++-built)
};

/// `const NAME = VALUE`: an integer (or symbol id) known at check time.
struct constant {
  std::string name;
  value_type type = value_type::integer;
  std::int64_t value = 0;
};

struct let_value {
  std::string name;
  expr value;
  int line = 0;
};

struct constraint {
  expr condition;       ///< must evaluate non-zero for a valid config
  std::string text;     ///< the source text, for reports ("M % tile_m == 0")
  std::string message;  ///< the user's message, or ""
  int line = 0;
};

/// A parameter's value as read through the space: one of the fields is set
/// according to `kind`; `active` is false for an inactive conditional one.
struct value {
  param_kind kind = param_kind::integer;
  bool active = true;
  std::int64_t integer = 0;        ///< integer value, or 0/1 for booleans
  std::string symbol;              ///< symbol name
  std::vector<std::string> order;  ///< permutation elements, outermost first
  [[nodiscard]] std::string to_string() const;
};

/// One dimension of the numeric encoding (docs/space.md).
struct encoded_dimension {
  enum class kind : std::uint8_t {
    numeric,      ///< value mapped to [0, 1] (log2 first when log_scale); inactive -> -1
    categorical,  ///< the domain index as a number 0..categories-1; inactive -> categories
    rank,         ///< a permutation element's position / (n - 1), in [0, 1]; inactive -> -1
  };
  kind type = kind::numeric;
  std::size_t parameter = 0;
  std::size_t categories = 0;  ///< categorical: domain size
  std::size_t element = 0;     ///< rank: which element of the permutation
  std::string label;           ///< "tile_m", "order.k"
};

/// What the engine learnt while building: one entry per constraint.
struct constraint_stat {
  std::size_t attached_to = 0;  ///< parameter index where it is first decidable
  std::uint64_t rejected = 0;   ///< configs of the Cartesian product it is the first
                                ///< to reject (saturates at 2^64-1)
};

/// An independent group: parameters tied together by constraints.
struct group_info {
  std::vector<std::size_t> parameters;
  std::uint64_t valid = 0;  ///< valid configs of the group alone
  std::uint64_t nodes = 0;  ///< prefix-tree nodes stored
};

class space {
 public:
  /// What a space is made of. The DSL fills one; C++ callers may too.
  struct definition {
    std::string name = "space";
    std::string file;    ///< where it came from, for messages
    std::string source;  ///< the .tsl text, stored with studies
    tessel::target target;
    std::vector<std::string> symbols;  ///< the symbol table (ids are indices)
    std::vector<constant> constants;
    std::vector<parameter> parameters;
    std::vector<let_value> lets;
    std::vector<constraint> constraints;

    /// The id of symbol `name`, adding it to the table if new. Constant time:
    /// the index below follows `symbols` as long as it is only appended to
    /// (it is rebuilt when its size differs from the table's).
    std::int64_t intern(std::string_view name);
    /// intern()'s index of `symbols`: name -> id.
    std::unordered_map<std::string, std::int64_t> symbol_ids;
  };

  /// Builds the engine. Throws space_error on a malformed definition and
  /// empty_space_error when no config is valid.
  explicit space(definition def);

  [[nodiscard]] const definition& def() const noexcept;
  [[nodiscard]] const std::string& name() const noexcept { return def().name; }
  [[nodiscard]] const std::vector<parameter>& parameters() const noexcept {
    return def().parameters;
  }
  [[nodiscard]] std::size_t size() const noexcept { return parameters().size(); }
  [[nodiscard]] std::optional<std::size_t> parameter_index(std::string_view name) const;

  // --- counting -----------------------------------------------------------
  /// Exact number of valid configs.
  [[nodiscard]] std::uint64_t count() const noexcept;
  /// Size of the Cartesian product of the domains (inactive counts as one
  /// more value of a conditional parameter); nullopt past 2^64-1.
  [[nodiscard]] std::optional<std::uint64_t> cartesian_size() const noexcept;
  [[nodiscard]] double log10_cartesian_size() const noexcept;
  [[nodiscard]] const std::vector<constraint_stat>& constraint_stats() const noexcept;
  [[nodiscard]] const std::vector<group_info>& groups() const noexcept;

  // --- validity, ranks, enumeration, sampling ------------------------------
  [[nodiscard]] bool is_valid(const config& c) const;
  /// Why `c` is invalid ("tile_m: index 9 out of domain", or the first failing
  /// constraint's message and text); "" when it is valid.
  [[nodiscard]] std::string why_invalid(const config& c) const;
  /// The valid config of rank r, 0 <= r < count(); ranks follow the
  /// lexicographic order of domain indices within the group order.
  [[nodiscard]] config at(std::uint64_t rank) const;
  /// The rank of a valid config (throws tessel::error for an invalid one).
  [[nodiscard]] std::uint64_t rank(const config& c) const;
  /// A valid config drawn uniformly at random.
  [[nodiscard]] config sample(rng& random) const;
  /// Valid configs that differ from `c` in one parameter (integers: the
  /// adjacent values; symbols and booleans: every other value) or by one swap
  /// of two elements of one permutation. When the move changes whether a
  /// conditional parameter is active, that parameter takes its first valid
  /// value (or becomes inactive) so the neighbour stays valid.
  [[nodiscard]] std::vector<config> neighbours(const config& c) const;

  class iterator;
  class range;
  /// Every valid config in rank order, lazily.
  [[nodiscard]] range configs() const;

  // --- values ---------------------------------------------------------------
  [[nodiscard]] value value_of(const config& c, std::size_t parameter) const;
  [[nodiscard]] value value_of(const config& c, std::string_view parameter) const;
  /// The integer (or 0/1) value of an integer or boolean parameter.
  [[nodiscard]] std::int64_t integer(const config& c, std::string_view parameter) const;
  /// A derived value (`let`) or constant by name; nullopt when evaluation
  /// fails (division by zero, ...). Throws tessel::error on an unknown name.
  [[nodiscard]] std::optional<std::int64_t> evaluate(const config& c, std::string_view name) const;
  /// The baseline: each parameter's declared default, the first domain value
  /// where none is declared; nullopt when that config is not valid.
  [[nodiscard]] std::optional<config> default_config() const;

  // --- identity, encoding, JSON ----------------------------------------------
  /// Stable 64-bit key: FNV-1a of each parameter's name and value label
  /// (`tile_m=512;order=[k, m, n];`), so it survives re-ordering or extending
  /// domains, renaming the space and process restarts.
  [[nodiscard]] std::uint64_t key(const config& c) const;
  [[nodiscard]] const std::vector<encoded_dimension>& encoding() const noexcept;
  [[nodiscard]] std::vector<double> encode(const config& c) const;
  /// `{"tile_m": 512, "order": ["k","m","n"], "evict": "vector", "prefetch": null}`
  [[nodiscard]] std::string to_json(const config& c) const;
  /// Inverse of to_json. Throws tessel::error naming an unknown parameter, a
  /// missing one, a value outside its domain, or a wrong type. Does not check
  /// constraints (use is_valid / why_invalid).
  [[nodiscard]] config from_json(std::string_view json) const;
  /// As from_json, but a parameter the JSON leaves out takes its declared
  /// default (its first value where none is declared), and a conditional one
  /// left out is active with its default exactly when its condition holds.
  /// Does not check constraints.
  [[nodiscard]] config from_partial_json(std::string_view json) const;

  struct impl;

 private:
  friend class iterator;
  [[nodiscard]] iterator configs_begin() const;
  [[nodiscard]] iterator configs_end() const;
  std::shared_ptr<const impl> impl_;
};

/// Forward iterator over valid configs in rank order.
class space::iterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = config;
  using difference_type = std::ptrdiff_t;
  using pointer = const config*;
  using reference = const config&;

  iterator() = default;
  reference operator*() const { return current_; }
  pointer operator->() const { return &current_; }
  iterator& operator++();
  iterator operator++(int) {
    auto copy = *this;
    ++*this;
    return copy;
  }
  friend bool operator==(const iterator& a, const iterator& b) { return a.rank_ == b.rank_; }

 private:
  friend class space;
  iterator(const space* s, std::uint64_t rank);
  const space* space_ = nullptr;
  std::uint64_t rank_ = 0;
  config current_;
};

class space::range {
 public:
  [[nodiscard]] iterator begin() const { return space_->configs_begin(); }
  [[nodiscard]] iterator end() const { return space_->configs_end(); }
  [[nodiscard]] std::uint64_t size() const { return space_->count(); }

 private:
  friend class space;
  explicit range(const space* s) : space_(s) {}
  const space* space_;
};

}  // namespace tessel
