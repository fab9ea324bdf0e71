// With umbrella_b.cpp: tessel/tessel.hpp included from two linked TUs.
#include <tessel/tessel.hpp>

namespace tessel_test {
// Odr-uses an inline member so the umbrella's inline definitions are emitted here.
std::size_t umbrella_a() { return tessel::config{1, 2}.size(); }
}  // namespace tessel_test
