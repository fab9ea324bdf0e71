// open_store(): a store from a string (storage.hpp).
#include "storage/postgres.hpp"
#include "storage/postgres_store.hpp"

#include <tessel/storage.hpp>

namespace tessel {

bool is_postgres_location(std::string_view location) noexcept {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

std::shared_ptr<study_store> open_store(std::string_view location) {
  if (is_postgres_location(location))
    return std::make_shared<detail::storage::postgres_store>(detail::pg::parse_location(location));
  constexpr std::string_view sqlite_scheme = "sqlite:";
  if (location.rfind(sqlite_scheme, 0) == 0) location.remove_prefix(sqlite_scheme.size());
  return std::make_shared<sqlite_store>(std::filesystem::path(location));
}

}  // namespace tessel
