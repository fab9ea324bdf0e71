// toolchain.hpp: the system C++ compiler as the cpu backend uses it: a
// translation unit's text in, a shared library out, cached in a folder by
// the text, what it includes, the compiler's identity, the flags and the
// host's CPU model, and reused only while every file the compile read is
// unchanged and the build itself holds the bytes its manifest recorded (a
// manifest beside each build). What is run is a sealed copy of the build,
// and what is checked is that copy's own bytes. Also builds the loader (loader.cpp) once per cache,
// by the same rule. Private to the cpu backend.
#pragma once

#include "cpu/cache_files.hpp"

#include <tessel/measurement.hpp>

#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessel::detail {

struct toolchain_options {
  std::string compiler;                ///< "": $CXX, else c++, g++, clang++ in PATH
  std::vector<std::string> flags;      ///< before the source
  std::vector<std::string> libraries;  ///< after the source
  std::filesystem::path cache_dir;
  /// Bytes cache_dir/build is kept under (trim_builds, when a compile's
  /// running estimate says it may be over; toolchain::build); 0: no limit.
  std::uintmax_t cache_limit_bytes = 0;
  double timeout_s = 120;
  double kill_grace_s = 1;
  /// Also hash the system headers a compile read (-MD, not -MMD) into its
  /// manifest: a build is then reused only while they are unchanged too.
  bool hash_system_headers = false;
};

/// One build's outcome.
struct build_result {
  tessel::status status = tessel::status::ok;  ///< ok, compile_error or timeout
  std::string message;                         ///< the compiler's first lines when it failed
  /// The build in the cache, when ok (the sealed copy's path when the
  /// cache does not keep it): what a file_guard watches, never what runs.
  std::filesystem::path library;
  /// What to run, when ok: a sealed copy of the build, whose own bytes the
  /// lookup checked against its manifest or the manifest records. Shared:
  /// it lives while a run that holds it does.
  std::shared_ptr<const sealed_file> sealed;
  double seconds = 0;  ///< the compiler's wall time (0 when cached)
  bool cached = false;
  /// What the cache found wrong and mended on the way ("" when nothing): a
  /// build that did not hold its manifest's bytes, tessel's own file changed.
  std::string note;
};

class toolchain {
 public:
  /// Finds the compiler, writes the embedded headers under
  /// cache/embedded-HASH/include (HASH: of every embedded file, so two
  /// versions of tessel sharing the cache keep theirs apart) and builds the
  /// loader (cached). Throws tessel::error with what is missing or what the
  /// compiler said.
  explicit toolchain(toolchain_options o);

  /// Builds `source` into a shared library; `depends` are the texts of the
  /// files it includes that are not embedded (a user's kernel), hashed into
  /// the key. A cached build (or compile error) is reused only when every
  /// file its compile read (the dependency list the compiler wrote: user
  /// and tessel headers; system headers too with hash_system_headers) has
  /// the content it had then; else it is built again and replaces it.
  /// A cached build is used only when its bytes are the ones its manifest
  /// recorded (else it is built again, and build_result::note says so); a
  /// manifest that replaces another removes the build the old one named.
  /// Before a compile, tessel's own files (write_file) are put back when
  /// changed; a compile during which one changed is run again (once).
  /// Thread-safe, and safe beside other processes on the same cache.
  /// `cpus`: where the compiler may run (empty: anywhere).
  [[nodiscard]] build_result build(const std::string& source,
                                   const std::vector<std::string>& depends,
                                   const std::vector<int>& cpus) const;

  /// Writes `text` to cache/embedded-HASH/NAME when its content differs
  /// (atomically) and keeps it among tessel's own files, which every build
  /// checks; returns the path. For built-in kernel sources the wrapper includes.
  [[nodiscard]] std::filesystem::path write_file(const std::string& name,
                                                 std::string_view text) const;

  /// The loader to exec: its sealed copy.
  [[nodiscard]] const std::shared_ptr<const sealed_file>& loader() const noexcept {
    return loader_.sealed;
  }
  /// The loader's build in the cache (what the sealed copy was checked against).
  [[nodiscard]] const std::filesystem::path& loader_file() const noexcept {
    return loader_.library;
  }
  /// What the loader's lookup found wrong and mended ("" when nothing).
  [[nodiscard]] const std::string& loader_note() const noexcept { return loader_.note; }
  [[nodiscard]] const std::filesystem::path& cache_dir() const noexcept { return o_.cache_dir; }
  /// Where the embedded files are written: cache/embedded-HASH.
  [[nodiscard]] const std::filesystem::path& embedded_dir() const noexcept { return embedded_; }
  /// The compiler's path and the first line of its --version.
  [[nodiscard]] const std::string& identity() const noexcept { return identity_; }
  /// How many times a compile scanned cache/build to keep it under the
  /// limit (the rest went by the running estimate). For tests.
  [[nodiscard]] std::uint64_t scans() const;

  /// Of the limit, what this process lets its own compiles add since its
  /// last scan before it scans again, though its estimate is under the
  /// limit: what other processes added is seen then (1/16).
  static constexpr std::uintmax_t rescan_fraction = 16;

 private:
  [[nodiscard]] std::vector<std::string> command(const std::filesystem::path& source) const;
  /// The cached outcome under `stem` (stem.manifest), or a compile of
  /// `source` (written with `text` first) with `arguments` (then -o and the
  /// dependency file) into stem-HASH`suffix`.
  [[nodiscard]] build_result compile_cached(const std::filesystem::path& stem,
                                            const std::string& suffix,
                                            const std::filesystem::path& source,
                                            std::string_view text,
                                            std::vector<std::string> arguments, double timeout_s,
                                            const std::vector<int>& cpus) const;
  /// After a compile that added `added` bytes to cache/build: trims it
  /// (trim_builds) when this process's estimate of its size is over the
  /// limit, when its own compiles added a rescan_fraction-th of the limit
  /// since the last scan, or at its first compile; else adds to the estimate.
  void account(std::uintmax_t added) const;
  /// Puts back tessel's own files that do not hold their text; says which.
  [[nodiscard]] std::string restore_own_files() const;
  /// Whether tessel's own files all hold their text and none was written
  /// after `since` (a compile's start).
  [[nodiscard]] bool own_files_intact(const std::timespec& since) const;

  toolchain_options o_;
  std::string compiler_path_, identity_, key_base_;
  std::filesystem::path embedded_;
  build_result loader_;
  mutable std::mutex own_mutex_;
  mutable std::map<std::filesystem::path, std::string> own_;  ///< path -> its text
  /// What this process knows of cache/build's size (account()).
  struct tally {
    std::mutex mutex;
    bool scanned = false;
    std::uintmax_t estimate = 0;    ///< at the last scan, plus what was added since
    std::uintmax_t since_scan = 0;  ///< added by this process since its last scan
    std::uint64_t scans = 0;
  };
  mutable tally tally_;
};

/// The host's CPU model ("AMD EPYC ..."), from /proc/cpuinfo; "" when unknown.
[[nodiscard]] std::string host_cpu_model();

/// A stable name for `text`: the 64 hex digits of its SHA-256 (OpenSSL's
/// libcrypto, which uses the CPU's SHA instructions where it has them).
[[nodiscard]] std::string content_key(std::string_view text);

}  // namespace tessel::detail
