// The RAII layer over SQLite's C API (sqlite.hpp).
#include "storage/sqlite.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>

namespace tessel::detail::sqlite {

namespace {

/// `path` as a SQLite URI filename (https://sqlite.org/uri.html) with `query`.
std::string uri_of(const std::filesystem::path& path, const char* query) {
  std::string uri = "file:";
  for (const char c : path.string()) {
    if (c == '%' || c == '?' || c == '#')
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else
      uri += c;
  }
  return uri + "?" + query;
}

}  // namespace

connection::connection(std::filesystem::path path, open_mode mode) : path_(std::move(path)) {
  // FULLMUTEX: SQLite serializes use of the connection itself; sqlite_store adds
  // its own mutex so that a statement and its error message stay together.
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  std::string name = path_.string();
  if (mode == open_mode::query_only) flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX;
  if (mode == open_mode::read_only || mode == open_mode::immutable) {
    flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX;
    name = uri_of(path_, mode == open_mode::immutable ? "mode=ro&immutable=1" : "mode=ro");
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // db_ may be null (out of memory) or hold the message; close it either way.
    const std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw error("study file '" + path_.string() + "': cannot open it (" + message +
                "); does its folder exist, and may this process write there?");
  }
  sqlite3_extended_result_codes(db_, 0);
  if (mode == open_mode::query_only) exec("PRAGMA query_only = 1", "opening it to read");
}

connection::~connection() { sqlite3_close_v2(db_); }

void connection::fail(std::string_view doing) const {
  const int code = sqlite3_errcode(db_) & 0xff;
  const std::string message = sqlite3_errmsg(db_);
  const std::string where = "study file '" + path_.string() + "'";
  if (code == SQLITE_NOTADB)
    throw error(where + " is not a SQLite database (SQLite: " + message +
                "); pass the path of a tessel study file, or a new one");
  if (code == SQLITE_READONLY)
    throw error(where + ": " + std::string(doing) + ": " + message +
                "; it was opened to read (show, export, report), or this process may not "
                "write it");
  if (code == SQLITE_CANTOPEN)
    throw error(where + ": " + std::string(doing) + ": " + message +
                "; does its folder exist, and may this process write there?");
  throw error(where + ": " + std::string(doing) + ": " + message);
}

void connection::check(int rc, std::string_view doing) const {
  if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) fail(doing);
}

void connection::exec(const char* sql, std::string_view doing) const {
  check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), doing);
}

statement_ptr connection::prepare(std::string_view sql) const {
  sqlite3_stmt* s = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  statement_ptr owned(s);
  check(rc, "preparing a statement");
  return owned;
}

statement::~statement() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void statement::bind(int i, std::int64_t v) {
  connection_.check(sqlite3_bind_int64(stmt_, i, v), doing_);
}

void statement::bind(int i, double v) {
  if (std::isnan(v)) return bind(i, nullptr);
  connection_.check(sqlite3_bind_double(stmt_, i, v), doing_);
}

void statement::bind(int i, std::optional<double> v) {
  if (!v) return bind(i, nullptr);
  bind(i, *v);
}

void statement::bind(int i, std::string_view v) {
  connection_.check(
      sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8), doing_);
}

void statement::bind(int i, std::nullptr_t) {
  connection_.check(sqlite3_bind_null(stmt_, i), doing_);
}

bool statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  connection_.fail(doing_);
}

bool statement::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

std::int64_t statement::integer(int col) const { return sqlite3_column_int64(stmt_, col); }

double statement::real(int col) const {
  if (is_null(col)) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(stmt_, col);
}

std::string statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return {reinterpret_cast<const char*>(p),
          static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
}

transaction::transaction(const connection& c) : connection_(c) {
  // IMMEDIATE takes the write lock now, so a busy file waits (busy_timeout)
  // here rather than failing at the first write.
  connection_.exec("BEGIN IMMEDIATE", "starting a transaction");
}

transaction::~transaction() {
  if (open_) sqlite3_exec(connection_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void transaction::commit() {
  connection_.exec("COMMIT", "committing");
  open_ = false;
}

}  // namespace tessel::detail::sqlite
