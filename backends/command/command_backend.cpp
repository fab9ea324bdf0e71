// command_backend.cpp: one external program per candidate. Builds what the
// program gets (arguments with placeholders filled, environment, stdin JSON),
// runs it (process.cpp) and reads its report (protocol.cpp).
#include "command/process.hpp"
#include "command/protocol.hpp"
#include "gated/file_gate.hpp"
#include "gated/file_guard.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>
#include <tessel/racing.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include <unistd.h>

extern "C" char** environ;  // NOLINT: POSIX, not declared by every libc without _GNU_SOURCE

namespace tessel {
namespace {

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// A placeholder's text, or nullopt for a name it does not know.
using resolver = std::function<std::optional<std::string>(std::string_view name)>;

/// Fills `{name}` placeholders; `{{` and `}}` are literal braces; a brace not
/// around a name is kept as is. Unknown names are kept and reported in `unknown`.
std::string substitute(std::string_view text, const resolver& resolve,
                       std::set<std::string>* unknown) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '{' && i + 1 < text.size() && is_name_start(text[i + 1])) {
      std::size_t end = i + 1;
      while (end < text.size() && is_name_char(text[end])) ++end;
      if (end < text.size() && text[end] == '}') {
        const auto name = text.substr(i + 1, end - i - 1);
        if (auto value = resolve(name)) {
          out += *value;
          i = end;
          continue;
        }
        if (unknown != nullptr) unknown->emplace(name);
      }
    }
    out += c;
  }
  return out;
}

/// A parameter's value as the program sees it: integers in decimal, booleans
/// 0/1, symbols by name, permutations comma-joined; nullopt when inactive.
std::optional<std::string> text_of(const value& v) {
  if (!v.active) return std::nullopt;
  switch (v.kind) {
    case param_kind::integer: return std::to_string(v.integer);
    case param_kind::boolean: return v.integer != 0 ? "1" : "0";
    case param_kind::symbol: return v.symbol;
    case param_kind::permutation: return fmt::format("{}", fmt::join(v.order, ","));
  }
  return std::nullopt;
}

/// TESSEL_<NAME>: upper-cased, other characters than letters and digits as '_'.
std::string variable_name(std::string_view parameter) {
  std::string name = "TESSEL_";
  for (char c : parameter)
    name += is_name_char(c) ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : '_';
  return name;
}

bool names_let(const space& s, std::string_view name) {
  const auto& lets = s.def().lets;
  return std::any_of(lets.begin(), lets.end(), [&](const auto& l) { return l.name == name; });
}

const constant* constant_named(const space& s, std::string_view name) {
  for (const auto& k : s.def().constants)
    if (k.name == name) return &k;
  return nullptr;
}

/// A constant as the program sees it: like a parameter's value (symbols by
/// name, booleans 0/1, integers in decimal).
std::string text_of(const space& s, const constant& k) {
  if (k.type == value_type::symbol && k.value >= 0 &&
      static_cast<std::size_t>(k.value) < s.def().symbols.size())
    return s.def().symbols[static_cast<std::size_t>(k.value)];
  if (k.type == value_type::boolean) return k.value != 0 ? "1" : "0";
  return std::to_string(k.value);
}

/// Placeholder values of `c`: parameters, `config`, lets and constants.
resolver resolver_for(const space& s, const config& c) {
  return [&s, &c](std::string_view name) -> std::optional<std::string> {
    if (name == "config") return s.to_json(c);
    if (const auto p = s.parameter_index(name)) return text_of(s.value_of(c, *p)).value_or("");
    if (const auto* k = constant_named(s, name)) return text_of(s, *k);
    if (names_let(s, name)) {
      const auto v = s.evaluate(c, name);
      return v ? std::to_string(*v) : std::string();
    }
    return std::nullopt;
  };
}

/// Sets NAME=VALUE in `environment`, replacing an existing NAME.
void set_variable(std::vector<std::string>& environment, const std::string& name,
                  const std::string& value) {
  const auto prefix = name + "=";
  std::erase_if(environment, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
  environment.push_back(prefix + value);
}

std::vector<std::string> environment_for(const space& s, const config& c,
                                         const command_options& options) {
  std::vector<std::string> environment;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment.emplace_back(*e);
  for (const auto& [name, value] : options.environment) set_variable(environment, name, value);
  for (std::size_t p = 0; p < s.size(); ++p) {
    const auto name = variable_name(s.parameters()[p].name);
    const auto prefix = name + "=";
    std::erase_if(environment, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    if (auto text = text_of(s.value_of(c, p))) environment.push_back(prefix + *text);
  }
  return environment;
}

std::string path_variable(const command_options& options) {
  if (const auto it = options.environment.find("PATH"); it != options.environment.end())
    return it->second;
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only use
  return path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
}

}  // namespace

void command_options::validate() const {
  if (timeout_s && (!(*timeout_s >= 0) || !std::isfinite(*timeout_s)))
    throw options_error("command_options::timeout_s", *timeout_s, "must be >= 0 (0: no limit)");
  if (!(default_timeout_s >= 0) || !std::isfinite(default_timeout_s))
    throw options_error("command_options::default_timeout_s", default_timeout_s,
                        "must be >= 0 (0: no limit)");
  if (!(kill_grace_s >= 0) || !std::isfinite(kill_grace_s))
    throw options_error("command_options::kill_grace_s", kill_grace_s, "must be >= 0");
  if (concurrency == 0) throw options_error("command_options::concurrency", "must be at least 1");
  if (max_output_bytes == 0)
    throw options_error("command_options::max_output_bytes", "must be at least 1");
  tessel::validate(racing, "command_options::racing");
}

command_backend::command_backend(std::string_view command, options opts)
    : command_backend(split_command(command), std::move(opts)) {}

command_backend::command_backend(std::vector<std::string> arguments, options opts)
    : arguments_(std::move(arguments)), options_(std::move(opts)) {
  if (arguments_.empty()) throw error("command backend: the command is empty");
  options_.validate();
  racer_ = std::make_shared<racer>(options_.racing);
}

std::string command_backend::name() const {
  std::vector<std::string> words;
  for (const auto& a : arguments_) words.push_back(shell_quote(a));
  return fmt::format("command:{}", fmt::join(words, " "));
}

void command_backend::prepare(const space& s) {
  std::set<std::string> unknown;
  const resolver known = [&s](std::string_view name) -> std::optional<std::string> {
    if (name == "config" || s.parameter_index(name) || constant_named(s, name) ||
        names_let(s, name))
      return "";
    return std::nullopt;
  };
  for (const auto& a : arguments_) (void)substitute(a, known, &unknown);
  if (!unknown.empty()) {
    std::vector<std::string> names;
    for (const auto& p : s.parameters()) names.push_back(p.name);
    throw error(fmt::format(
        "command backend: placeholder {{{}}} names no parameter, let or constant of space "
        "'{}' (parameters: {}; {{config}} is the whole config as JSON; write {{{{ for a "
        "literal brace)",
        *unknown.begin(), s.name(), fmt::join(names, ", ")));
  }
  namespace fs = std::filesystem;
  if (!options_.working_directory.empty() && !fs::is_directory(options_.working_directory))
    throw error(fmt::format("command backend: working directory {} does not exist",
                            options_.working_directory.string()));
  const auto& program = arguments_[0];
  if (program.find('/') == std::string::npos) {
    if (!detail::find_program(program, path_variable(options_)))
      throw error(fmt::format("command backend: program '{}' not found in PATH", program));
  } else {
    const fs::path where = fs::path(program).is_absolute() || options_.working_directory.empty()
                               ? fs::path(program)
                               : options_.working_directory / program;
    if (!fs::exists(where) || ::access(where.c_str(), X_OK) != 0)
      throw error(fmt::format("command backend: program {} does not exist or is not executable",
                              where.string()));
  }
  prepare_gate(s);
}

namespace {

/// The process request of a candidate (or, with no space, the reference).
detail::process_request request_for(const std::vector<std::string>& arguments, const space& s,
                                    const config* c, const command_options& options) {
  detail::process_request request;
  if (c != nullptr) {
    const auto resolve = resolver_for(s, *c);
    for (const auto& a : arguments) request.arguments.push_back(substitute(a, resolve, nullptr));
    request.environment = environment_for(s, *c, options);
    request.input = s.to_json(*c) + "\n";
  } else {
    request.arguments = arguments;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e)
      request.environment.emplace_back(*e);
    for (const auto& [name, value] : options.environment)
      set_variable(request.environment, name, value);
  }
  request.working_directory = options.working_directory.string();
  request.timeout_s = options.limit_s();
  request.kill_grace_s = options.kill_grace_s;
  request.max_output_bytes = options.max_output_bytes;
  return request;
}

std::string read_bytes(const std::filesystem::path& path, std::uintmax_t limit) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec)
    throw error(fmt::format("it wrote no {} (a gated command writes its outputs on every run)",
                            path.filename().string()));
  if (size > limit)
    throw error(
        fmt::format("{} has {} bytes, more than its shape allows", path.filename().string(), size));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw error(fmt::format("cannot open {}", path.string()));
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  std::fclose(f);
  return bytes;
}

/// One run on .npy inputs: the program's outputs (NAME.npy per output) and
/// what it reported.
struct file_result {
  detail::file_run run;
  detail::process_result process;
};

/// Runs `request` with TESSEL_INPUT_DIR (NAME.npy per input) and
/// TESSEL_OUTPUT_DIR (empty) in a fresh private folder; reads the outputs back.
/// Every run of a candidate is made this way: the program cannot tell one
/// from another.
file_result run_on_files(detail::process_request request, const std::vector<tensor_spec>& inputs,
                         const std::vector<tensor_spec>& outputs,
                         const std::vector<std::string>& files, const std::string& timed_out) {
  namespace fs = std::filesystem;
  file_result out;
  detail::file_run& r = out.run;
  try {
    const detail::scratch_dir dir("tessel");
    fs::create_directories(dir.path() / "in");
    fs::create_directories(dir.path() / "out");
    for (std::size_t i = 0; i < inputs.size(); ++i)
      std::ofstream(dir.path() / "in" / (inputs[i].name + ".npy"), std::ios::binary)
          .write(files[i].data(), static_cast<std::streamsize>(files[i].size()));
    set_variable(request.environment, "TESSEL_INPUT_DIR", (dir.path() / "in").string());
    set_variable(request.environment, "TESSEL_OUTPUT_DIR", (dir.path() / "out").string());
    out.process = detail::run_process(request);
    const auto& result = out.process;
    r.seconds = result.wall_s;
    if (result.timed_out) {
      r.status = status::timeout;
      r.message = timed_out;
    } else if (!result.started) {
      r.status = status::runtime_error;
      r.message = "did not start: " + result.start_error;
    } else if (result.signal != 0 || result.exit_code != 0) {
      r.status = status::runtime_error;
      r.message = fmt::format("{}: {}",
                              result.signal != 0 ? detail::signal_name(result.signal)
                                                 : fmt::format("exit code {}", result.exit_code),
                              detail::tail_of(result.errors, 10, 1500));
    } else {
      for (const auto& o : outputs)
        r.outputs.push_back(read_bytes(dir.path() / "out" / (o.name + ".npy"),
                                       static_cast<std::uintmax_t>(o.elements()) * 8 + 4096));
    }
  } catch (const std::exception& e) {
    r.status = status::runtime_error;
    r.message = e.what();
  }
  return out;
}

}  // namespace

struct command_backend::gated {
  std::vector<tensor_spec> inputs, outputs;
  std::unique_ptr<tessel::gate> checker;
  detail::file_program reference;
  /// The reference's program and the files its arguments name, as they were
  /// when the backend was prepared: the candidate runs as the user and could
  /// replace them (docs/gate.md, "Round eight"). Checked around every
  /// candidate run.
  detail::file_guard reference_files;
};

namespace {

/// Whether `file` resolves under the system's own folders (/usr, /bin,
/// /sbin, /lib*, /etc).
bool system_file(const std::filesystem::path& file) {
  std::error_code ec;
  const auto real = std::filesystem::canonical(file, ec).string();
  if (ec) return false;
  for (const std::string_view root : {"/usr/", "/bin/", "/sbin/", "/lib", "/etc/"})
    if (real.starts_with(root)) return true;
  return false;
}

/// The files of `reference` (split gate_reference) that a candidate could
/// replace to make the reference agree with it: the program (found as exec
/// finds it) and every argument that names an existing regular file, both
/// relative to the working directory, that this user could change.
std::vector<std::filesystem::path> reference_files(const std::vector<std::string>& reference,
                                                   const command_options& options) {
  namespace fs = std::filesystem;
  const auto where = [&options](const fs::path& p) {
    return p.is_absolute() || options.working_directory.empty() ? p : options.working_directory / p;
  };
  std::vector<fs::path> files;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    fs::path file;
    if (i == 0 && reference[0].find('/') == std::string::npos) {
      const auto found = detail::find_program(reference[0], path_variable(options));
      if (!found) continue;
      file = where(*found);
    } else {
      file = where(reference[i]);
    }
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) continue;
    // A file neither this user can write nor in a folder it can write
    // (an interpreter under /usr/bin for a user) no candidate of its can
    // change either: not read around every run. Nor is a system file (an
    // interpreter, when tessel runs as root): a candidate that can replace
    // those owns the machine, and guarding megabytes around every run
    // would cost more than the run.
    if (::access(file.c_str(), W_OK) != 0 &&
        ::access(file.parent_path().empty() ? "." : file.parent_path().c_str(), W_OK) != 0)
      continue;
    if (system_file(file)) continue;
    if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
  }
  return files;
}

}  // namespace

void command_backend::prepare_gate(const space& s) {
  if (options_.gate_outputs.empty()) return;
  if (options_.gate_reference.empty() || options_.gate_inputs.empty())
    throw error(
        "command backend: a gated command needs gate_inputs, gate_outputs and gate_reference "
        "(docs/backends.md, \"Gated commands\")");
  if (options_.racing.max_repeats > 1)
    throw error(
        "command backend: a gated command is timed by its gate runs (every run judged and "
        "timed); min_repeats and max_repeats are for ungated commands");
  detail::check_count_setting(options_.gate_flops, "command: gate_flops", s);
  detail::check_count_setting(options_.gate_min_bytes, "command: gate_min_bytes", s);
  auto g = std::make_shared<gated>();
  g->inputs = detail::parse_tensor_specs(options_.gate_inputs, "command: gate_inputs", s);
  g->outputs = detail::parse_tensor_specs(options_.gate_outputs, "command: gate_outputs", s);
  g->checker = std::make_unique<tessel::gate>(detail::on_target(options_.gate, s));
  const auto reference_words = split_command(options_.gate_reference);
  for (const auto& file : reference_files(reference_words, options_)) g->reference_files.add(file);
  auto reference = request_for(reference_words, s, nullptr, options_);
  g->reference = [reference, ins = g->inputs, outs = g->outputs,
                  timed_out =
                      detail::timeout_message(options_)](const std::vector<std::string>& files) {
    return run_on_files(reference, ins, outs, files, timed_out).run;
  };
  gated_ = std::move(g);
}

measurement command_backend::evaluate_gated(const space& s, const config& c) {
  // Every run is the same to the program (arguments, environment, stdin,
  // an input folder of the same shape) and every run is judged and timed:
  // there is no run it could tell apart as "only timed".
  tessel::cost paid;
  const detail::file_spec spec(
      gated_->inputs, gated_->outputs, gated_->reference,
      detail::count_setting(options_.gate_flops, "command: gate_flops", s, c),
      detail::count_setting(options_.gate_min_bytes, "command: gate_min_bytes", s, c));
  gate_session session = gated_->checker->session(spec, s.key(c));
  detail::session_files files(session);
  const auto request = request_for(arguments_, s, &c, options_);
  // The objective counts only runs on inputs the program had never been
  // given: a repeat (for the determinism rule) could be answered from a
  // cache it keeps on disk by the inputs' content. Repeats are judged alike,
  // so a set judged on has been given.
  std::vector<measurement> reports;
  const auto timed_out = detail::timeout_message(options_);
  const auto& calls = session.calls();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::size_t set = calls[i];
    const bool first = !session.judged_on(set);
    const auto what = fmt::format("run {} of {}", i + 1, calls.size());
    detail::file_guard::run_scope guarded(&gated_->reference_files);
    const file_result r =
        run_on_files(request, gated_->inputs, gated_->outputs, files.of(set), timed_out);
    paid.run_s += r.run.seconds;
    std::vector<std::string> changed;
    for (const auto& path : guarded.changed()) changed.push_back(path.string());
    if (!changed.empty())
      return measurement::failure(
          status::suspicious,
          fmt::format("{}: suspicious: its process changed the reference's files ({}); they are "
                      "restored",
                      what, fmt::join(changed, ", ")),
          paid);
    if (auto failed = detail::judge_run(session, set, r.run, gated_->outputs, what, paid))
      return *failed;
    measurement report = detail::interpret(r.process, options_);
    if (!report.ok()) {
      report.message = fmt::format("{}: {}", what, report.message);
      report.cost = paid;
      return report;
    }
    paid.compile_s += report.cost.compile_s;
    if (first) reports.push_back(std::move(report));
  }
  const verdict v = session.finish();
  if (!v.ok()) return detail::failed_verdict(v, paid);
  measurement m;
  for (const auto& r : reports) m.samples.push_back(r.objective);
  m.objective = median_with_interval(m.samples).median;
  const auto median_run =
      std::min_element(reports.begin(), reports.end(), [&](const auto& a, const auto& b) {
        return std::abs(a.objective - m.objective) < std::abs(b.objective - m.objective);
      });
  m.metrics = median_run->metrics;
  m.message = median_run->message;
  m.metrics["gate_runs"] = static_cast<double>(calls.size());
  m.metrics["gate_max_error"] = v.max_error;
  m.cost = paid;
  gated_->checker->apply_time(m, spec);
  return m;
}

measurement command_backend::evaluate(const space& s, const config& c) {
  return evaluate(s, c, false);
}

std::optional<measurement> command_backend::remeasure(const space& s, const config& c) {
  if (gated_ || options_.racing.max_repeats <= 1) return std::nullopt;
  return evaluate(s, c, true);
}

measurement command_backend::evaluate(const space& s, const config& c, bool full) {
  if (gated_) return evaluate_gated(s, c);
  const auto run = [&] {
    return detail::interpret(detail::run_process(request_for(arguments_, s, &c, options_)),
                             options_);
  };
  return options_.racing.max_repeats <= 1 ? run() : race_measurements(*racer_, run, full);
}

double command_backend::estimated_cost(const space& s, const config& c) const {
  (void)s;
  (void)c;
  return options_.estimated_cost_s;
}

}  // namespace tessel
