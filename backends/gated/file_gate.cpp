// file_gate.cpp: the gate for out-of-process kernels (file_gate.hpp).
#include "gated/file_gate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <functional>

#include <unistd.h>

namespace tessel::detail {
namespace {

std::uint64_t hash_inputs(const std::vector<std::string>& inputs) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over every byte, with separators
  for (const auto& bytes : inputs) {
    for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    h = (h ^ 0xffULL) * 1099511628211ULL;
  }
  return h;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(separator, start), text.size());
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

scratch_dir::scratch_dir(std::string_view prefix) {
  static std::atomic<std::uint64_t> counter{0};
  namespace fs = std::filesystem;
  path_ =
      fs::temp_directory_path() / fmt::format("{}-{}-{}", prefix, ::getpid(), counter.fetch_add(1));
  fs::create_directories(path_);
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::replace);
}

scratch_dir::~scratch_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<npy_array> decode_outputs(const std::vector<std::string>& outputs,
                                      const std::vector<tensor_spec>& specs, std::string_view who) {
  if (outputs.size() != specs.size())
    throw error(
        fmt::format("{} returned {} outputs, expected {}", who, outputs.size(), specs.size()));
  std::vector<npy_array> decoded;
  for (std::size_t o = 0; o < specs.size(); ++o) {
    npy_array a;
    try {
      a = npy_decode(outputs[o], specs[o].elements());
    } catch (const error& e) {
      throw error(fmt::format("{}: output {}: {}", who, specs[o].name, e.what()));
    }
    if (a.shape != specs[o].shape)
      throw error(fmt::format("{}: output {} has shape ({}), expected ({})", who, specs[o].name,
                              fmt::join(a.shape, ", "), fmt::join(specs[o].shape, ", ")));
    decoded.push_back(std::move(a));
  }
  return decoded;
}

std::shared_ptr<const std::vector<npy_array>> reference_store::outputs(
    const std::vector<std::string>& inputs, const std::vector<tensor_spec>& specs) {
  const auto key = hash_inputs(inputs);
  {
    const std::lock_guard lock(mutex_);
    if (const auto it = done_.find(key); it != done_.end()) return it->second;
  }
  const file_run r = reference_(inputs);
  if (r.status != status::ok)
    throw error(fmt::format("the reference failed ({}): {}", to_string(r.status), r.message));
  auto decoded = std::make_shared<const std::vector<npy_array>>(
      decode_outputs(r.outputs, specs, "the reference"));
  const std::lock_guard lock(mutex_);
  ++runs_;
  return done_.emplace(key, std::move(decoded)).first->second;
}

std::size_t reference_store::runs() const {
  const std::lock_guard lock(mutex_);
  return runs_;
}

file_gated_kernel::file_gated_kernel(std::vector<tensor_spec> inputs,
                                     std::vector<tensor_spec> outputs, file_program candidate,
                                     std::shared_ptr<reference_store> reference)
    : inputs_(std::move(inputs)),
      outputs_(std::move(outputs)),
      candidate_(std::move(candidate)),
      reference_(std::move(reference)) {}

namespace {

/// The .npy bytes of each input, in declaration order.
template <class Input, class Values>
std::vector<std::string> materialize(std::span<const Input> in, Values values_of) {
  std::vector<std::string> files;
  for (const auto& t : in) files.push_back(npy_encode(t.spec().shape, t.spec().type, values_of(t)));
  return files;
}

}  // namespace

output_values file_gated_kernel::run(std::span<const hidden_input> in) const {
  const file_run r = candidate_(materialize(in, [](const hidden_input& t) { return t.values(); }));
  {
    const std::lock_guard lock(mutex_);
    seconds_ += r.seconds;
    if (r.status != status::ok && !failure_) failure_ = r;
  }
  if (r.status != status::ok)
    throw program_failed(fmt::format("{}: {}", to_string(r.status), r.message));
  output_values whole;
  for (auto& o : decode_outputs(r.outputs, outputs_, "the kernel"))
    whole.push_back(std::move(o.values));
  return whole;
}

probe_values file_gated_kernel::reference(std::span<const input_tensor> in,
                                          const probe_points& where) const {
  const auto files = materialize(in, [](const input_tensor& t) {
    std::vector<double> values(static_cast<std::size_t>(t.spec().elements()));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = t.at(static_cast<std::int64_t>(i));
    return values;
  });
  const auto outputs = reference_->outputs(files, outputs_);
  probe_values picked(where.size());
  for (std::size_t o = 0; o < where.size() && o < outputs->size(); ++o)
    for (const auto flat : where[o])
      picked[o].push_back((*outputs)[o].values[static_cast<std::size_t>(flat)]);
  return picked;
}

std::optional<file_run> file_gated_kernel::failure() const {
  const std::lock_guard lock(mutex_);
  return failure_;
}

double file_gated_kernel::candidate_seconds() const {
  const std::lock_guard lock(mutex_);
  return seconds_;
}

std::optional<measurement> gate_through_files(gate& g, const file_gated_kernel& k,
                                              std::uint64_t key, tessel::cost& paid) {
  return gate_through_files(g, k, k, key, paid);
}

std::optional<measurement> gate_through_files(gate& g, const gate_spec& spec,
                                              const file_gated_kernel& k, std::uint64_t key,
                                              tessel::cost& paid) {
  const verdict v = g.check(spec, k, key);
  paid.gate_s += v.seconds;
  if (v.ok()) return std::nullopt;
  if (const auto f = k.failure())
    return measurement::failure(f->status, fmt::format("in the gate: {}", f->message), paid);
  auto m = measurement::failure(v.status, v.message, paid);
  if (std::isfinite(v.max_error)) m.metrics["gate_max_error"] = v.max_error;
  return m;
}

std::optional<std::string> timed_outputs_differ(const std::vector<std::string>& produced,
                                                const std::vector<std::string>& inputs,
                                                const std::vector<tensor_spec>& specs,
                                                reference_store& references,
                                                double tolerance_scale) {
  try {
    const auto got = decode_outputs(produced, specs, "the timed kernel");
    const auto want = references.outputs(inputs, specs);
    for (std::size_t t = 0; t < specs.size(); ++t) {
      const auto& r = (*want)[t].values;
      double squares = 0;
      for (const double v : r) squares += v * v;
      const double rms =
          std::sqrt(squares / static_cast<double>(std::max<std::size_t>(r.size(), 1)));
      const double tol = default_tolerance(specs[t].type) * tolerance_scale;
      for (std::size_t i = 0; i < r.size(); ++i)
        if (!(std::abs(got[t].values[i] - r[i]) <= tol * (std::abs(r[i]) + rms)))
          return fmt::format(
              "suspicious: the timed run's output {} differs from the reference at flat index "
              "{} ({} vs {}): the kernel computes differently when it is timed",
              specs[t].name, i, got[t].values[i], r[i]);
    }
  } catch (const std::exception& e) {
    return fmt::format("suspicious: the timed run's outputs: {}", e.what());
  }
  return std::nullopt;
}

std::vector<tensor_spec> parse_tensor_specs(
    std::string_view text, std::string_view what,
    const std::function<std::optional<std::int64_t>(std::string_view)>& constant) {
  std::vector<tensor_spec> specs;
  for (const auto item : split(text, ',')) {
    if (item.empty()) continue;
    const auto fields = split(item, ':');
    if (fields.size() < 2 || fields[0].empty())
      throw error(
          fmt::format("{}: '{}' is not NAME:DIMS[:TYPE] (e.g. A:512x256:bf16)", what, item));
    tensor_spec s;
    s.name = std::string(fields[0]);
    for (const auto dim : split(fields[1], 'x')) {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), v);
      if (ec == std::errc() && end == dim.data() + dim.size() && v > 0) {
        s.shape.push_back(v);
      } else if (auto c = constant(dim); c && *c > 0) {
        s.shape.push_back(*c);
      } else {
        throw error(
            fmt::format("{}: dimension '{}' of {} is neither a positive integer nor a "
                        "constant of the space",
                        what, dim, s.name));
      }
    }
    for (std::size_t f = 2; f < fields.size(); ++f) {
      if (fields[f].starts_with("labels=")) {
        s.label_range = std::stoll(std::string(fields[f].substr(7)));
      } else if (auto t = parse_element_type(fields[f])) {
        s.type = *t;
      } else {
        throw error(
            fmt::format("{}: unknown element type '{}' of {} (fp32, bf16, fp16, fp8_e4m3, "
                        "int32)",
                        what, fields[f], s.name));
      }
    }
    if (s.type == element_type::int32 && s.label_range <= 0) s.label_range = 1 << 16;
    specs.push_back(std::move(s));
  }
  if (specs.empty()) throw error(fmt::format("{}: no tensors given", what));
  return specs;
}

}  // namespace tessel::detail
