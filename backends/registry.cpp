// registry.cpp: backends by scheme. A table of factories that other modules
// extend with register_backend (the simulator adds "sim"); the built-in
// schemes (replay, command) are registered on first use.
#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include "sim/factory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

namespace tessel {
namespace {

/// Reads settings by key and rejects the keys nobody read.
class setting_reader {
 public:
  setting_reader(std::string scheme, const backend_settings& settings)
      : scheme_(std::move(scheme)), settings_(settings) {}

  std::optional<std::string> text(const std::string& key) {
    known_.insert(key);
    const auto it = settings_.find(key);
    if (it == settings_.end()) return std::nullopt;
    used_.insert(key);
    return it->second;
  }

  std::optional<double> number(const std::string& key) {
    const auto t = text(key);
    if (!t) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(t->c_str(), &end);
    if (t->empty() || end != t->c_str() + t->size() || errno == ERANGE)
      throw error(
          fmt::format("backend {}: setting {} must be a number, got '{}'", scheme_, key, *t));
    return v;
  }

  std::optional<std::size_t> count(const std::string& key) {
    const auto v = number(key);
    if (!v) return std::nullopt;
    if (*v < 1 || *v != static_cast<double>(static_cast<std::size_t>(*v)))
      throw error(fmt::format("backend {}: setting {} must be a whole number >= 1, got {}", scheme_,
                              key, *v));
    return static_cast<std::size_t>(*v);
  }

  std::optional<bool> flag(const std::string& key) {
    const auto t = text(key);
    if (!t) return std::nullopt;
    if (*t == "1" || *t == "true" || *t == "yes" || *t == "on") return true;
    if (*t == "0" || *t == "false" || *t == "no" || *t == "off") return false;
    throw error(
        fmt::format("backend {}: setting {} must be true or false, got '{}'", scheme_, key, *t));
  }

  /// Every setting whose key starts with `prefix`, with the prefix removed.
  std::map<std::string, std::string> prefixed(const std::string& prefix) {
    known_.insert(prefix + "NAME");
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : settings_)
      if (key.rfind(prefix, 0) == 0 && key.size() > prefix.size()) {
        out[key.substr(prefix.size())] = value;
        used_.insert(key);
      }
    return out;
  }

  /// Throws for a setting no one read, naming the ones this scheme accepts.
  void finish() const {
    for (const auto& [key, value] : settings_)
      if (!used_.contains(key))
        throw error(fmt::format("backend {}: unknown setting '{}' (settings: {})", scheme_, key,
                                fmt::join(known_, ", ")));
  }

 private:
  std::string scheme_;
  const backend_settings& settings_;
  std::set<std::string> known_, used_;
};

std::shared_ptr<backend> make_replay(std::string_view argument, const backend_settings& settings) {
  if (argument.empty()) throw error("backend replay: give the table's path, as replay:PATH");
  setting_reader read("replay", settings);
  replay_options options;
  options.concurrency = read.count("concurrency").value_or(options.concurrency);
  options.count_framework_time =
      read.flag("count_framework_time").value_or(options.count_framework_time);
  options.exact_cost_estimate =
      read.flag("exact_cost_estimate").value_or(options.exact_cost_estimate);
  read.finish();
  return std::make_shared<replay_backend>(std::filesystem::path(std::string(argument)), options);
}

std::shared_ptr<backend> make_command(std::string_view argument, const backend_settings& settings) {
  if (argument.empty()) throw error("backend command: give the command, as command:CMD");
  setting_reader read("command", settings);
  command_options options;
  options.timeout_s = read.number("timeout").value_or(options.timeout_s);
  options.kill_grace_s = read.number("kill_grace").value_or(options.kill_grace_s);
  options.working_directory = read.text("workdir").value_or("");
  options.concurrency = read.count("concurrency").value_or(options.concurrency);
  options.estimated_cost_s = read.number("estimated_cost").value_or(options.estimated_cost_s);
  for (auto& [name, value] : read.prefixed("env.")) options.environment[name] = value;
  read.finish();
  return std::make_shared<command_backend>(argument, options);
}

struct registry {
  std::mutex mutex;
  std::map<std::string, backend_factory, std::less<>> factories{
      {"replay", make_replay},
      {"command", make_command},
      {"sim", sim::make_sim_backend},
  };
};

registry& the_registry() {
  static registry r;
  return r;
}

}  // namespace

void register_backend(std::string scheme, backend_factory factory) {
  if (scheme.empty() || scheme.find(':') != std::string::npos)
    throw error(fmt::format("register_backend: bad scheme '{}' (non-empty, no ':')", scheme));
  if (!factory) throw error(fmt::format("register_backend: empty factory for scheme '{}'", scheme));
  auto& r = the_registry();
  const std::lock_guard lock(r.mutex);
  r.factories[std::move(scheme)] = std::move(factory);
}

std::vector<std::string> backend_schemes() {
  auto& r = the_registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

std::shared_ptr<backend> make_backend(std::string_view spec, const backend_settings& settings) {
  const auto colon = spec.find(':');
  const auto scheme = spec.substr(0, colon);
  const auto argument =
      colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  backend_factory factory;
  {
    auto& r = the_registry();
    const std::lock_guard lock(r.mutex);
    if (const auto it = r.factories.find(scheme); it != r.factories.end()) factory = it->second;
  }
  if (!factory)
    throw error(
        fmt::format("unknown backend '{}' in '{}' (known: {}; write SCHEME:ARGUMENT, e.g. "
                    "replay:table.json.gz or command:./bench)",
                    scheme, spec, fmt::join(backend_schemes(), ", ")));
  return factory(argument, settings);
}

}  // namespace tessel
