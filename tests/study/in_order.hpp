// in_order.hpp: the deterministic strategy the study tests share (tests/study,
// tests/model): it proposes the configs the study does not know yet, in rank
// order, and records what it is told.
#pragma once

#include <tessel/study.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::testing {

/// Proposes the configs the study does not know yet (neither measured nor
/// proposed, by this process or another sharing its history), in rank order.
class in_order final : public strategy {
 public:
  /// `name` is the strategy's name (the provenance source of its trials).
  explicit in_order(std::string name = "in_order") : name_(std::move(name)) {}

  std::string name() const override { return name_; }
  void start(const space&, std::uint64_t) override {}
  std::vector<config> propose(std::size_t n, const search_context& ctx) override {
    std::vector<config> out;
    for (std::uint64_t r = 0; r < ctx.space().count() && out.size() < n; ++r) {
      auto c = ctx.space().at(r);
      if (!ctx.known(ctx.space().key(c))) out.push_back(c);
    }
    for (std::size_t i = 0; i < out.size(); ++i) told_when_proposed.push_back(observed.size());
    return out;
  }
  void observe(const trial& t) override { observed.push_back(t.id); }

  std::vector<std::uint64_t> observed;          ///< the ids of the trials observed, in order
  std::vector<std::size_t> told_when_proposed;  ///< results known at each proposal

 private:
  std::string name_;
};

}  // namespace tessel::testing
