// knobs.hpp: the names a workload reads from a space, each declared once
// (name, kind, default, meaning), and the typed reading of them.
//
// A workload's knob table is its contract with a space (docs/simulator.md,
// "Workloads"): sim_backend::prepare reviews the space against it, so a
// name the space misspells, a name of the wrong kind or a symbol value the
// workload does not know is an error before tuning starts, not a silent
// fallback to the default; the knobs the space leaves out are listed with the
// defaults that apply (`tessel check --backend sim`). knob_reader then reads a
// config by name, checking that the workload declared the name with that kind.
#pragma once

#include <tessel/config.hpp>
#include <tessel/space.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::sim {

enum class knob_kind : std::uint8_t {
  integer,  ///< an integer parameter or constant, or a `let`
  flag,     ///< a boolean parameter or constant
  symbol,   ///< a symbol parameter or constant, one of the knob's choices
  order,    ///< a permutation parameter of the knob's elements
};

/// The default of a knob that the workload derives when the space lacks it
/// (from the target, from another knob); `text` says how, for people.
struct derived {
  std::string text;
};

/// One name a workload reads: a shape constant or a tuning parameter.
struct knob {
  std::string name;
  knob_kind kind = knob_kind::integer;
  /// symbol: the values it takes; order: the elements permuted, in the
  /// default order.
  std::vector<std::string> choices;
  std::string range;  ///< integer: the values that compile, in words (">= 1", "1..8")
  std::string meaning;
  bool required = false;     ///< the space must give it (a shape)
  std::string derived_text;  ///< not empty: the workload derives the default (derived::text)
  std::int64_t integer_default = 0;  ///< integer; flag (0 or 1)
  std::string symbol_default;        ///< symbol

  /// A shape the space must give: an integer constant or parameter.
  [[nodiscard]] static knob required_integer(std::string name, std::string meaning);
  [[nodiscard]] static knob integer(std::string name, std::int64_t fallback, std::string meaning,
                                    std::string range = "");
  [[nodiscard]] static knob integer(std::string name, derived fallback, std::string meaning,
                                    std::string range = "");
  [[nodiscard]] static knob flag(std::string name, bool fallback, std::string meaning);
  /// `fallback` is one of `choices`.
  [[nodiscard]] static knob symbol(std::string name, std::vector<std::string> choices,
                                   std::string fallback, std::string meaning);
  [[nodiscard]] static knob symbol(std::string name, std::vector<std::string> choices,
                                   derived fallback, std::string meaning);
  /// A permutation of `elements`; the default is their order as given.
  [[nodiscard]] static knob order(std::string name, std::vector<std::string> elements,
                                  std::string meaning);

  /// "integer >= 1", "bool", "bf16 | fp8 | fp32", "perm(m, n, k)".
  [[nodiscard]] std::string values() const;
  /// What applies when the space lacks it: "" when required, else "2",
  /// "true", "vector", "(m, n, k)" or the derived text.
  [[nodiscard]] std::string default_text() const;
};

/// How a space meets a workload's knobs (knob_table::review).
struct knob_review {
  /// Names the space misspells, gives with the wrong kind or with values the
  /// workload does not know, and required knobs it lacks; one line each.
  std::vector<std::string> errors;
  /// The knobs the space does not give: their defaults apply.
  std::vector<const knob*> defaulted;
  /// Parameters and constants of the space the workload does not read (and
  /// that are not close to a knob's name): they do not change its timing.
  std::vector<std::string> unread;
};

/// A workload's knobs, looked up by name.
class knob_table {
 public:
  /// Throws tessel::error on a malformed table (a name twice, a symbol
  /// default outside its choices): a defect of the workload.
  knob_table(std::string workload, std::vector<knob> knobs);

  [[nodiscard]] const std::string& workload() const noexcept { return workload_; }
  /// In documentation order.
  [[nodiscard]] const std::vector<knob>& all() const noexcept { return knobs_; }
  [[nodiscard]] const knob* find(std::string_view name) const;
  /// The knob `name`, declared as `kind`; throws tessel::error when the
  /// workload reads a name it did not declare, or as another kind.
  [[nodiscard]] const knob& at(std::string_view name, knob_kind kind) const;
  /// Every parameter, constant and `let` of `s` against the table.
  [[nodiscard]] knob_review review(const space& s) const;

 private:
  std::string workload_;
  std::vector<knob> knobs_;
  /// (name, knob index) in an open-addressed table of 128 slots hashed on the
  /// name's length and ends: every read looks a knob up, and a binary search
  /// cost the analytic model a third of its rate.
  std::vector<std::pair<std::string_view, std::size_t>> index_;
};

/// Reads one config's knob values: a parameter (when active), else a
/// constant, else a `let`, else the knob's default. Each read checks that the
/// workload declared the name with that kind and that the space gives it with
/// that kind (tessel::error when not: a space sim_backend::prepare would have
/// refused). Reads that pass a fallback are for knobs with a derived default;
/// the others use the declared default (a required knob the space lacks throws).
class knob_reader {
 public:
  knob_reader(const knob_table& knobs, const space& s, const config& c)
      : knobs_(knobs), s_(s), c_(c) {}

  [[nodiscard]] const space& source() const noexcept { return s_; }
  /// The config read (a sharded workload plans its inner workload with it).
  [[nodiscard]] const config& values() const noexcept { return c_; }
  /// Whether the space gives `name` a value in this config (a declared knob).
  [[nodiscard]] bool has(std::string_view name) const;
  [[nodiscard]] std::int64_t integer(std::string_view name) const;
  [[nodiscard]] std::int64_t integer(std::string_view name, std::int64_t fallback) const;
  [[nodiscard]] bool flag(std::string_view name) const;
  [[nodiscard]] std::string symbol(std::string_view name) const;
  [[nodiscard]] std::string symbol(std::string_view name, std::string_view fallback) const;
  /// The permutation's elements, outermost first (the declared order by default).
  [[nodiscard]] std::vector<std::string> order(std::string_view name) const;

 private:
  struct found;
  [[nodiscard]] found lookup(const knob& k) const;
  /// The value the space gives a symbol knob (one of its choices), or nullopt.
  [[nodiscard]] std::optional<std::string> given_symbol(const knob& k) const;
  [[nodiscard]] const knob& declared(std::string_view name, knob_kind kind,
                                     bool with_fallback) const;
  const knob_table& knobs_;
  const space& s_;
  const config& c_;
};

}  // namespace tessel::sim
