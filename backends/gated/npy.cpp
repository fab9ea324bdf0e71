// npy.cpp: .npy encode/decode
// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html) and base64.
#include "gated/npy.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>

namespace tessel::detail {
namespace {

constexpr std::string_view magic = "\x93NUMPY";

template <class T>
T read_le(const char* p) {
  static_assert(std::endian::native == std::endian::little,
                "tessel's .npy reader assumes little-endian");
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

double half_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0)
    v = std::ldexp(mantissa, -24);
  else if (exponent == 31)
    v = mantissa ? std::nan("") : INFINITY;
  else
    v = std::ldexp(mantissa + 1024, exponent - 25);
  return sign ? -v : v;
}

/// The value of `key` in the header dict ("'descr': '<f4', ..."), raw.
std::string header_field(std::string_view header, std::string_view key) {
  const auto at = header.find(fmt::format("'{}'", key));
  if (at == std::string_view::npos) throw error(fmt::format(".npy header has no '{}'", key));
  auto start = header.find(':', at) + 1;
  while (start < header.size() && header[start] == ' ') ++start;
  std::size_t end = start;
  if (header[start] == '(')
    end = header.find(')', start) + 1;
  else if (header[start] == '\'')
    end = header.find('\'', start + 1) + 1;
  else
    end = header.find_first_of(",}", start);
  return std::string(header.substr(start, end - start));
}

std::vector<std::int64_t> parse_shape(std::string_view text) {
  std::vector<std::int64_t> shape;
  std::int64_t current = -1;
  for (const char c : text) {
    if (c >= '0' && c <= '9')
      current = (current < 0 ? 0 : current * 10) + (c - '0');
    else if (current >= 0) {
      shape.push_back(current);
      current = -1;
    }
  }
  return shape;
}

}  // namespace

std::string npy_encode(std::span<const std::int64_t> shape, element_type type,
                       std::span<const double> values) {
  const bool integer = type == element_type::int32;
  std::string dims;
  for (const auto d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   integer ? "<i4" : "<f4", dims);
  const std::size_t unpadded = magic.size() + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(magic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.reserve(out.size() + values.size() * 4);
  for (const double v : values) {
    std::array<char, 4> bytes{};
    if (integer) {
      const auto i = static_cast<std::int32_t>(v);
      std::memcpy(bytes.data(), &i, 4);
    } else {
      const auto f = static_cast<float>(v);
      std::memcpy(bytes.data(), &f, 4);
    }
    out.append(bytes.data(), 4);
  }
  return out;
}

npy_array npy_decode(std::string_view bytes, std::int64_t max_elements) {
  if (bytes.size() < 10 || bytes.substr(0, magic.size()) != magic)
    throw error("not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_size = 0, offset = 0;
  if (major == 1) {
    header_size = read_le<std::uint16_t>(bytes.data() + 8);
    offset = 10;
  } else if (bytes.size() >= 12) {
    header_size = read_le<std::uint32_t>(bytes.data() + 8);
    offset = 12;
  }
  if (offset == 0 || bytes.size() < offset + header_size) throw error(".npy header is cut short");
  const auto header = bytes.substr(offset, header_size);
  npy_array a;
  a.descr = header_field(header, "descr");
  if (a.descr.size() >= 2) a.descr = a.descr.substr(1, a.descr.size() - 2);
  if (header_field(header, "fortran_order") != "False")
    throw error(".npy array is in Fortran order; write it C-contiguous");
  a.shape = parse_shape(header_field(header, "shape"));
  std::int64_t count = 1;
  for (const auto d : a.shape) {
    count *= d;
    if (count > max_elements)
      throw error(fmt::format(".npy array of shape ({}) has more than {} elements",
                              fmt::join(a.shape, ", "), max_elements));
  }
  const std::string_view d = a.descr;
  const std::size_t width = d.size() == 3 ? static_cast<std::size_t>(d[2] - '0') : 0;
  const bool little = !d.empty() && (d[0] == '<' || d[0] == '|' || (d[0] == '='));
  if (!little || width == 0 || (d[1] != 'f' && d[1] != 'i' && d[1] != 'u' && d[1] != 'b'))
    throw error(fmt::format(".npy dtype '{}' is not supported (use float32 or int32)", a.descr));
  const auto data = bytes.substr(offset + header_size);
  if (data.size() < static_cast<std::size_t>(count) * width)
    throw error(fmt::format(".npy data is cut short: {} bytes for {} elements of {}", data.size(),
                            count, a.descr));
  a.values.resize(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const char* p = data.data() + i * width;
    double v = 0;
    if (d[1] == 'f' && width == 2)
      v = half_to_double(read_le<std::uint16_t>(p));
    else if (d[1] == 'f' && width == 4)
      v = read_le<float>(p);
    else if (d[1] == 'f' && width == 8)
      v = read_le<double>(p);
    else if (d[1] == 'i' && width == 4)
      v = read_le<std::int32_t>(p);
    else if (d[1] == 'i' && width == 8)
      v = static_cast<double>(read_le<std::int64_t>(p));
    else if ((d[1] == 'u' || d[1] == 'b') && width == 1)
      v = static_cast<unsigned char>(*p);
    else
      throw error(fmt::format(".npy dtype '{}' is not supported (use float32 or int32)", a.descr));
    a.values[i] = v;
  }
  return a;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[n & 63] : '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (const char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=' || c == '\n')
      continue;
    else
      throw error(fmt::format("bad base64 character '{}'", c));
    buffer = (buffer << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace tessel::detail
