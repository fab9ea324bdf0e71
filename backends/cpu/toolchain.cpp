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
#include <ctime>
#include <fstream>
#include <optional>
#include <tuple>

#include <sys/stat.h>
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

/// A name no other thread or process uses: for a temporary beside `path`.
std::string private_name(const fs::path& path, std::string_view what) {
  static std::atomic<std::uint64_t> counter{0};
  return path.string() + fmt::format(".{}-{}.{}", ::getpid(), counter.fetch_add(1), what);
}

/// Writes atomically: a private temporary, then a rename.
void write_atomically(const fs::path& path, std::string_view text) {
  const auto tmp = private_name(path, "tmp");
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) throw error(fmt::format("backend cpu: cannot write {}", tmp));
  }
  fs::rename(tmp, path);
}

/// A file's bytes; nullopt when it cannot be read (vanished, a folder).
std::optional<std::string> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
  if (size < 0) return std::nullopt;
  std::string text(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(text.data(), size) || in.peek() != std::char_traits<char>::eof())
    return std::nullopt;
  return text;
}

/// A file's bytes; "" when it cannot be read.
std::string read_text(const fs::path& path) { return read_bytes(path).value_or(""); }

/// The files a compile read, from the dependency file GCC and Clang write
/// with -MD/-MMD -MF (make syntax: the first rule's prerequisites, lines
/// continued with a backslash, spaces escaped as "\ ", '#' as "\#", '$' as
/// "$$"), made absolute against the working folder the compiler ran in.
/// nullopt when there is no rule (no file, or a compiler that wrote none).
std::optional<std::vector<fs::path>> dependency_list(std::string_view text) {
  std::string line;
  for (std::size_t i = 0; i < text.size() && text[i] != '\n'; ++i) {
    if (text[i] == '\\' && text.substr(i + 1, 1) == "\n")
      ++i;  // a continuation
    else if (text[i] == '\\' && text.substr(i + 1, 2) == "\r\n")
      i += 2;
    else
      line += text[i];
  }
  std::size_t colon = 0;
  while (colon < line.size() &&
         !(line[colon] == ':' &&
           (colon + 1 == line.size() || line[colon + 1] == ' ' || line[colon + 1] == '\t')))
    ++colon;
  if (colon == line.size()) return std::nullopt;
  std::vector<fs::path> out;
  std::string word;
  const auto flush = [&] {
    if (!word.empty()) out.push_back(fs::absolute(word));
    word.clear();
  };
  for (std::size_t i = colon + 1; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\\' && i + 1 < line.size() && (line[i + 1] == ' ' || line[i + 1] == '#'))
      word += line[++i];
    else if (c == '$' && i + 1 < line.size() && line[i + 1] == '$')
      word += line[++i];
    else if (c == ' ' || c == '\t' || c == '\r')
      flush();
    else
      word += c;
  }
  flush();
  return out;
}

/// A file's ctime: the kernel's clock at its last write, rename or utime,
/// which no process can set back (unlike mtime). nullopt when it is gone.
std::optional<std::timespec> change_time(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st.st_ctim;
}

constexpr std::string_view manifest_magic = "tessel cpu build manifest 1\n";

/// The manifest's lines for `files` but `source` (its text is in the key):
/// "HASH SIZE PATH" each. nullopt when one cannot be read, has a newline in
/// its name, or was written after `started` (edited while the compiler ran:
/// what it read is unknown, so the build is not kept for later lookups).
std::optional<std::string> manifest_lines(const std::vector<fs::path>& files,
                                          const fs::path& source, std::timespec started) {
  std::string lines;
  for (const auto& f : files) {
    if (f == source) continue;
    const auto changed = change_time(f);
    const auto text = read_bytes(f);
    if (!changed ||
        std::tie(changed->tv_sec, changed->tv_nsec) > std::tie(started.tv_sec, started.tv_nsec) ||
        !text || f.string().find('\n') != std::string::npos)
      return std::nullopt;
    lines += fmt::format("{} {} {}\n", content_key(*text), text->size(), f.string());
  }
  return lines;
}

/// Whether every file of `lines` (manifest_lines) still holds what it held.
bool unchanged(std::string_view lines) {
  while (!lines.empty()) {
    const auto end = lines.find('\n');
    const auto line = lines.substr(0, end);
    lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 1);
    const auto space = line.find(' ', 33);
    if (line.size() < 35 || line[32] != ' ' || space == std::string_view::npos) return false;
    const auto text = read_bytes(std::string(line.substr(space + 1)));
    if (!text || std::to_string(text->size()) != line.substr(33, space - 33) ||
        content_key(*text) != line.substr(0, 32))
      return false;
  }
  return true;
}

/// A cached outcome: stem.manifest names what the compile left (a build or
/// a compiler's message) beside it, and the files it read.
struct cached_outcome {
  bool built = false;
  fs::path file;
};

std::optional<cached_outcome> look_up(const fs::path& stem) {
  const auto text = read_bytes(stem.string() + ".manifest");
  if (!text || !text->starts_with(manifest_magic)) return std::nullopt;
  std::string_view rest(*text);
  rest.remove_prefix(manifest_magic.size());
  const auto end = rest.find('\n');
  const auto head = rest.substr(0, end);
  const auto space = head.find(' ');
  if (end == std::string_view::npos || space == std::string_view::npos) return std::nullopt;
  const auto kind = head.substr(0, space);
  cached_outcome out{kind == "built", stem.parent_path() / std::string(head.substr(space + 1))};
  if ((kind != "built" && kind != "compile_error") || !unchanged(rest.substr(end + 1)) ||
      !fs::exists(out.file))
    return std::nullopt;
  return out;
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
              fmt::format("{}", fmt::join(o_.libraries, " ")) + "\n" + host_cpu_model() + "\n" +
              (o_.hash_system_headers ? "system headers\n" : "");
  std::error_code ec;
  fs::create_directories(o_.cache_dir / "build", ec);
  if (ec)
    throw error(fmt::format("backend cpu: cannot create the cache folder {}: {}",
                            o_.cache_dir.string(), ec.message()));
  for (const auto* header :
       {"tessel/cpu_kernel.hpp", "tessel/race_rule.hpp", "tessel/loop_rule.hpp"})
    (void)write_file(fmt::format("include/{}", header), cpu_embedded_text(header));

  // The loader: built once per cache, compiler and loader source, and
  // again when a header it read (cache/include) is not what it was.
  const auto source_text = std::string(cpu_embedded_text("loader.cpp"));
  const auto key = content_key(identity_ + "\n" + source_text +
                               std::string(cpu_embedded_text("tessel/race_rule.hpp")) +
                               std::string(cpu_embedded_text("tessel/loop_rule.hpp")) +
                               std::string(cpu_embedded_text("tessel/cpu_kernel.hpp")) +
                               (o_.hash_system_headers ? "\nsystem headers" : ""));
  const auto stem = o_.cache_dir / ("loader-" + key);
  const auto source = o_.cache_dir / "build" / ("loader-" + key + ".cpp");
  const auto limit = 10 * o_.timeout_s;  // once per cache: a loaded machine must not stop a study
  const auto built =
      compile_cached(stem, "", source, source_text,
                     {compiler_path_, "-std=c++20", "-O2", "-pthread",
                      "-I" + (o_.cache_dir / "include").string(), source.string(), "-ldl"},
                     limit, {});
  if (built.status != status::ok)
    throw error(fmt::format(
        "backend cpu: building the loader with {} failed: {}", identity_,
        built.status == status::timeout
            ? fmt::format("it ran past 10 x compile_timeout ({} s) and was killed", limit)
            : "\n" + built.message));
  loader_ = built.library;
}

fs::path toolchain::write_file(const std::string& name, std::string_view text) const {
  const auto path = o_.cache_dir / name;
  fs::create_directories(path.parent_path());
  if (fs::exists(path) && read_text(path) == text) return path;
  write_atomically(path, text);
  return path;
}

std::vector<std::string> toolchain::command(const fs::path& source) const {
  std::vector<std::string> args{compiler_path_, "-std=c++20"};
  args.insert(args.end(), o_.flags.begin(), o_.flags.end());
  args.insert(args.end(), {"-fPIC", "-shared", "-pthread",
                           "-I" + (o_.cache_dir / "include").string(), source.string()});
  args.insert(args.end(), o_.libraries.begin(), o_.libraries.end());
  return args;
}

build_result toolchain::build(const std::string& source, const std::vector<std::string>& depends,
                              const std::vector<int>& cpus) const {
  std::string keyed = key_base_ + source;
  for (const auto& d : depends) keyed += "\n" + d;
  const auto key = content_key(keyed);
  const auto cpp = o_.cache_dir / "build" / (key + ".cpp");
  auto out = compile_cached(o_.cache_dir / "build" / key, ".so", cpp, source, command(cpp),
                            o_.timeout_s, cpus);
  if (out.status == status::timeout)
    out.message = fmt::format(
        "the compiler ran past {} s and was killed (the compile limit; change it with "
        "--backend-set compile_timeout=S or cpu_options::compile_timeout_s)",
        o_.timeout_s);
  return out;
}

build_result toolchain::compile_cached(const fs::path& stem, const std::string& suffix,
                                       const fs::path& source, std::string_view text,
                                       std::vector<std::string> arguments, double timeout_s,
                                       const std::vector<int>& cpus) const {
  build_result out;
  if (const auto hit = look_up(stem)) {
    out.cached = true;
    if (hit->built) {
      out.library = hit->file;
    } else {
      out.status = status::compile_error;
      out.message = read_text(hit->file);
    }
    return out;
  }
  // The source is written only now: a lookup reads no more than the manifest
  // and the files it names (its key is the source's text).
  (void)write_file(fs::relative(source, o_.cache_dir).string(), text);
  const auto tmp = fs::path(private_name(stem.string() + suffix, "tmp"));
  const auto deps = fs::path(private_name(stem, "d"));
  { std::ofstream touch(deps); }  // its ctime: a file changed after it, changed mid-compile
  const auto started = change_time(deps);
  process_request request;
  request.arguments = std::move(arguments);
  request.arguments.insert(
      request.arguments.end(),
      {"-o", tmp.string(), o_.hash_system_headers ? "-MD" : "-MMD", "-MF", deps.string()});
  request.environment = inherited_environment();
  request.timeout_s = timeout_s;
  request.kill_grace_s = o_.kill_grace_s;
  request.cpus = cpus;
  const auto r = run_process(request);
  out.seconds = r.wall_s;
  const auto read = dependency_list(read_bytes(deps).value_or(""));
  std::error_code ec;
  fs::remove(deps, ec);
  const auto lines = read && started ? manifest_lines(*read, source, *started) : std::nullopt;
  const auto keep = [&](const std::string& name, std::string_view kind) {
    if (!lines) return;  // a missing header, an edit mid-compile: not reused, never stale
    write_atomically(stem.string() + ".manifest",
                     fmt::format("{}{} {}\n{}", manifest_magic, kind,
                                 fs::path(name).filename().string(), *lines));
  };
  if (r.timed_out) {
    out.status = status::timeout;
  } else if (!r.started || r.exit_code != 0 || r.signal != 0) {
    out.status = status::compile_error;
    out.message = !r.started      ? r.start_error
                  : r.signal != 0 ? "the compiler was killed by " + signal_name(r.signal)
                                  : head_of(r.errors + r.output, 30, 4000);
    if (r.started && r.signal == 0 && lines) {  // the compiler's verdict on these files
      const auto name = fmt::format("{}-{}.compile_error", stem.string(),
                                    content_key(*lines + out.message).substr(0, 16));
      write_atomically(name, out.message);
      keep(name, "compile_error");
    }
  } else {
    // Named by what it was built from: two processes that built the same
    // files write the same name, a manifest names only its own build.
    out.library =
        lines ? fmt::format("{}-{}{}", stem.string(), content_key(*lines).substr(0, 16), suffix)
              : private_name(stem, "uncached") + suffix;
    fs::rename(tmp, out.library);
    keep(out.library, "built");
    return out;
  }
  fs::remove(tmp, ec);
  return out;
}

}  // namespace tessel::detail
