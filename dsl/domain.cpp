#include "domain.hpp"

#include <algorithm>
#include <unordered_set>

namespace tessel::dsl {

namespace {

namespace x3 = boost::spirit::x3;

struct domain_builder {
  using result_type = std::optional<domain>;
  const std::string& name;
  lowerer& lower;
  const parse_tree& tree;
  reporter& out;
  space::definition& def;

  std::string of() const { return "the domain of '" + name + "'"; }

  std::optional<std::int64_t> integer(const ast::expression& e, std::string_view what) {
    auto value = lower.constant(e, what);
    if (!value) return std::nullopt;
    if (value->type == value_type::integer) return value->value;
    out.error(tree.offset_of(e),
              std::string(what) + " must be an integer, but this is " + type_name(value->type));
    return std::nullopt;
  }

  bool fits(std::uint64_t size, std::size_t at) {
    if (size <= max_domain_size) return true;
    out.error(at, of() + " has " + std::to_string(size) + " values; at most " +
                      std::to_string(max_domain_size) + " are allowed");
    return false;
  }

  result_type operator()(const ast::set_domain& node) {
    if (node.elements.empty()) {
      out.error(tree.offset_of(node), of() + " is empty");
      return std::nullopt;
    }
    if (!fits(node.elements.size(), tree.offset_of(node))) return std::nullopt;
    domain result;
    result.values.reserve(node.elements.size());
    std::unordered_set<std::int64_t> seen;  // linear in the set's size, not quadratic
    seen.reserve(node.elements.size());
    bool ok = true;
    std::optional<value_type> kind;
    for (const auto& element : node.elements) {
      auto value = lower.constant(element, "a domain value");
      if (!value) {
        ok = false;
        continue;
      }
      auto at = tree.offset_of(element);
      if (value->type != value_type::integer && value->type != value_type::symbol) {
        out.error(
            at,
            "a domain value must be an integer or a symbol, but this is " +
                std::string(type_name(value->type)),
            value->type == value_type::boolean ? "use 'bool' for a true/false parameter" : "");
        ok = false;
        continue;
      }
      if (kind && *kind != value->type) {
        out.error(at, "the values of " + of() + " mix integers and symbols");
        ok = false;
        continue;
      }
      kind = value->type;
      if (!seen.insert(value->value).second) {
        auto shown = value->type == value_type::symbol
                         ? def.symbols[static_cast<std::size_t>(value->value)]
                         : std::to_string(value->value);
        out.error(at, "duplicate value " + shown + " in " + of());
        ok = false;
        continue;
      }
      result.values.push_back(value->value);
    }
    if (!ok || !kind) return std::nullopt;
    if (*kind == value_type::integer) {
      result.kind = param_kind::integer;
      std::sort(result.values.begin(), result.values.end());
    } else {
      result.kind = param_kind::symbol;
      for (auto id : result.values)
        result.labels.push_back(def.symbols[static_cast<std::size_t>(id)]);
    }
    return result;
  }

  result_type operator()(const ast::range_domain& node) {
    auto low = integer(node.low, "a range bound");
    auto high = integer(node.high, "a range bound");
    std::optional<std::int64_t> step = 1;
    if (node.step) step = integer(*node.step, "a range step");
    if (!low || !high || !step) return std::nullopt;
    auto at = tree.offset_of(node);
    if (*step <= 0) {
      out.error(node.step ? tree.offset_of(*node.step) : at,
                "the step of " + of() + " must be positive, but it is " + std::to_string(*step));
      return std::nullopt;
    }
    if (*low > *high) {
      out.error(at,
                of() + " is empty: " + std::to_string(*low) + " .. " + std::to_string(*high) +
                    " has no values",
                "a range lo .. hi needs lo <= hi");
      return std::nullopt;
    }
    auto width = static_cast<std::uint64_t>(*high) - static_cast<std::uint64_t>(*low);
    auto size = width / static_cast<std::uint64_t>(*step) + 1;
    if (!fits(size, at)) return std::nullopt;
    domain result;
    for (std::uint64_t i = 0; i < size; ++i) {
      result.values.push_back(*low + static_cast<std::int64_t>(i) * *step);
    }
    return result;
  }

  result_type operator()(const ast::pow2_domain& node) {
    auto low = integer(node.low, "a pow2 bound");
    auto high = integer(node.high, "a pow2 bound");
    if (!low || !high) return std::nullopt;
    domain result;
    result.log_scale = true;
    for (int bits = 0; bits <= 62; ++bits) {
      auto value = std::int64_t{1} << bits;
      if (value >= *low && value <= *high) result.values.push_back(value);
    }
    if (result.values.empty()) {
      out.error(tree.offset_of(node), of() + " is empty: pow2(" + std::to_string(*low) + " .. " +
                                          std::to_string(*high) + ") holds no power of two");
      return std::nullopt;
    }
    return result;
  }

  result_type operator()(const ast::bool_domain&) {
    domain result;
    result.kind = param_kind::boolean;
    result.values = {0, 1};
    return result;
  }

  result_type operator()(const ast::perm_domain& node) {
    if (node.elements.size() > max_perm_elements) {
      out.error(tree.offset_of(node),
                "perm of " + std::to_string(node.elements.size()) + " elements in " + of() +
                    "; at most " + std::to_string(max_perm_elements) + " are supported",
                "8 elements already make 8! = 40320 orders");
      return std::nullopt;
    }
    domain result;
    result.kind = param_kind::permutation;
    bool ok = true;
    for (const auto& element : node.elements) {
      if (std::find(result.labels.begin(), result.labels.end(), element.name) !=
          result.labels.end()) {
        out.error(tree.offset_of(element), "duplicate element '" + element.name + "' in " + of());
        ok = false;
        continue;
      }
      result.labels.push_back(element.name);
      result.element_ids.push_back(def.intern(element.name));
    }
    if (!ok) return std::nullopt;
    std::int64_t orders = 1;
    for (std::size_t i = 2; i <= result.labels.size(); ++i) orders *= static_cast<std::int64_t>(i);
    for (std::int64_t rank = 0; rank < orders; ++rank) result.values.push_back(rank);
    return result;
  }
};

}  // namespace

std::optional<domain> build_domain(const ast::domain& d, const std::string& name, lowerer& lower,
                                   const parse_tree& tree, reporter& out, space::definition& def) {
  domain_builder builder{name, lower, tree, out, def};
  return boost::apply_visitor(builder, d.get());
}

}  // namespace tessel::dsl
