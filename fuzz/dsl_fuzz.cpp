// fuzz_dsl: the .tsl language. The input is a .tsl text, optionally followed
// by a NUL byte and `NAME=VALUE` lines used as --set overrides. Every space
// the text declares is checked and built. tessel::error (diagnostics, an
// empty space, a limit reached) is the expected answer to bad text; any other
// exception, a crash, a sanitizer report, a hang or an OOM is a finding.
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

tessel::parse_options options_from(std::string_view overrides) {
  tessel::parse_options options;
  options.file = "fuzz.tsl";
  while (!overrides.empty()) {
    const auto end = overrides.find('\n');
    const auto line = overrides.substr(0, end);
    overrides = end == std::string_view::npos ? std::string_view{} : overrides.substr(end + 1);
    if (const auto eq = line.find('='); eq != std::string_view::npos && eq > 0)
      options.overrides[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  const auto text = input.substr(0, nul);
  const auto options =
      options_from(nul == std::string_view::npos ? std::string_view{} : input.substr(nul + 1));
  try {
    for (auto& definition : tessel::parse_definitions(text, options)) {
      try {
        const tessel::space built(std::move(definition));
        (void)built.count();
      } catch (const tessel::error&) {  // an empty space, a limit: the next one still builds
      }
    }
  } catch (const tessel::space_error& e) {
    for (const auto& d : e.diagnostics()) (void)d.render();
  } catch (const tessel::error&) {
  }
  return 0;
}
