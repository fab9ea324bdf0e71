// What the driver's tests share: a small space (their folders: temp_folder.hpp).
#pragma once

#include <string>

namespace tessel::testing {

/// tests/cli/fixtures/small.tsl: 78 valid configs at N = 64.
inline std::string small_tsl() {
  return std::string(TESSEL_SOURCE_DIR) + "/tests/cli/fixtures/small.tsl";
}

}  // namespace tessel::testing
