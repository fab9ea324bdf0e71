// libpq, wrapped for the PostgreSQL study store (postgres.hpp).
#include "storage/postgres.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace tessel::detail::pg {
namespace {

constexpr std::string_view default_schema = "tessel";

bool valid_schema(std::string_view name) {
  if (name.empty() || name.size() > 63 || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

/// The URI without its password (in the authority, or as a parameter).
std::string without_password(std::string uri) {
  const auto scheme_end = uri.find("://");
  if (scheme_end != std::string::npos) {
    const auto start = scheme_end + 3;
    const auto end = std::min(uri.find_first_of("/?", start), uri.size());
    const auto at = uri.rfind('@', end);
    if (at != std::string::npos && at >= start) {
      const auto colon = uri.find(':', start);
      if (colon < at) uri.erase(colon, at - colon);
    }
  }
  if (const auto p = uri.find("password="); p != std::string::npos) {
    const auto end = uri.find('&', p);
    uri.replace(p, end == std::string::npos ? std::string::npos : end - p, "password=***");
  }
  return uri;
}

std::string server_message(const PGconn* c, const PGresult* r) {
  std::string m = r ? PQresultErrorMessage(r) : PQerrorMessage(c);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m.empty() ? "no message from the server" : m;
}

/// SQLSTATE classes that mean the connection is gone or going: 08
/// (connection exception; not 08P01, a protocol violation, which is a bug
/// to report) and 57P01..57P03 (shutdown, crash, starting up).
bool lost(const PGconn* c, const PGresult* r) {
  if (PQstatus(c) == CONNECTION_BAD) return true;
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  if (!state) return r == nullptr;
  const std::string_view s(state);
  return (s.substr(0, 2) == "08" && s != "08P01") || s == "57P01" || s == "57P02" || s == "57P03";
}

void ignore_notice(void*, const char*) {}

/// Text PostgreSQL accepts: valid UTF-8 without NUL bytes.
std::string as_server_text(std::string_view v) {
  std::string text(v);
  for (auto p = text.find('\0'); p != std::string::npos; p = text.find('\0', p))
    text.replace(p, 1, "\xEF\xBF\xBD");
  try {
    (void)nlohmann::json(text).dump();  // throws on invalid UTF-8
    return text;
  } catch (const nlohmann::json::type_error&) {
    const auto replaced =
        nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return nlohmann::json::parse(replaced).get<std::string>();
  }
}

}  // namespace

location parse_location(std::string_view uri) {
  location out;
  out.schema = default_schema;
  std::string rest(uri);
  if (const auto q = rest.find('?'); q != std::string::npos) {
    std::string kept;
    std::size_t start = q + 1;
    while (start <= rest.size()) {
      auto end = rest.find('&', start);
      if (end == std::string::npos) end = rest.size();
      const auto param = rest.substr(start, end - start);
      if (param.rfind("study=", 0) == 0) {
        out.schema = param.substr(6);
      } else if (!param.empty()) {
        kept += (kept.empty() ? "" : "&") + param;
      }
      start = end + 1;
    }
    rest = rest.substr(0, q) + (kept.empty() ? "" : "?" + kept);
  }
  out.conninfo = rest;
  out.shown = without_password(std::string(uri));
  if (!valid_schema(out.schema))
    throw error(fmt::format(
        "study '{}': study name '{}' must be 1 to 63 lower-case letters, digits and _, not "
        "starting with a digit (it names the PostgreSQL schema that holds the study)",
        out.shown, out.schema));
  char* message = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(out.conninfo.c_str(), &message);
  if (!parsed) {
    std::string why = message ? message : "out of memory";
    PQfreemem(message);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    throw error(
        fmt::format("'{}' is not a PostgreSQL connection URI: {}; expected "
                    "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?study=NAME]",
                    out.shown, why));
  }
  PQconninfoFree(parsed);
  return out;
}

// --- params ----------------------------------------------------------------------

std::optional<std::string>& params::slot(int i) {
  if (static_cast<std::size_t>(i) > values_.size()) values_.resize(static_cast<std::size_t>(i));
  return values_[static_cast<std::size_t>(i) - 1];
}

void params::bind(int i, std::int64_t v) { slot(i) = std::to_string(v); }

void params::bind(int i, double v) {
  if (std::isnan(v)) {
    slot(i).reset();
  } else if (std::isinf(v)) {
    slot(i) = v > 0 ? "Infinity" : "-Infinity";
  } else {
    slot(i) = fmt::format("{}", v);  // the shortest text that reads back exactly
  }
}

void params::bind(int i, std::optional<double> v) {
  if (v) {
    bind(i, *v);
  } else {
    slot(i).reset();
  }
}

void params::bind(int i, std::string_view v) { slot(i) = as_server_text(v); }

void params::bind(int i, std::nullptr_t) { slot(i).reset(); }

std::vector<const char*> params::pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
  return out;
}

// --- rows --------------------------------------------------------------------------

bool row::is_null(int col) const { return PQgetisnull(result_, index_, col) != 0; }

std::int64_t row::integer(int col) const {
  return is_null(col) ? 0 : std::strtoll(PQgetvalue(result_, index_, col), nullptr, 10);
}

double row::real(int col) const {
  // strtod reads PostgreSQL's "Infinity", "-Infinity" and "NaN" too.
  return is_null(col) ? std::nan("") : std::strtod(PQgetvalue(result_, index_, col), nullptr);
}

std::string row::text(int col) const {
  return is_null(col) ? std::string()
                      : std::string(PQgetvalue(result_, index_, col),
                                    static_cast<std::size_t>(PQgetlength(result_, index_, col)));
}

std::size_t result::affected() const {
  const char* n = PQcmdTuples(r_.get());
  return n && *n ? static_cast<std::size_t>(std::strtoull(n, nullptr, 10)) : 0;
}

// --- connection -------------------------------------------------------------------

connection::connection(location where) : where_(std::move(where)) {
  try {
    open();
  } catch (...) {  // a constructor that throws runs no destructor: free the failed PGconn here
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
    throw;
  }
}

connection::~connection() {
  if (conn_) PQfinish(conn_);
}

std::string connection::subject() const { return fmt::format("study '{}'", where_.shown); }

void connection::open() {
  // Defaults the URI may override: give up on an unreachable server after
  // 10 s, and notice a dead peer through TCP keepalives within ~25 s.
  const std::array<const char*, 8> keys{
      "connect_timeout",  "application_name", "keepalives_idle", "keepalives_interval",
      "keepalives_count", "dbname",           nullptr,           nullptr};
  const std::array<const char*, 8> values{
      "10", "tessel", "10", "5", "3", where_.conninfo.c_str(), nullptr, nullptr};
  if (conn_) PQfinish(conn_);
  conn_ = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (!conn_) throw error(subject() + ": cannot connect: out of memory");
  if (PQstatus(conn_) != CONNECTION_OK)
    throw connection_lost(
        fmt::format("{}: cannot connect: {}", subject(), server_message(conn_, nullptr)));
  PQsetNoticeProcessor(conn_, ignore_notice, nullptr);  // "already exists, skipping", ...
  exec("SET search_path TO " + quoted_identifier(where_.schema), "setting the search path");
}

result connection::exec(std::string_view sql, const params& p, std::string_view doing) const {
  const std::string text(sql);
  PGresult* r = nullptr;
  if (p.size() == 0) {
    r = PQexec(conn_, text.c_str());
  } else {
    const auto values = p.pointers();
    r = PQexecParams(conn_, text.c_str(), p.size(), nullptr, values.data(), nullptr, nullptr, 0);
  }
  result_ptr owned(r);
  const auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result(std::move(owned));
  const auto message = fmt::format("{}: {}: {}", subject(), doing, server_message(conn_, r));
  if (lost(conn_, r)) throw connection_lost(message);
  throw error(message);
}

void connection::reconnect(std::chrono::seconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  auto pause = std::chrono::milliseconds(50);
  std::string why;
  while (true) {
    try {
      open();
      return;
    } catch (const connection_lost& e) {
      why = e.what();
    }
    if (std::chrono::steady_clock::now() + pause > deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
  throw error(fmt::format("{} (lost the connection and could not reconnect for {} s)", why,
                          patience.count()));
}

// --- transaction ------------------------------------------------------------------

transaction::transaction(const connection& c) : connection_(c) {
  connection_.exec("BEGIN", "starting a transaction");
}

transaction::~transaction() {
  if (!open_) return;
  try {
    connection_.exec("ROLLBACK", "rolling back");
  } catch (const error&) {  // a broken connection has rolled back already
  }
}

void transaction::commit() {
  connection_.exec("COMMIT", "committing");
  open_ = false;
}

std::string quoted_identifier(std::string_view name) { return fmt::format("\"{}\"", name); }

}  // namespace tessel::detail::pg
