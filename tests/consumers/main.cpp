// The consumer program of tests/consumers/: builds a small space in C++ and
// prints its count; with TESSEL_CONSUMER_DSL it also parses the same space
// from .tsl text. Exits non-zero when a count is not the expected one.
#include <tessel/tessel.hpp>

#include <cstdint>
#include <iostream>

namespace {

// tile_m, tile_n in {128, 256, 512}, require tile_m * tile_n <= 65536:
// 6 of the 9 pairs are valid.
tessel::space make_space() {
  using tessel::expr_op;
  using tessel::value_type;
  tessel::space::definition def;
  def.name = "consumer";
  for (const char* name : {"tile_m", "tile_n"}) {
    tessel::parameter p;
    p.name = name;
    p.dom.kind = tessel::param_kind::integer;
    p.dom.values = {128, 256, 512};
    def.parameters.push_back(std::move(p));
  }
  tessel::constraint fits;
  fits.condition = tessel::make_op(
      expr_op::less_equal,
      {tessel::make_op(expr_op::multiply, {tessel::make_param(0, value_type::integer),
                                           tessel::make_param(1, value_type::integer)}),
       tessel::make_literal(65536)});
  fits.text = "tile_m * tile_n <= 65536";
  def.constraints.push_back(std::move(fits));
  return tessel::space(std::move(def));
}

constexpr std::uint64_t expected = 6;

}  // namespace

int main() {
  const tessel::space built = make_space();
  std::cout << "C++ space '" << built.name() << "': " << built.count() << " configs\n";
  bool ok = built.count() == expected;
#ifdef TESSEL_CONSUMER_DSL
  const tessel::space parsed = tessel::parse_space(
      "space consumer {\n"
      "  param tile_m : {128, 256, 512}\n"
      "  param tile_n : {128, 256, 512}\n"
      "  require tile_m * tile_n <= 65536\n"
      "}\n");
  std::cout << ".tsl space '" << parsed.name() << "': " << parsed.count() << " configs\n";
  ok = ok && parsed.count() == expected;
#endif
  if (!ok) std::cerr << "expected " << expected << " configs\n";
  return ok ? 0 : 1;
}
