// npy.hpp: the .npy format (NumPy's "NEP 1", version 1.0 and 2.0), enough of
// it to hand tensors to a kernel process and read its outputs back: C-order
// arrays of little-endian f2/f4/f8/i4/i8 (and u1 booleans) in, f4 or i4 out.
// Private to the backends.
#pragma once

#include <tessel/gate.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail {

struct npy_array {
  std::vector<std::int64_t> shape;
  std::string descr;           ///< as in the file ("<f4")
  std::vector<double> values;  ///< row-major
};

/// A .npy file's bytes: `values` (row-major, one per element of `shape`) as
/// float32, or int32 when `type` is int32. Floating types are written as
/// float32 because every value the gate draws is exact in its type.
[[nodiscard]] std::string npy_encode(std::span<const std::int64_t> shape, element_type type,
                                     std::span<const double> values);

/// Parses a .npy file's bytes. Throws tessel::error naming what is wrong (not
/// .npy, Fortran order, an unsupported dtype, fewer bytes than the shape says,
/// more than `max_elements` elements).
[[nodiscard]] npy_array npy_decode(std::string_view bytes, std::int64_t max_elements);

/// Base64 (RFC 4648, with padding), for .npy files inlined in JSON.
[[nodiscard]] std::string base64_encode(std::string_view bytes);
/// Throws tessel::error on a character outside the alphabet.
[[nodiscard]] std::string base64_decode(std::string_view text);

}  // namespace tessel::detail
