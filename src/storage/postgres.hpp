// A thin RAII layer over libpq for the PostgreSQL study store: a connection
// that knows what it is connected to (every failure becomes a tessel::error
// naming the study's location and the server's message), text-format
// parameters with the binding interface of sqlite::statement, and rows with
// its reading interface, so trial_row serves both stores. Private to
// src/storage/; a connection is not thread-safe (postgres_store holds a mutex).
#pragma once

#include <tessel/error.hpp>

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail::pg {

/// What open_store() reads from a postgresql:// location.
struct location {
  std::string conninfo;  ///< what libpq is given: the URI without `study=`
  std::string schema;    ///< the PostgreSQL schema holding the study
  std::string shown;     ///< for messages: the URI without its password
};
/// Splits `study=NAME` off a postgresql:// or postgres:// URI (default
/// schema `tessel`) and checks the rest with libpq. Throws tessel::error
/// naming the problem (a malformed URI, a study name that is not
/// lower-case letters, digits and `_`).
[[nodiscard]] location parse_location(std::string_view uri);

/// The server went away (a restart, a network failure): the statement may or
/// may not have been applied. postgres_store reconnects and decides.
class connection_lost : public error {
 public:
  using error::error;
};

/// Parameters $1..$n of one statement, sent as text; NULL where unbound.
class params {
 public:
  void bind(int i, std::int64_t v);
  /// NaN is stored as NULL (as in the SQLite store); infinities are kept.
  void bind(int i, double v);
  void bind(int i, std::optional<double> v);
  /// PostgreSQL text is UTF-8 without NUL: invalid bytes and NULs become
  /// U+FFFD (docs/distributed.md).
  void bind(int i, std::string_view v);
  void bind(int i, std::nullptr_t);

  [[nodiscard]] int size() const noexcept { return static_cast<int>(values_.size()); }
  /// libpq's view: one pointer per parameter, null for NULL. Valid until
  /// the next bind.
  [[nodiscard]] std::vector<const char*> pointers() const;

 private:
  std::optional<std::string>& slot(int i);
  std::vector<std::optional<std::string>> values_;
};

struct result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

/// Row `index` of a result, read like sqlite::statement's current row.
class row {
 public:
  row(const PGresult* r, int index) : result_(r), index_(index) {}
  [[nodiscard]] bool is_null(int col) const;
  [[nodiscard]] std::int64_t integer(int col) const;
  /// NULL reads as NaN.
  [[nodiscard]] double real(int col) const;
  /// NULL reads as "".
  [[nodiscard]] std::string text(int col) const;

 private:
  const PGresult* result_;
  int index_;
};

class result {
 public:
  explicit result(result_ptr r) : r_(std::move(r)) {}
  [[nodiscard]] int rows() const { return PQntuples(r_.get()); }
  [[nodiscard]] pg::row at(int index) const { return {r_.get(), index}; }
  /// Rows an INSERT, UPDATE or DELETE touched.
  [[nodiscard]] std::size_t affected() const;

 private:
  result_ptr r_;
};

class connection {
 public:
  /// Connects and sets the search path to `where.schema` (which need not
  /// exist yet). Throws tessel::error naming where.shown on failure.
  explicit connection(location where);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  [[nodiscard]] const location& where() const noexcept { return where_; }

  /// Runs one statement (or, without parameters, several). Throws
  /// connection_lost when the connection broke, tessel::error otherwise:
  /// "study 'SHOWN': DOING: <the server's message>".
  result exec(std::string_view sql, const params& p, std::string_view doing) const;
  result exec(std::string_view sql, std::string_view doing) const {
    return exec(sql, params{}, doing);
  }
  /// Connects again after connection_lost, trying for up to `patience`
  /// (the server may be restarting). Throws tessel::error when it cannot.
  void reconnect(std::chrono::seconds patience);

  /// "study 'SHOWN'", the start of every message about this study.
  [[nodiscard]] std::string subject() const;

 private:
  void open();
  location where_;
  PGconn* conn_ = nullptr;
};

/// BEGIN ... COMMIT; rolls back when destroyed uncommitted (unless the
/// connection broke, which rolls back by itself).
class transaction {
 public:
  explicit transaction(const connection& c);
  ~transaction();
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit();

 private:
  const connection& connection_;
  bool open_ = true;
};

/// A quoted SQL identifier for a schema name parse_location() accepted.
[[nodiscard]] std::string quoted_identifier(std::string_view name);

}  // namespace tessel::detail::pg
