// open_store(): a store from a string (storage.hpp).
#include "storage/postgres.hpp"
#include "storage/postgres_store.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>

namespace tessel {

bool is_postgres_location(std::string_view location) noexcept {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

std::string_view study_kind(std::string_view location) noexcept {
  return is_postgres_location(location) ? "shared study" : "study file";
}

namespace {

std::shared_ptr<study_store> open_for(std::string_view location, store_access access) {
  if (is_postgres_location(location))
    return std::make_shared<detail::storage::postgres_store>(detail::pg::parse_location(location));
  constexpr std::string_view sqlite_scheme = "sqlite:";
  if (location.rfind(sqlite_scheme, 0) == 0) location.remove_prefix(sqlite_scheme.size());
  if (location.empty()) throw error("no study file given");
  return std::make_shared<sqlite_store>(std::filesystem::path(location), access);
}

}  // namespace

std::shared_ptr<study_store> open_store(std::string_view location) {
  return open_for(location, store_access::write);
}

std::shared_ptr<study_store> open_store(std::string_view location, store_access access) {
  auto store = open_for(location, access);
  if (access == store_access::write) store->claim_writer();
  return store;
}

}  // namespace tessel
