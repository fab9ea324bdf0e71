// file_gate.cpp: the gate for out-of-process kernels (file_gate.hpp).
#include "gated/file_gate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <functional>

#include <stdlib.h>  // mkdtemp

namespace tessel::detail {
namespace {

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
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / fmt::format("{}-XXXXXX", prefix)).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw error(
        fmt::format("cannot make a private folder under {}", fs::temp_directory_path().string()));
  path_ = pattern;
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

file_spec::file_spec(std::vector<tensor_spec> inputs, std::vector<tensor_spec> outputs,
                     file_program reference, double flops, double min_bytes)
    : inputs_(std::move(inputs)),
      outputs_(std::move(outputs)),
      reference_(std::move(reference)),
      flops_(flops),
      min_bytes_(min_bytes) {}

namespace {

/// The .npy bytes of each input, in declaration order.
template <class Input>
std::vector<std::string> materialize(std::span<const Input> in) {
  std::vector<std::string> files;
  for (const auto& t : in) files.push_back(npy_encode(t.spec().shape, t.spec().type, t.values()));
  return files;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

probe_values file_spec::reference(std::span<const input_tensor> in,
                                  const probe_points& where) const {
  const file_run r = reference_(materialize(in));
  if (r.status != status::ok)
    throw error(fmt::format("the reference failed ({}): {}", to_string(r.status), r.message));
  const auto outputs = decode_outputs(r.outputs, outputs_, "the reference");
  probe_values picked(where.size());
  for (std::size_t o = 0; o < where.size() && o < outputs.size(); ++o)
    for (const auto flat : where[o])
      picked[o].push_back(outputs[o].values[static_cast<std::size_t>(flat)]);
  return picked;
}

double file_spec::min_bytes() const { return min_bytes_ > 0 ? min_bytes_ : gate_spec::min_bytes(); }

const std::vector<std::string>& session_files::of(std::size_t set) {
  auto& files = files_[set];
  if (files.empty()) files = materialize(std::span(session_.inputs(set)));
  return files;
}

measurement failed_verdict(const verdict& v, const tessel::cost& paid) {
  auto m = measurement::failure(v.status, v.message, paid);
  if (std::isfinite(v.max_error)) m.metrics["gate_max_error"] = v.max_error;
  return m;
}

std::optional<measurement> judge_run(gate_session& session, std::size_t set, const file_run& run,
                                     const std::vector<tensor_spec>& outputs, std::string_view what,
                                     tessel::cost& paid) {
  if (run.status != status::ok)
    return measurement::failure(run.status, fmt::format("{}: {}", what, run.message), paid);
  output_values whole;
  try {
    for (auto& o : decode_outputs(run.outputs, outputs, "the kernel"))
      whole.push_back(std::move(o.values));
  } catch (const std::exception& e) {
    return measurement::failure(status::runtime_error, fmt::format("{}: {}", what, e.what()), paid);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto failed = session.judge(set, whole);
  paid.gate_s += seconds_since(start);
  if (failed) return failed_verdict(*failed, paid);
  return std::nullopt;
}

std::optional<measurement> finish_with_timed_run(gate_session& session, std::size_t set,
                                                 const file_run& timed,
                                                 const std::vector<tensor_spec>& outputs,
                                                 tessel::cost& paid, std::string_view call) {
  // The gate's calls first, alone; then with the timed run's outputs: a
  // verdict that turns only then is a kernel that computes differently when
  // it is timed.
  verdict v = session.finish();
  std::optional<measurement> failed;
  if (v.ok()) {
    failed =
        timed.outputs.empty()
            ? measurement::failure(status::suspicious,
                                   "suspicious: the timed run returned no outputs to check", paid)
            : judge_run(session, set, timed, outputs, call.empty() ? "the timed run" : call, paid);
    if (!failed) {
      v = session.finish();
    } else if (failed->status == status::incorrect || failed->status == status::suspicious) {
      v.status = failed->status;
      v.message = failed->message;
      v.max_error = failed->metrics.count("gate_max_error") ? failed->metrics["gate_max_error"] : 0;
      failed.reset();
    }
    if (!failed && !v.ok()) {
      v.status = status::suspicious;
      v.message = fmt::format("suspicious: the kernel computes differently when it is timed{}: {}",
                              call.empty() ? "" : fmt::format(" ({})", call), v.message);
    }
  }
  if (!failed && !v.ok()) failed = failed_verdict(v, paid);
  return failed;
}

namespace {

bool names_value(const space& s, std::string_view name) {
  const auto& d = s.def();
  return std::any_of(d.lets.begin(), d.lets.end(), [&](const auto& l) { return l.name == name; }) ||
         std::any_of(d.constants.begin(), d.constants.end(),
                     [&](const auto& k) { return k.name == name; });
}

std::optional<double> number_of(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0) || !std::isfinite(v))
    return std::nullopt;
  return v;
}

}  // namespace

void check_count_setting(std::string_view text, std::string_view what, const space& s) {
  if (text.empty() || number_of(text) || names_value(s, text)) return;
  throw error(
      fmt::format("{}: '{}' is neither a non-negative number nor a let or const of space '{}'",
                  what, text, s.name()));
}

double count_setting(std::string_view text, std::string_view what, const space& s,
                     const config& c) {
  if (text.empty()) return 0;
  if (const auto v = number_of(text)) return *v;
  check_count_setting(text, what, s);
  const auto v = s.evaluate(c, text);
  if (!v || *v < 0)
    throw error(fmt::format("{}: '{}' has no non-negative value for this config", what, text));
  return static_cast<double>(*v);
}

gate_options on_target(gate_options o, const space& s) {
  if (!o.machine.known())
    if (auto peaks = peaks_of(s.def().target)) o.machine = *peaks;
  return o;
}

std::vector<tensor_spec> parse_tensor_specs(std::string_view text, std::string_view what,
                                            const space& space) {
  return parse_tensor_specs(text, what, [&space](std::string_view name) {
    for (const auto& k : space.def().constants)
      if (k.name == name) return std::optional<std::int64_t>(k.value);
    return std::optional<std::int64_t>();
  });
}

std::vector<tensor_spec> parse_tensor_specs(std::string_view text, std::string_view what,
                                            const constant_lookup& constant) {
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
      if (fields[f].starts_with("labels=") || fields[f].starts_with("reduce=")) {
        const auto value = fields[f].substr(fields[f].find('=') + 1);
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec == std::errc() && end == value.data() + value.size() && v > 0) {
        } else if (auto c = constant(value); c && *c > 0) {
          v = *c;
        } else {
          throw error(
              fmt::format("{}: '{}' of {} needs a positive integer or a constant of the "
                          "space",
                          what, fields[f], s.name));
        }
        (fields[f].starts_with("labels=") ? s.label_range : s.reduction) = v;
      } else if (auto t = parse_element_type(fields[f])) {
        s.type = *t;
      } else {
        throw error(
            fmt::format("{}: unknown element type '{}' of {} (fp32, bf16, fp16, fp8_e4m3, "
                        "fp8_e5m2, int32)",
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
