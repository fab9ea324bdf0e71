// store.cpp: opening a study file from the spec's `db`, and reading a study
// back from one (tessel/driver.hpp).
#include <tessel/driver.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace tessel {

std::shared_ptr<study_store> open_store(const std::string& db, store_access access) {
  if (db.empty()) throw error("no study file given");
  if (access == store_access::read && !is_postgres_location(db) && !std::filesystem::exists(db))
    throw error(fmt::format("no study file '{}'", db));
  auto store = open_store(std::string_view(db));
  if (access == store_access::write) store->claim_writer();
  return store;
}

stored_study reopen_study(const std::string& db) {
  const auto store = open_store(db, store_access::read);
  auto record = store->study();
  if (!record) throw error(fmt::format("'{}' holds no study yet", store->location()));
  study_spec spec;
  const auto options = nlohmann::json::parse(record->options_json, nullptr, false);
  if (options.is_object() && options.contains("annotations"))
    spec = study_spec::from_json(options["annotations"]);
  parse_options parse;
  parse.file = db;
  parse.target = spec.target;
  for (const auto& [name, value] : spec.sets) parse.overrides[name] = value;
  auto s = parse_space(record->space_source, parse, record->space_name);
  auto trials = store->load(s);
  return {std::move(*record), std::move(spec), std::move(s), std::move(trials)};
}

}  // namespace tessel
