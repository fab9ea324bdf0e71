// A thin RAII layer over the SQLite C API for the study file: a connection
// that knows its path (every failure becomes a tessel::error naming the file
// and SQLite's message), and prepared statements that reset themselves.
// Private to src/storage/; not thread-safe (sqlite_store holds a mutex).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::detail::sqlite {

struct statement_deleter {
  void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};
using statement_ptr = std::unique_ptr<sqlite3_stmt, statement_deleter>;

/// How a connection opens its file.
enum class open_mode : unsigned char {
  read_write,  ///< created if needed
  query_only,  ///< an existing file this process may write, opened read-write
               ///< with PRAGMA query_only (SQLite refuses every write): as the
               ///< last connection it merges and removes the journal, as before
  read_only,   ///< SQLite's mode=ro: reads, follows a live writer's journal
  immutable,   ///< mode=ro&immutable=1: a file with no journal beside it, which
               ///< this process may not write (no -wal or -shm is made)
};

class connection {
 public:
  /// Opens the file (read_write: creating it if needed); throws tessel::error
  /// on failure.
  explicit connection(std::filesystem::path path, open_mode mode = open_mode::read_write);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  [[nodiscard]] sqlite3* get() const noexcept { return db_; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

  /// Throws tessel::error: "study file 'PATH': DOING: <SQLite's message>",
  /// with a plainer sentence for a file that is not a database.
  [[noreturn]] void fail(std::string_view doing) const;
  /// Checks an SQLite result code; anything but OK, ROW or DONE fails.
  void check(int rc, std::string_view doing) const;
  /// Runs one or more statements that return no rows.
  void exec(const char* sql, std::string_view doing) const;
  [[nodiscard]] statement_ptr prepare(std::string_view sql) const;

 private:
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

/// One use of a prepared statement: binds, steps, reads columns; resets and
/// clears its bindings when it goes out of scope. Bind indices are 1-based,
/// column indices 0-based (as in SQLite).
class statement {
 public:
  statement(const connection& c, sqlite3_stmt* s, std::string_view doing)
      : connection_(c), stmt_(s), doing_(doing) {}
  ~statement();
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  void bind(int i, std::int64_t v);
  /// NaN is stored as NULL (SQLite's rule); infinities are kept.
  void bind(int i, double v);
  void bind(int i, std::optional<double> v);
  void bind(int i, std::string_view v);
  void bind(int i, std::nullptr_t);

  /// Steps once: true when a row is ready, false when done. Throws on error.
  bool step();

  [[nodiscard]] bool is_null(int col) const;
  [[nodiscard]] std::int64_t integer(int col) const;
  /// NULL reads as NaN.
  [[nodiscard]] double real(int col) const;
  /// NULL reads as "".
  [[nodiscard]] std::string text(int col) const;

 private:
  const connection& connection_;
  sqlite3_stmt* stmt_;
  std::string_view doing_;
};

/// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted.
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

}  // namespace tessel::detail::sqlite
