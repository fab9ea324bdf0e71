// cloning_ptr (backends/sim/cloning_ptr.hpp): the owner a sharded plan holds
// its inner plan in. A copy owns a deep copy of the object (its dynamic type,
// through clone()), independent of the original; a moved-from one owns
// nothing and stays usable; an object that cannot be copied makes the copy
// an error; a struct holding one copies with the compiler's constructor.
#include "sim/cloning_ptr.hpp"
#include "sim/workload.hpp"

#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace tessel;
using namespace tessel::sim;

namespace {

/// A struct as a sharded plan is: an owned inner plan beside plain members,
/// with no copy constructor of its own.
struct holder {
  cloning_ptr<workload_plan> core;
  int ranks = 1;
};

/// A plan that cannot be copied (plan_of<P>::clone() of a P without a copy).
struct move_only {
  std::unique_ptr<int> v;
};

using vector_plan = plan_of<std::vector<int>>;

std::vector<int>& value_of(cloning_ptr<workload_plan>& p) {
  return dynamic_cast<vector_plan&>(*p).value;
}

}  // namespace

static_assert(std::is_copy_constructible_v<holder> && std::is_copy_assignable_v<holder>);
static_assert(std::is_nothrow_move_constructible_v<cloning_ptr<workload_plan>>);
static_assert(std::is_same_v<decltype(*std::declval<const cloning_ptr<workload_plan>&>()),
                             const workload_plan&>,
              "a const owner gives a const object, as a member by value would");

TEST_CASE("cloning_ptr: a copy is deep, of the object's dynamic type, and independent") {
  cloning_ptr<workload_plan> a = std::make_unique<vector_plan>(std::vector<int>{1, 2, 3});
  a->error = "original";
  cloning_ptr<workload_plan> b = a;
  REQUIRE(b);
  CHECK(b.get() != a.get());
  REQUIRE(dynamic_cast<vector_plan*>(b.get()) != nullptr);
  CHECK(value_of(b) == std::vector<int>{1, 2, 3});
  CHECK(b->error == "original");

  value_of(b).push_back(4);
  b->error = "copy";
  CHECK(value_of(a) == std::vector<int>{1, 2, 3});
  CHECK(a->error == "original");

  a = cloning_ptr<workload_plan>();  // the original gone, the copy intact
  CHECK(value_of(b) == std::vector<int>{1, 2, 3, 4});
}

TEST_CASE(
    "cloning_ptr: copy assignment replaces the object with a copy; self-assignment keeps it") {
  cloning_ptr<workload_plan> a = std::make_unique<vector_plan>(std::vector<int>{1});
  cloning_ptr<workload_plan> b = std::make_unique<vector_plan>(std::vector<int>{2, 2});
  b = a;
  CHECK(b.get() != a.get());
  CHECK(value_of(b) == std::vector<int>{1});
  value_of(a).push_back(9);
  CHECK(value_of(b) == std::vector<int>{1});

  auto& self = b;
  b = self;
  REQUIRE(b);
  CHECK(value_of(b) == std::vector<int>{1});

  b = cloning_ptr<workload_plan>(nullptr);  // copying nothing gives nothing
  CHECK_FALSE(b);
  cloning_ptr<workload_plan> c = b;
  CHECK_FALSE(c);
}

TEST_CASE("cloning_ptr: a move takes the object and leaves an empty, usable owner") {
  cloning_ptr<workload_plan> a = std::make_unique<vector_plan>(std::vector<int>{5, 6});
  const workload_plan* object = a.get();
  cloning_ptr<workload_plan> b = std::move(a);
  CHECK(b.get() == object);  // moved, not copied
  CHECK_FALSE(a);            // NOLINT(bugprone-use-after-move): the moved-from state
  CHECK(a.get() == nullptr);
  cloning_ptr<workload_plan> c = a;  // a moved-from owner copies (to nothing)
  CHECK_FALSE(c);
  a = b;  // and takes a copy
  REQUIRE(a);
  CHECK(value_of(a) == std::vector<int>{5, 6});
  CHECK(a.get() != b.get());

  cloning_ptr<workload_plan> d;
  d = std::move(b);
  CHECK(d.get() == object);
  CHECK_FALSE(b);  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("cloning_ptr: a struct holding one copies every member with the compiler's copy") {
  holder h;
  h.core = std::make_unique<vector_plan>(std::vector<int>{7});
  h.ranks = 4;
  holder copy = h;
  CHECK(copy.ranks == 4);
  REQUIRE(copy.core);
  CHECK(copy.core.get() != h.core.get());
  CHECK(value_of(copy.core) == std::vector<int>{7});

  holder assigned;
  assigned = h;
  CHECK(assigned.ranks == 4);
  CHECK(value_of(assigned.core) == std::vector<int>{7});
  CHECK(assigned.core.get() != h.core.get());
}

TEST_CASE("cloning_ptr: an object that cannot be copied makes the copy an error") {
  cloning_ptr<workload_plan> a = std::make_unique<plan_of<move_only>>();
  CHECK_THROWS_AS(cloning_ptr<workload_plan>{a}, tessel::error);
  cloning_ptr<workload_plan> b = std::make_unique<vector_plan>(std::vector<int>{3});
  CHECK_THROWS_AS(b = a, tessel::error);
  REQUIRE(b);  // unchanged by the failed assignment
  CHECK(value_of(b) == std::vector<int>{3});
}
