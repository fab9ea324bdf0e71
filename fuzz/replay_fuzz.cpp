// fuzz_replay: the replay reader (Kernel Tuner cache files and T4 results
// files, plain or gzip). A table that loads must also give its space: as a
// definition built directly and as a .tsl text the language accepts.
// tessel::error is the expected answer to a bad file; any other exception, a
// crash, a sanitizer report, a hang or an OOM is a finding.
#include "scratch_file.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/random.hpp>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tessel::fuzz::scratch_file file(".json");
  try {
    const auto table = tessel::replay_table::load(file.write(data, size));
    (void)table->cartesian_size();
    if (table->valid_count() > 0) (void)table->median();
    const tessel::space direct(table->space_definition());
    const auto text = table->space_source();
    const auto parsed = tessel::parse_space(text);
    tessel::replay_backend backend(table);
    tessel::rng random(0);
    if (parsed.count() > 0) (void)backend.evaluate(parsed, parsed.sample(random));
  } catch (const tessel::error&) {
  }
  return 0;
}
