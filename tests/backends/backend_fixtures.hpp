// Shared by the backend tests: a small space built in C++ (no DSL needed),
// configs of it by value, paths to the helper program and the shared replay
// files, a check that a process is gone, and (temp_folder.hpp) private folders.
#pragma once

#include <tessel/space.hpp>

#include "temp_folder.hpp"

#include <sys/types.h>
#include <filesystem>
#include <string>

namespace tessel::testing {

/// space small { tile_m : {32, 64, 128}; order : perm(m, n, k); fast : bool;
///               kind : {alpha, beta}; when fast { depth : {2, 3} } }
space small_space();

/// The config of small_space() with these values (order as "k,m,n").
config small_config(const space& s, std::int64_t tile_m, const std::string& order, bool fast,
                    const std::string& kind, std::int64_t depth = 2);

/// tests/backends/programs/helper.sh
std::string helper_program();

/// data/bench/NAME
std::filesystem::path bench_file(const std::string& name);

/// Shell code (sh) that writes the pid of the last background job ($!) to
/// `file` as this machine's /proc names it: in a run's PID namespace $! is
/// the namespace's pid (helper.sh's last_job_pid, for a command of its own;
/// Linux).
std::string last_job_pid(const std::filesystem::path& file);

/// The pid written (as text) to `file`, or -1.
pid_t read_pid(const std::filesystem::path& file);

/// Whether `pid` is gone (no such process, or a zombie waiting to be reaped),
/// waiting up to `seconds` for it to go.
bool process_gone(pid_t pid, double seconds = 3.0);

}  // namespace tessel::testing
