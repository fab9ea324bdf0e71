// fuzz_study_file: the study file reader (a SQLite file, docs/storage.md), as
// `tessel show`, `export` and `--resume` read it: the study record, the space
// rebuilt from its stored source, and every trial read back through it.
// tessel::error is the expected answer to a damaged file; any other
// exception, a crash, a sanitizer report, a hang or an OOM is a finding.
#include "scratch_file.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tessel::fuzz::scratch_file file(".tessel.db");
  try {
    const tessel::sqlite_store db(file.write(data, size));
    const auto record = db.study();
    if (!record) return 0;
    const auto s = tessel::parse_space(record->space_source, {}, record->space_name);
    const auto trials = db.load(s);
    std::ostringstream out;
    for (const auto format :
         {tessel::export_format::t4, tessel::export_format::csv, tessel::export_format::json})
      tessel::export_trials(out, format, *record, trials, s);
  } catch (const tessel::error&) {
  }
  file.remove();
  return 0;
}
