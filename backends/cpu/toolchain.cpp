// toolchain.cpp: compiles through the command backend's process handling
// (timeouts, process groups), caches by content (toolchain.hpp).
#include "cpu/toolchain.hpp"

#include "command/process.hpp"
#include "cpu/embedded.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/uuid/name_generator_sha1.hpp>
#include <boost/uuid/uuid.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>

extern "C" char** environ;  // NOLINT: POSIX

namespace tessel::detail {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> inherited_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

std::string path_variable() {
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only use
  return path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
}

std::string find_compiler(const std::string& given) {
  std::vector<std::string> candidates;
  if (!given.empty()) {
    candidates.push_back(given);
  } else {
    if (const char* cxx = std::getenv("CXX"); cxx != nullptr && *cxx != 0)  // NOLINT
      candidates.emplace_back(cxx);
    candidates.insert(candidates.end(), {"c++", "g++", "clang++"});
  }
  for (const auto& c : candidates)
    if (auto found = find_program(c, path_variable())) return *found;
  throw error(fmt::format(
      "backend cpu: no C++ compiler found (tried {}); install one (apt-get install g++) or set "
      "compiler=PATH",
      fmt::join(candidates, ", ")));
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The first `lines` lines of `text`, at most `bytes` bytes, "..." marking a cut.
std::string head_of(std::string_view text, std::size_t lines, std::size_t bytes) {
  std::size_t end = 0;
  for (std::size_t n = 0; n < lines && end < text.size(); ++n) {
    const auto nl = text.find('\n', end);
    end = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  std::string out(text.substr(0, std::min(end, bytes)));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.size() < text.size() && text.find_first_not_of(" \n", out.size()) != std::string::npos)
    out += "\n...";
  return out;
}

/// Writes atomically: a private temporary, then a rename.
void write_atomically(const fs::path& path, std::string_view text) {
  static std::atomic<std::uint64_t> counter{0};
  const auto tmp = path.string() + fmt::format(".{}-{}.tmp", ::getpid(), counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) throw error(fmt::format("backend cpu: cannot write {}", tmp));
  }
  fs::rename(tmp, path);
}

}  // namespace

std::string_view cpu_embedded_text(std::string_view name) {
  for (const auto& f : cpu_embedded_files())
    if (f.name == name) return f.text;
  throw error(fmt::format("backend cpu: no embedded file '{}' (a build defect)", name));
}

std::string host_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "";
}

std::string content_key(std::string_view text) {
  const boost::uuids::name_generator_sha1 generate(boost::uuids::ns::oid());
  auto u = boost::uuids::to_string(generate(text.data(), text.size()));
  std::erase(u, '-');
  return u;
}

toolchain::toolchain(toolchain_options o) : o_(std::move(o)) {
  compiler_path_ = find_compiler(o_.compiler);
  process_request version;
  version.arguments = {compiler_path_, "--version"};
  version.environment = inherited_environment();
  version.timeout_s = 30;
  const auto v = run_process(version);
  if (!v.started || v.exit_code != 0)
    throw error(fmt::format("backend cpu: {} --version failed: {}", compiler_path_,
                            v.started ? head_of(v.errors, 5, 500) : v.start_error));
  identity_ = compiler_path_ + " (" + head_of(v.output, 1, 200) + ")";
  key_base_ = identity_ + "\n" + fmt::format("{}", fmt::join(o_.flags, " ")) + "\n" +
              fmt::format("{}", fmt::join(o_.libraries, " ")) + "\n" + host_cpu_model() + "\n";
  std::error_code ec;
  fs::create_directories(o_.cache_dir / "build", ec);
  if (ec)
    throw error(fmt::format("backend cpu: cannot create the cache folder {}: {}",
                            o_.cache_dir.string(), ec.message()));
  for (const auto* header :
       {"tessel/cpu_kernel.hpp", "tessel/race_rule.hpp", "tessel/loop_rule.hpp"})
    (void)write_file(fmt::format("include/{}", header), cpu_embedded_text(header));

  // The loader: built once per cache, compiler and loader source.
  const auto source_text = std::string(cpu_embedded_text("loader.cpp"));
  const auto key = content_key(identity_ + "\n" + source_text +
                               std::string(cpu_embedded_text("tessel/race_rule.hpp")) +
                               std::string(cpu_embedded_text("tessel/loop_rule.hpp")) +
                               std::string(cpu_embedded_text("tessel/cpu_kernel.hpp")));
  loader_ = o_.cache_dir / ("loader-" + key);
  if (fs::exists(loader_)) return;
  const auto source = write_file("build/loader-" + key + ".cpp", source_text);
  const auto tmp = fs::path(loader_.string() + fmt::format(".{}.tmp", ::getpid()));
  process_request build;
  build.arguments = {compiler_path_,
                     "-std=c++20",
                     "-O2",
                     "-pthread",
                     "-I" + (o_.cache_dir / "include").string(),
                     "-o",
                     tmp.string(),
                     source.string(),
                     "-ldl"};
  build.environment = inherited_environment();
  build.timeout_s = 10 * o_.timeout_s;  // once per cache: a loaded machine must not stop a study
  build.kill_grace_s = o_.kill_grace_s;
  const auto r = run_process(build);
  if (!r.started || r.exit_code != 0 || r.timed_out)
    throw error(fmt::format(
        "backend cpu: building the loader with {} failed: {}", identity_,
        !r.started      ? r.start_error
        : r.timed_out   ? fmt::format("it ran past 10 x compile_timeout ({} s) and was killed",
                                      10 * o_.timeout_s)
        : r.signal != 0 ? "killed by " + signal_name(r.signal)
                        : "\n" + head_of(r.errors + r.output, 30, 4000)));
  fs::rename(tmp, loader_);
}

fs::path toolchain::write_file(const std::string& name, std::string_view text) const {
  const auto path = o_.cache_dir / name;
  fs::create_directories(path.parent_path());
  if (fs::exists(path) && read_text(path) == text) return path;
  write_atomically(path, text);
  return path;
}

std::vector<std::string> toolchain::command(const fs::path& source, const fs::path& output,
                                            bool shared) const {
  std::vector<std::string> args{compiler_path_, "-std=c++20"};
  args.insert(args.end(), o_.flags.begin(), o_.flags.end());
  if (shared) args.insert(args.end(), {"-fPIC", "-shared"});
  args.insert(args.end(), {"-pthread", "-I" + (o_.cache_dir / "include").string(), "-o",
                           output.string(), source.string()});
  args.insert(args.end(), o_.libraries.begin(), o_.libraries.end());
  return args;
}

build_result toolchain::build(const std::string& source, const std::vector<std::string>& depends,
                              const std::vector<int>& cpus) const {
  std::string keyed = key_base_ + source;
  for (const auto& d : depends) keyed += "\n" + d;
  const auto key = content_key(keyed);
  const auto dir = o_.cache_dir / "build";
  build_result out;
  out.library = dir / (key + ".so");
  const auto failed = dir / (key + ".compile_error");
  if (fs::exists(out.library)) {
    out.cached = true;
    return out;
  }
  if (fs::exists(failed)) {
    out.cached = true;
    out.status = status::compile_error;
    out.message = read_text(failed);
    return out;
  }
  const auto cpp = write_file("build/" + key + ".cpp", source);
  static std::atomic<std::uint64_t> counter{0};
  const auto tmp =
      fs::path(out.library.string() + fmt::format(".{}-{}.tmp", ::getpid(), counter.fetch_add(1)));
  process_request request;
  request.arguments = command(cpp, tmp, true);
  request.environment = inherited_environment();
  request.timeout_s = o_.timeout_s;
  request.kill_grace_s = o_.kill_grace_s;
  request.cpus = cpus;
  const auto r = run_process(request);
  out.seconds = r.wall_s;
  if (r.timed_out) {
    out.status = status::timeout;
    out.message = fmt::format(
        "the compiler ran past {} s and was killed (the compile limit; change it with "
        "--backend-set compile_timeout=S or cpu_options::compile_timeout_s)",
        o_.timeout_s);
  } else if (!r.started || r.exit_code != 0 || r.signal != 0) {
    out.status = status::compile_error;
    out.message = r.started ? head_of(r.errors + r.output, 30, 4000) : r.start_error;
    if (r.started && r.signal == 0)
      write_atomically(failed, out.message);  // the compiler's verdict
  } else {
    fs::rename(tmp, out.library);
    return out;
  }
  std::error_code ec;
  fs::remove(tmp, ec);
  return out;
}

}  // namespace tessel::detail
