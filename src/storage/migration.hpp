// One step of a store's schema, shared by the SQLite study file (schema.cpp)
// and the PostgreSQL study (postgres_schema.cpp). Private to src/storage/.
#pragma once

#include <chrono>

namespace tessel::detail::storage {

/// Migration N takes a study from schema version N-1 to N; migration 1
/// creates the tables. Never edit a released migration: add one.
struct migration {
  int version;
  const char* summary;
  const char* sql;
};

/// Now, in Unix seconds (UTC): what `created_at` and `applied_at` hold.
inline double now_unix() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace tessel::detail::storage
