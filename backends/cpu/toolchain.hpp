// toolchain.hpp: the system C++ compiler as the cpu backend uses it: a
// translation unit's text in, a shared library out, cached in a folder by
// the text, what it includes, the compiler's identity, the flags and the
// host's CPU model, and reused only while every file the compile read is
// unchanged (a manifest beside each build). Also builds the loader
// (loader.cpp) once per cache, by the same rule. Private to the cpu backend.
#pragma once

#include <tessel/measurement.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace tessel::detail {

struct toolchain_options {
  std::string compiler;                ///< "": $CXX, else c++, g++, clang++ in PATH
  std::vector<std::string> flags;      ///< before the source
  std::vector<std::string> libraries;  ///< after the source
  std::filesystem::path cache_dir;
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
  std::filesystem::path library;               ///< the .so, when ok
  double seconds = 0;                          ///< the compiler's wall time (0 when cached)
  bool cached = false;
};

class toolchain {
 public:
  /// Finds the compiler, writes the embedded headers under cache/include
  /// and builds the loader (cached). Throws tessel::error with what is
  /// missing or what the compiler said.
  explicit toolchain(toolchain_options o);

  /// Builds `source` into a shared library; `depends` are the texts of the
  /// files it includes that are not embedded (a user's kernel), hashed into
  /// the key. A cached build (or compile error) is reused only when every
  /// file its compile read (the dependency list the compiler wrote: user
  /// and tessel headers; system headers too with hash_system_headers) has
  /// the content it had then; else it is built again and replaces it.
  /// Thread-safe, and safe beside other processes on the same cache.
  /// `cpus`: where the compiler may run (empty: anywhere).
  [[nodiscard]] build_result build(const std::string& source,
                                   const std::vector<std::string>& depends,
                                   const std::vector<int>& cpus) const;

  /// Writes `text` to cache/NAME when its content differs (atomically);
  /// returns the path. For built-in kernel sources the wrapper includes.
  [[nodiscard]] std::filesystem::path write_file(const std::string& name,
                                                 std::string_view text) const;

  [[nodiscard]] const std::filesystem::path& loader() const noexcept { return loader_; }
  [[nodiscard]] const std::filesystem::path& cache_dir() const noexcept { return o_.cache_dir; }
  /// The compiler's path and the first line of its --version.
  [[nodiscard]] const std::string& identity() const noexcept { return identity_; }

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
  toolchain_options o_;
  std::string compiler_path_, identity_, key_base_;
  std::filesystem::path loader_;
};

/// The host's CPU model ("AMD EPYC ..."), from /proc/cpuinfo; "" when unknown.
[[nodiscard]] std::string host_cpu_model();

/// A stable name for `text`: 32 hex digits of a SHA-1 name-based UUID
/// (RFC 4122, through Boost.UUID).
[[nodiscard]] std::string content_key(std::string_view text);

}  // namespace tessel::detail
