// program.cpp: the program model's bookkeeping (program.hpp).
#include "program.hpp"

#include <algorithm>
#include <stdexcept>

namespace tessel::sim {

std::string engine_name(engine_id e) {
  if (is_dma(e)) return "dma" + std::to_string(e);
  switch (e) {
    case tensor_engine: return "tensor";
    case vector_engine: return "vector";
    case scalar_engine: return "scalar";
    case gpsimd_engine: return "gpsimd";
    default: return "engine" + std::to_string(e);
  }
}

int dtype_bytes(dtype t) noexcept {
  switch (t) {
    case dtype::fp8: return 1;
    case dtype::bf16:
    case dtype::fp16: return 2;
    case dtype::fp32: return 4;
  }
  return 2;
}

std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::bf16: return "bf16";
    case dtype::fp8: return "fp8";
    case dtype::fp32: return "fp32";
    case dtype::fp16: return "fp16";
  }
  return "?";
}

std::string_view to_string(memory m) noexcept {
  switch (m) {
    case memory::hbm: return "hbm";
    case memory::sbuf: return "sbuf";
    case memory::psum: return "psum";
  }
  return "?";
}

std::string_view to_string(op o) noexcept {
  switch (o) {
    case op::dma: return "dma";
    case op::matmul: return "matmul";
    case op::transpose: return "transpose";
    case op::copy: return "copy";
    case op::tensor_scalar: return "tensor_scalar";
    case op::activation: return "activation";
    case op::tensor_tensor: return "tensor_tensor";
    case op::reduce: return "reduce";
    case op::reciprocal: return "reciprocal";
    case op::bn_stats: return "bn_stats";
  }
  return "?";
}

buffer_id program::add_buffer(buffer b) {
  buffers_.push_back(std::move(b));
  return static_cast<buffer_id>(buffers_.size() - 1);
}

std::uint16_t program::add_tag(std::string_view text) {
  const auto it = std::find(tags_.begin(), tags_.end(), text);
  if (it != tags_.end()) return static_cast<std::uint16_t>(it - tags_.begin());
  tags_.emplace_back(text);
  return static_cast<std::uint16_t>(tags_.size() - 1);
}

void program::dependency_not_earlier() {
  throw std::logic_error("sim program: a dependency must name an earlier instruction");
}

std::uint64_t program::issued_count() const noexcept {
  std::uint64_t n = 0;
  for (const auto& in : instructions_) n += in.count;
  return n;
}

void program::reserve(std::size_t n) {
  instructions_.reserve(n);
  deps_.reserve(n * 3);
}

void program::clear() {
  instructions_.clear();
  deps_.clear();
  buffers_.clear();
  tags_.clear();
  barriers_.clear();
  totals = {};
}

}  // namespace tessel::sim
