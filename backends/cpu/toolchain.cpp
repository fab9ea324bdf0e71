// toolchain.cpp: compiles through the command backend's process handling
// (timeouts, process groups), caches by content (toolchain.hpp).
#include "cpu/toolchain.hpp"

#include "command/process.hpp"
#include "cpu/embedded.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>

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

constexpr std::string_view manifest_family = "tessel cpu build manifest ";
/// Version 3: SHA-256 fingerprints (2: SHA-1, which keys of their own kept
/// apart anyway). A manifest of another version is a miss, never misread.
constexpr std::string_view manifest_magic = "tessel cpu build manifest 3\n";

/// What a manifest records of a file's bytes: "HASH SIZE".
std::string fingerprint(std::string_view bytes) {
  return fmt::format("{} {}", content_key(bytes), bytes.size());
}

/// `text` cut at its first space: the word before and the rest after it;
/// nullopt when it has none.
std::optional<std::pair<std::string_view, std::string_view>> split_word(std::string_view text) {
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  return std::pair{text.substr(0, space), text.substr(space + 1)};
}

/// `text`'s first line (without its newline), and `text` moved past it.
std::string_view next_line(std::string_view& text) {
  const auto end = text.find('\n');
  const auto line = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  return line;
}

/// Writes `text` to `path` (its folders made) unless it holds it already.
void write_if_different(const fs::path& path, std::string_view text) {
  if (read_regular(path) == text) return;
  fs::create_directories(path.parent_path());
  write_atomically(path, text);
}

/// Whether `path` holds `text` and was last written no later than `since`.
bool holds(const fs::path& path, std::string_view text, std::timespec since) {
  const auto changed = change_time(path);
  return changed &&
         std::tie(changed->tv_sec, changed->tv_nsec) <= std::tie(since.tv_sec, since.tv_nsec) &&
         read_regular(path) == text;
}

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
    const auto text = read_regular(f);
    if (!changed ||
        std::tie(changed->tv_sec, changed->tv_nsec) > std::tie(started.tv_sec, started.tv_nsec) ||
        !text || f.string().find('\n') != std::string::npos)
      return std::nullopt;
    lines += fmt::format("{} {}\n", fingerprint(*text), f.string());
  }
  return lines;
}

/// Whether every file of `lines` (manifest_lines: "HASH SIZE PATH") still
/// holds what it held.
bool unchanged(std::string_view lines) {
  while (!lines.empty()) {
    const auto line = next_line(lines);
    const auto hash = split_word(line);
    const auto size = hash ? split_word(hash->second) : std::nullopt;
    if (!size) return false;
    const auto path = size->second;
    const auto text = read_regular(std::string(path));
    if (!text || fingerprint(*text) != line.substr(0, line.size() - path.size() - 1)) return false;
  }
  return true;
}

/// A lookup of stem.manifest: its first lines are the magic, "KIND NAME"
/// (what the compile left beside it: a build or a compiler's message) and
/// "HASH SIZE" (a fingerprint of its bytes); then the files the compile read.
struct lookup {
  /// A hit: whether it built; a build's sealed copy, whose own bytes were
  /// checked, or the compiler's message.
  bool hit = false, built = false;
  std::shared_ptr<const sealed_file> sealed;
  std::string message;
  /// The file a manifest names (of any version, hit or not): removed when a
  /// new manifest replaces it. Only names of stem's own outcomes count.
  fs::path named;
  std::string note;  ///< why a named outcome was not used, when it did not hold its bytes
};

/// How old a manifest's mtime (its last use, for trim_builds) may be before
/// a hit sets it to now: the least recently used keys go first, and this
/// is the order's grain. Keys used within it are ordered by the use before.
constexpr std::time_t use_grain_s = 5 * 60;

/// Records a hit of `manifest`, whose status is `st`: sets its mtime to now
/// when it is older than use_grain_s (else nothing: a hit then costs no
/// write to the file system). A manifest another user owns and does not let
/// this one write keeps its mtime.
void mark_use(const fs::path& manifest, const struct stat& st) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  if (st.st_mtim.tv_sec + use_grain_s > now.tv_sec) return;
  (void)::utimensat(AT_FDCWD, manifest.c_str(), nullptr, 0);
}

lookup look_up(const fs::path& stem) {
  lookup out;
  const auto manifest = fs::path(stem.string() + ".manifest");
  struct stat manifest_status {};
  const auto text = read_regular(manifest, &manifest_status);
  if (!text || !text->starts_with(manifest_family)) return out;
  std::string_view rest(*text);
  const bool current = next_line(rest) == manifest_magic.substr(0, manifest_magic.size() - 1);
  const auto kind = split_word(next_line(rest));
  if (!kind) return out;
  const auto file = std::string(kind->second);
  const auto own = stem.filename().string() + "-";
  if (!file.starts_with(own) || file.find('/') != std::string::npos) return out;
  out.named = stem.parent_path() / file;
  const auto recorded = next_line(rest);
  if (!current || (kind->first != "built" && kind->first != "compile_error") || !unchanged(rest))
    return out;
  // A build is checked in its sealed copy, which is what a run loads: a
  // swap of the cache's file after this check is never run.
  const bool built = kind->first == "built";
  auto sealed = built ? sealed_file::copy_of(out.named) : nullptr;
  auto message = built ? std::nullopt : read_regular(out.named);
  if (!sealed && !message) return out;
  if (fingerprint(sealed ? sealed->bytes() : *message) != recorded) {
    out.note = fmt::format(
        "{} did not hold the bytes its manifest recorded (it was changed after it was built); "
        "it is not used, and was built again",
        out.named.string());
    return out;
  }
  out.hit = true;
  out.built = built;
  out.sealed = std::move(sealed);
  out.message = std::move(message).value_or("");
  mark_use(manifest, manifest_status);  // for trim_builds: the least recently used go first
  return out;
}

/// `path`'s size, 0 when it has none (gone).
std::uintmax_t size_of(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

/// The build a file the reference's guard wrote beside it belongs to
/// (file_guard::run_scope::changed): BUILD.changed-PID-N, what a run wrote
/// over it, kept; BUILD.restore-PID, the bytes put back before their
/// rename. "" for any other name.
std::string guarded_build_of(const std::string& name) {
  for (const auto* mark : {".changed-", ".restore-"})
    if (const auto at = name.rfind(mark); at != std::string::npos && at > 0)
      return name.substr(0, at);
  return {};
}

/// Removes the files the guard kept beside the build `outcome` (all of
/// them when `outcome` is ""), of `asides`; returns their bytes.
std::uintmax_t remove_asides(std::vector<fs::path>& asides, const fs::path& outcome) {
  std::uintmax_t bytes = 0;
  std::error_code ec;
  std::erase_if(asides, [&](const fs::path& aside) {
    if (!outcome.empty() &&
        guarded_build_of(aside.filename().string()) != outcome.filename().string())
      return false;
    bytes += size_of(aside);
    fs::remove(aside, ec);
    return true;
  });
  return bytes;
}

/// Keeps the builds folder `dir` under `limit` bytes, when it is over:
/// removes keys in the order of their manifests' last use (a hit touches
/// its manifest), each manifest with its unit (KEY.cpp), the outcome it
/// names and what the guard kept beside that outcome, skipping a key whose
/// outcome is in use (remove_unless_in_use); first, the changed bytes the
/// guard kept beside a build that is gone. Returns the folder's size after it, as the
/// scan found it less what it removed.
std::uintmax_t trim_builds(const fs::path& dir, std::uintmax_t limit) {
  std::uintmax_t total = 0;
  std::vector<std::pair<fs::file_time_type, fs::path>> manifests;
  std::vector<fs::path> asides, orphans;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    total += size_of(e.path());
    std::error_code when;
    if (e.path().extension() == ".manifest")
      manifests.emplace_back(fs::last_write_time(e.path(), when), e.path());
    else if (const auto build = guarded_build_of(e.path().filename().string()); !build.empty())
      // A .restore- file whose build is gone may be one a guard is about to rename.
      (fs::exists(dir / build, when) || e.path().string().find(".changed-") == std::string::npos
           ? asides
           : orphans)
          .push_back(e.path());
  }
  if (total > limit) total -= std::min(total, remove_asides(orphans, {}));
  std::sort(manifests.begin(), manifests.end());
  for (auto it = manifests.begin(); total > limit && it != manifests.end(); ++it) {
    const auto& manifest = it->second;
    const auto text = read_regular(manifest).value_or("");
    std::string_view rest(text);
    (void)next_line(rest);
    const auto kind = split_word(next_line(rest));
    const auto key = manifest.stem().string();
    fs::path outcome;
    if (kind && kind->second.starts_with(key + "-") && kind->second.find('/') == std::string::npos)
      outcome = dir / kind->second;
    const auto unit = dir / (key + ".cpp");
    const auto sizes = size_of(outcome) + size_of(manifest) + size_of(unit);
    if (!outcome.empty() && !remove_unless_in_use(outcome)) continue;
    fs::remove(manifest, ec);
    fs::remove(unit, ec);
    total -= std::min(total, sizes + (outcome.empty() ? 0 : remove_asides(asides, outcome)));
  }
  return total;
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
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1)
    throw error("backend cpu: OpenSSL's libcrypto could not compute a SHA-256");
  constexpr std::string_view hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4U];
    out += hex[digest[i] & 0xfU];
  }
  return out;
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
  // This version's embedded files, in a folder of their own: another
  // version sharing the cache writes its own beside it, never over them.
  std::string embedded;
  for (const auto& f : cpu_embedded_files())
    embedded += fmt::format("{} {}\n{}\n", f.name, f.text.size(), f.text);
  embedded_ = o_.cache_dir / ("embedded-" + content_key(embedded).substr(0, 16));
  std::error_code ec;
  fs::create_directories(o_.cache_dir / "build", ec);
  if (ec)
    throw error(fmt::format("backend cpu: cannot create the cache folder {}: {}",
                            o_.cache_dir.string(), ec.message()));
  remove_leftovers_of_dead(o_.cache_dir);
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
                      "-I" + (embedded_ / "include").string(), source.string(), "-ldl"},
                     limit, {});
  if (built.status != status::ok)
    throw error(fmt::format(
        "backend cpu: building the loader with {} failed: {}", identity_,
        built.status == status::timeout
            ? fmt::format("it ran past 10 x compile_timeout ({} s) and was killed", limit)
            : "\n" + built.message));
  loader_ = built;
}

fs::path toolchain::write_file(const std::string& name, std::string_view text) const {
  const auto path = embedded_ / name;
  {
    const std::lock_guard lock(own_mutex_);
    own_.insert_or_assign(path, std::string(text));
  }
  write_if_different(path, text);
  return path;
}

std::string toolchain::restore_own_files() const {
  const std::lock_guard lock(own_mutex_);
  std::vector<std::string> put_back;
  for (const auto& [path, text] : own_)
    if (read_regular(path) != text) {
      write_if_different(path, text);
      put_back.push_back(path.string());
    }
  return put_back.empty()
             ? ""
             : fmt::format("tessel's own {} did not hold what tessel wrote; written again",
                           fmt::join(put_back, ", "));
}

bool toolchain::own_files_intact(const std::timespec& since) const {
  const std::lock_guard lock(own_mutex_);
  return std::all_of(own_.begin(), own_.end(),
                     [&since](const auto& file) { return holds(file.first, file.second, since); });
}

std::vector<std::string> toolchain::command(const fs::path& source) const {
  std::vector<std::string> args{compiler_path_, "-std=c++20"};
  args.insert(args.end(), o_.flags.begin(), o_.flags.end());
  args.insert(args.end(), {"-fPIC", "-shared", "-pthread", "-I" + (embedded_ / "include").string(),
                           source.string()});
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
  // After a compile, never on a hit; the new build is in use (out.sealed).
  // What it added: the unit, the manifest and the outcome (counted when
  // not kept too: an estimate may be over, never under).
  if (!out.cached && o_.cache_limit_bytes > 0)
    account(source.size() + size_of(o_.cache_dir / "build" / (key + ".manifest")) +
            (out.sealed ? out.sealed->bytes().size() : out.message.size()));
  return out;
}

void toolchain::account(std::uintmax_t added) const {
  const auto limit = o_.cache_limit_bytes;
  const std::lock_guard lock(tally_.mutex);
  tally_.estimate += added;
  tally_.since_scan += added;
  if (tally_.scanned && tally_.estimate <= limit && tally_.since_scan <= limit / rescan_fraction)
    return;
  tally_.estimate = trim_builds(o_.cache_dir / "build", limit);
  tally_.since_scan = 0;
  tally_.scanned = true;
  ++tally_.scans;
}

std::uint64_t toolchain::scans() const {
  const std::lock_guard lock(tally_.mutex);
  return tally_.scans;
}

build_result toolchain::compile_cached(const fs::path& stem, const std::string& suffix,
                                       const fs::path& source, std::string_view text,
                                       std::vector<std::string> arguments, double timeout_s,
                                       const std::vector<int>& cpus) const {
  build_result out;
  auto found = look_up(stem);
  if (found.hit) {
    out.cached = true;
    if (found.built) {
      out.library = found.named;
      out.sealed = std::move(found.sealed);
    } else {
      out.status = status::compile_error;
      out.message = std::move(found.message);
    }
    return out;
  }
  std::vector<std::string> notes;
  if (!found.note.empty()) notes.push_back(found.note);
  const auto tmp = fs::path(private_name(stem.string() + suffix, "tmp"));
  process_result r;
  std::optional<std::string> lines;
  // A compile that read tessel's own files (its headers, a built-in
  // kernel's source, the unit) while something changed them built what that
  // process wrote: they are put back and it compiles again, once.
  for (int attempt = 0;; ++attempt) {
    if (auto restored = restore_own_files(); !restored.empty()) notes.push_back(restored);
    // The source is written only now: a lookup reads no more than the
    // manifest and the files it names (its key is the source's text).
    write_if_different(source, text);
    const auto deps = fs::path(private_name(stem, "d"));
    { std::ofstream touch(deps); }  // its ctime: a file changed after it, changed mid-compile
    const auto started = change_time(deps);
    process_request request;
    request.arguments = arguments;
    request.arguments.insert(
        request.arguments.end(),
        {"-o", tmp.string(), o_.hash_system_headers ? "-MD" : "-MMD", "-MF", deps.string()});
    request.environment = inherited_environment();
    request.timeout_s = timeout_s;
    request.kill_grace_s = o_.kill_grace_s;
    request.cpus = cpus;
    r = run_process(request);
    out.seconds += r.wall_s;
    const auto read = dependency_list(read_regular(deps).value_or(""));
    std::error_code ec;
    fs::remove(deps, ec);
    lines = read && started ? manifest_lines(*read, source, *started) : std::nullopt;
    if (started && own_files_intact(*started) && holds(source, text, *started)) break;
    fs::remove(tmp, ec);
    if (attempt == 1) {
      out.status = status::compile_error;
      out.message =
          "tessel's own files in the compile cache (its headers, the unit it compiles) were "
          "changed while the compiler ran, twice: a process beside it writes them (a kernel "
          "being run?); the build is not used";
      out.note = fmt::format("{}", fmt::join(notes, "; "));
      return out;
    }
    notes.push_back("tessel's own files were changed while the compiler ran; compiled again");
  }
  out.note = fmt::format("{}", fmt::join(notes, "; "));
  const auto keep = [&](const fs::path& file, std::string_view kind, std::string_view bytes) {
    if (!lines) return;  // a missing header, an edit mid-compile: not reused, never stale
    write_atomically(stem.string() + ".manifest",
                     fmt::format("{}{} {}\n{}\n{}", manifest_magic, kind, file.filename().string(),
                                 fingerprint(bytes), *lines));
    // The outcome the replaced manifest named is no one's now.
    std::error_code ec;
    if (!found.named.empty() && found.named != file) fs::remove(found.named, ec);
  };
  std::error_code ec;
  if (r.timed_out) {
    out.status = status::timeout;
  } else if (!r.started || r.exit_code != 0 || r.signal != 0) {
    out.status = status::compile_error;
    out.message = !r.started      ? r.start_error
                  : r.signal != 0 ? "the compiler was killed by " + signal_name(r.signal)
                                  : head_of(r.errors + r.output, 30, 4000);
    if (r.started && r.signal == 0 && lines) {  // the compiler's verdict on these files
      const auto name = fs::path(fmt::format("{}-{}.compile_error", stem.string(),
                                             content_key(*lines + out.message).substr(0, 16)));
      write_atomically(name, out.message);
      keep(name, "compile_error", out.message);
    }
  } else if (auto sealed = sealed_file::copy_of(tmp); !sealed) {
    out.status = status::compile_error;
    out.message = fmt::format("the compiler's output {} cannot be read", tmp.string());
  } else {
    // What is run is the sealed copy, and what the manifest records is the
    // copy's own bytes; on disk, a build named by what it was built from
    // (two processes that built the same files write the same name, a
    // manifest names only its own build) or, when it is not kept (`lines`
    // unknown), none.
    out.sealed = std::move(sealed);
    out.library = out.sealed->path();
    if (lines) {
      out.library =
          fmt::format("{}-{}{}", stem.string(), content_key(*lines).substr(0, 16), suffix);
      fs::rename(tmp, out.library);
      keep(out.library, "built", out.sealed->bytes());
    }
  }
  fs::remove(tmp, ec);
  return out;
}

}  // namespace tessel::detail
