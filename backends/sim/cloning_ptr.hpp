// cloning_ptr.hpp: an owning pointer that copies what it owns. A class that
// holds a polymorphic object by pointer (a sharded plan's inner workload_plan,
// workloads/sharded.hpp) keeps the compiler's copy constructor with a
// cloning_ptr member: the copy is deep, and no hand-written copy constructor
// has to list the other members (a member it missed would be left
// default-initialised in every copy).
#pragma once

#include <tessel/error.hpp>

#include <concepts>
#include <cstddef>
#include <memory>
#include <utility>

namespace tessel::sim {

/// Owns one T (or nothing), as std::unique_ptr<T> does, with value
/// semantics: a copy owns `clone()` of the original's object (T's virtual
/// `std::unique_ptr<T> clone() const`, so the copy has the object's dynamic
/// type), independent of the original; copying nothing gives nothing. A
/// clone() that returns nullptr (an object that cannot be copied) makes the
/// copy a tessel::error. Constness propagates as for a member held by value:
/// a const cloning_ptr gives a const T. A moved-from cloning_ptr owns
/// nothing and may be assigned, copied and destroyed.
template <class T>
class cloning_ptr {
 public:
  cloning_ptr() noexcept = default;
  cloning_ptr(std::nullptr_t) noexcept {}
  /// Takes `p`'s object, of T or a class derived from it (implicit, as
  /// `owner = make_object()` reads).
  template <std::derived_from<T> U>
  cloning_ptr(std::unique_ptr<U> p) noexcept : p_(std::move(p)) {}
  cloning_ptr(const cloning_ptr& o) : p_(copy(o.p_)) {}
  cloning_ptr(cloning_ptr&&) noexcept = default;
  /// The copy is made before the object owned now is released: when
  /// clone() throws, this one is unchanged.
  cloning_ptr& operator=(const cloning_ptr& o) {
    p_ = copy(o.p_);
    return *this;
  }
  cloning_ptr& operator=(cloning_ptr&&) noexcept = default;
  ~cloning_ptr() = default;

  [[nodiscard]] T* get() noexcept { return p_.get(); }
  [[nodiscard]] const T* get() const noexcept { return p_.get(); }
  [[nodiscard]] T& operator*() noexcept { return *p_; }
  [[nodiscard]] const T& operator*() const noexcept { return *p_; }
  T* operator->() noexcept { return p_.get(); }
  const T* operator->() const noexcept { return p_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(p_); }

 private:
  static std::unique_ptr<T> copy(const std::unique_ptr<T>& p) {
    if (!p) return nullptr;
    std::unique_ptr<T> out = p->clone();
    if (!out) throw error("sim: an owned object cannot be copied (its clone() returned nullptr)");
    return out;
  }

  std::unique_ptr<T> p_;
};

}  // namespace tessel::sim
