// Joining a shared study as one more worker (tessel/driver.hpp, join_study;
// docs/distributed.md).
#include <tessel/driver.hpp>

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <unistd.h>
#include <chrono>
#include <functional>
#include <thread>

namespace tessel {
namespace {

/// A seed of this worker's own: workers that proposed the same random
/// candidates would only find them taken.
std::uint64_t worker_seed(std::uint64_t study_seed, const std::string& name) {
  return study_seed ^ (std::hash<std::string>{}(name)*0x9E3779B97F4A7C15ULL);
}

/// "host:pid": what a worker is called when not named.
std::string default_worker_name() {
  char host[256] = {};
  return fmt::format("{}:{}",
                     ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : "localhost",
                     ::getpid());
}

/// The worker's options, refused before connecting (the store and
/// study::options::validate refuse them too, but only once connected).
void check_worker(const worker_info& w) {
  if (!(w.heartbeat_s > 0))
    throw options_error("join_request::worker.heartbeat_s", w.heartbeat_s, "must be more than 0");
  if (!(w.lease_s > w.heartbeat_s))
    throw options_error("join_request::worker.lease_s", w.lease_s,
                        fmt::format("must be more than the heartbeat ({})", w.heartbeat_s));
}

}  // namespace

joined_study join_study(const join_request& r) {
  check_worker(r.worker);
  if (!is_postgres_location(r.url))
    throw error(fmt::format(
        "tessel worker joins a shared study: give a postgresql:// URL, not '{}' (a SQLite study "
        "file has one writer; continue it with `tessel tune FILE --db PATH --resume`)",
        r.url));
  const auto store = open_store(r.url);
  auto record = store->study();
  // Workers may be started before `tune` has made the study.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(r.wait_s);
  while (!record && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    record = store->study();
  }
  if (!record)
    throw error(fmt::format(
        "'{}' holds no study yet: create it with `tessel tune FILE --backend SPEC --db URL "
        "--budget N`, then start workers",
        r.url));
  auto stored = reopen_study(r.url);  // the spec tune recorded, the space rebuilt from its text
  auto spec = std::move(stored.spec);
  if (!r.backend.empty()) {
    spec.backend = r.backend;
    spec.fidelity.clear();
  }
  for (const auto& [key, value] : r.backend_settings) spec.backend_settings[key] = value;
  spec.db = r.url;
  spec.jobs = r.jobs;
  open_options opening;
  opening.mode = open_mode::resume;
  opening.space = std::move(stored.space);  // the hosts need no copy of the .tsl file
  opening.worker = r.worker;
  if (opening.worker.name.empty()) opening.worker.name = default_worker_name();
  joined_study out;
  out.name = opening.worker.name;
  out.space_name = stored.record.space_name;
  spec.seed = r.seed.value_or(worker_seed(stored.record.seed, out.name));
  out.opened = open_study(std::move(spec), std::move(opening));
  if (!out.opened.evaluates)
    throw error("the study records no backend: give this worker one with --backend SPEC");
  return out;
}

}  // namespace tessel
