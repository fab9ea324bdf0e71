// A cpu backend built-in kernel's gate spec, for tests that run the gate on
// the built-ins' own references (class10's and class14's cheats).
#pragma once

#include <tessel/gate.hpp>

#include "cpu/builtins.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::testing {

/// A cpu backend built-in kernel's spec (cpu_backend.cpp's builtin_spec):
/// its tensors and tessel's fp64 reference, at the given constants.
class cpu_spec final : public tessel::gate_spec {
 public:
  cpu_spec(std::string_view name, std::map<std::string, std::int64_t, std::less<>> constants)
      : kernel_(*tessel::detail::find_builtin(name)) {
    constants_.kernel = std::string(name);
    constants_.integers = std::move(constants);
  }
  std::vector<tessel::tensor_spec> inputs() const override { return kernel_.inputs(constants_); }
  std::vector<tessel::tensor_spec> outputs() const override { return kernel_.outputs(constants_); }
  tessel::probe_values reference(std::span<const tessel::input_tensor> in,
                                 const tessel::probe_points& where) const override {
    tessel::detail::input_values values;
    for (const auto& t : in) values.push_back(t.values());
    return kernel_.reference(values, constants_, where);
  }

 private:
  const tessel::detail::builtin_kernel& kernel_;
  tessel::detail::kernel_constants constants_;
};

}  // namespace tessel::testing
