// postgres_store: a study in a PostgreSQL database, shared by every process
// that opens it (storage.hpp: study_store and shared_store). Private to
// src/storage/; open_store() makes one from a postgresql:// location.
#pragma once

#include "storage/postgres.hpp"

#include <tessel/storage.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <set>

namespace tessel::detail::storage {

class heartbeat;

class postgres_store final : public study_store, public shared_store {
 public:
  /// Connects and brings the study's PostgreSQL schema up to date. Throws
  /// tessel::error naming the location.
  explicit postgres_store(pg::location where);
  ~postgres_store() override;
  postgres_store(const postgres_store&) = delete;
  postgres_store& operator=(const postgres_store&) = delete;

  /// How long an operation keeps reconnecting to a server that went away
  /// (a restart) before it fails.
  static constexpr std::chrono::seconds reconnect_patience{60};

  // study_store
  [[nodiscard]] std::string location() const override;
  [[nodiscard]] std::optional<study_record> study() const override;
  void claim_writer() override {}  // workers claim trials instead
  void begin(const study_record& record) override;
  void save(const trial& t, const space& s) override;
  void save_all(const std::vector<trial>& trials, const space& s) override;
  [[nodiscard]] std::size_t trial_count() const override;
  void clear() override;
  [[nodiscard]] std::vector<trial> load(const space& s) const override;
  void check_integrity() const override;
  [[nodiscard]] shared_store* shared() noexcept override { return this; }

  // shared_store
  std::uint64_t join(const worker_info& w) override;
  void leave() override;
  [[nodiscard]] std::vector<trial> changes(
      const space& s, std::uint64_t known,
      const std::vector<std::uint64_t>& pending) const override;
  [[nodiscard]] bool try_lock_proposer() override;
  void unlock_proposer() override;
  void propose(const std::vector<trial>& trials, const space& s) override;
  [[nodiscard]] std::optional<trial> claim(const space& s) override;
  bool finish(const trial& t, const space& s) override;
  [[nodiscard]] shared_counts counts() const override;

 private:
  /// Runs `f()` (statements on db_), again after reconnecting when the
  /// connection was lost. Call with mutex_ held.
  template <class F>
  auto retrying(F&& f) const;
  /// Runs `f()`, prefixing the study's name to a tessel::error it throws
  /// (a trial that cannot be stored or read back).
  template <class F>
  auto naming_study(F&& f) const;
  /// After a reconnect: the proposer lock is gone, and a claim whose answer
  /// was lost is given back to the queue.
  void recover() const;

  mutable std::mutex mutex_;
  mutable pg::connection db_;
  std::optional<std::uint64_t> worker_;   ///< from join()
  mutable std::set<std::uint64_t> held_;  ///< claimed by this process, not yet finished
  mutable bool proposer_ = false;         ///< holds the proposer lock
  mutable bool gone_ = false;  ///< a reconnect gave up: leave() does not wait for the server again
  std::unique_ptr<heartbeat> heartbeat_;
};

}  // namespace tessel::detail::storage
