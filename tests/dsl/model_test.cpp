// The `model` block (docs/models.md): consts, kernels, their spaces and
// sets, and every error located at its line in the model.
#include "helpers.hpp"
#include "temp_folder.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

namespace tessel::testing {
namespace {

/// Two spaces the models below name: a matmul-like and a row-wise one.
constexpr std::string_view spaces = R"(
space mm {
  const M = 256   const N = 256   const K = 256
  const dtype = bf16
  param tile : {64, 128, 256}
  require M % tile == 0 and N % tile == 0
}
space rows {
  const rows = 128   const hidden = 64
  param bufs : 1 .. 3 = 2
}
)";

std::string model_errors(std::string_view text, parse_options o = options()) {
  try {
    (void)parse_model(text, o);
  } catch (const space_error& e) {
    return e.what();
  }
  return "";
}

std::string model_messages(std::string_view text, parse_options o = options()) {
  try {
    (void)parse_model(text, o);
  } catch (const space_error& e) {
    std::string all;
    for (const auto& d : e.diagnostics())
      all += (d.line ? std::to_string(d.line) + ": " : "") + d.message + "\n";
    return all;
  }
  return "";
}

/// `text` written to `name` under `dir`, its folders made: the file's path.
std::filesystem::path write(const tessel::testing::temp_folder& dir, const std::string& name,
                            std::string_view text) {
  const auto file = dir.file(name);
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
  return file;
}

}  // namespace

TEST_CASE("model: consts fold in order and kernels get their sets, dtype and calls") {
  const auto m = parse_model(std::string(R"(
model tiny {
  const layers = 4
  const batch = 2
  const tokens = batch * 64          # 128
  const precision = fp8
  kernel proj {
    space mm
    set M = tokens, N = 2 * tokens
    dtype bf16
    calls layers * batch
    group body
  }
  kernel norm { space rows; set hidden = 32; calls layers + 1 }
  kernel once { space mm; set dtype = precision }
}
)") + std::string(spaces));
  CHECK(m.name == "tiny");
  CHECK(m.target == "trn2");
  REQUIRE(m.constants.size() == 4);
  CHECK(m.constants[2] == std::pair<std::string, std::string>{"tokens", "128"});
  CHECK(m.constants[3] == std::pair<std::string, std::string>{"precision", "fp8"});
  REQUIRE(m.kernels.size() == 3);
  const auto& proj = m.kernels[0];
  CHECK(proj.name == "proj");
  CHECK(proj.calls == 8);
  CHECK(proj.calls_text == "layers * batch");
  CHECK(proj.space_name == "mm");
  CHECK(proj.dtype == "bf16");
  CHECK(proj.line == 7);
  CHECK(proj.group == "body");
  CHECK(m.kernels[1].group.empty());
  CHECK(proj.sets == std::vector<std::pair<std::string, std::string>>{
                         {"M", "128"}, {"N", "256"}, {"dtype", "bf16"}});
  // the sets reach the space: M = 128 leaves tiles 64 and 128
  CHECK(proj.space.count() == 2);
  CHECK(m.kernels[1].calls == 5);
  CHECK(m.kernels[1].calls_text == "layers + 1");
  CHECK(m.kernels[2].calls == 1);
  CHECK(m.kernels[2].dtype == "fp8");
}

TEST_CASE("model: --set overrides the model's consts, not the spaces'") {
  auto o = options();
  o.overrides = {{"layers", "6"}};
  const auto text =
      std::string("model t { const layers = 2 kernel k { space rows calls layers } }") +
      std::string(spaces);
  CHECK(parse_model(text, o).kernels.at(0).calls == 6);
  o.overrides = {{"layer", "6"}};
  CHECK(model_messages(text, o) == "--set layer=6: model 't' has no const 'layer'\n");
  o.overrides = {{"layers", "many"}};
  CHECK(model_messages(text, o) ==
        "1: --set layers=many: const 'layers' is an integer, but 'many' is a symbol\n");
}

TEST_CASE("model: kernels name space files relative to the model's file") {
  const tessel::testing::temp_folder dir;
  write(dir, "spaces/kernels.tsl", spaces);
  const auto path = write(dir, "models/m.tsl", R"(
model m {
  kernel a { space "../spaces/kernels.tsl" : rows   set rows = 256   calls 3 }
  kernel b { space "../spaces/kernels.tsl"   set K = 128 }     # the first space: mm
}
)");
  const auto m = load_model(path);
  REQUIRE(m.kernels.size() == 2);
  CHECK(m.file == path.string());
  CHECK(m.kernels[0].space_name == "rows");
  CHECK(m.kernels[0].calls == 3);
  CHECK(m.kernels[1].space_name == "mm");
  CHECK(std::filesystem::path(m.kernels[1].space_file) ==
        (dir.path() / "spaces/kernels.tsl").lexically_normal());
  CHECK(m.kernels[1].space.def().target.name == "trn2");
  // the file's spaces are built for the model's target
  auto o = parse_options{};
  o.target = "trn2_lnc2";
  CHECK(load_model(path, o).kernels[1].space.def().target.name == "trn2_lnc2");
}

TEST_CASE("model: errors are located at the model's line and column, with hints") {
  CHECK(
      model_errors("model m {\n  kernel k { space rows calls layer }\n}\n" + std::string(spaces)) ==
      "test.tsl:2:31: error: unknown name 'layer'\n"
      "  kernel k { space rows calls layer }\n"
      "                              ^");
  CHECK(model_errors("model m {\n  const layers = 2\n  kernel k { space rows calls layer }\n}\n" +
                     std::string(spaces)) ==
        "test.tsl:3:31: error: unknown name 'layer'\n"
        "  kernel k { space rows calls layer }\n"
        "                              ^\n"
        "  hint: did you mean 'layers'?");
  CHECK(model_errors("model m {\n  kernel k { space mm; set M = 128, Q = 2 }\n}\n" +
                     std::string(spaces)) ==
        "test.tsl:2:37: error: kernel 'k': space 'mm' has no const 'Q'\n"
        "  kernel k { space mm; set M = 128, Q = 2 }\n"
        "                                    ^");
  CHECK(model_errors("model m {\n  kernel k { space mm; cals 2 }\n}\n" + std::string(spaces)) ==
        "test.tsl:2:24: error: expected a kernel field (space, set, dtype, calls, group) or '}', "
        "found 'cals'\n"
        "  kernel k { space mm; cals 2 }\n"
        "                       ^\n"
        "  hint: did you mean 'calls'?");
}

TEST_CASE("model: every kind of mistake in a kernel is reported, all at once") {
  CHECK(model_messages(R"(model m {
  const n = 0
  kernel a { calls 2 }
  kernel b { space rows; calls n }
  kernel b { space rows }
  kernel c { space rows; set bufs = 2 }
  kernel d { space rows; dtype fp8 }
  kernel e { space mm; set M = 100 }
  kernel f { space nope }
  kernel g { space "missing.tsl" }
  kernel h { space mm; dtype bf16; set dtype = fp8 }
  kernel i { space rows; calls 1; calls 2 }
  kernel j { space mm; set N = true }
  const n = 3
}
)" + std::string(spaces)) ==
        "3: kernel 'a' names no space\n"
        "4: kernel 'b' runs 0 times per step: calls must be an integer >= 1\n"
        "5: kernel 'b' is already declared at line 4\n"
        "6: kernel 'c': space 'rows' has 'bufs', but not as a const (only consts can be set)\n"
        "7: kernel 'd': space 'rows' has no const 'dtype'\n"
        "8: kernel 'e': space 'mm' has no valid config: constraint 'M % tile == 0 and N % tile "
        "== 0' at line 21 rejects every config that reaches it (3 rejected in all)\n"
        "9: kernel 'f': test.tsl has no space 'nope'\n"
        "10: kernel 'g': cannot read 'missing.tsl': No such file or directory\n"
        "11: kernel 'h' sets its dtype twice (dtype and set dtype)\n"
        "12: kernel 'i' gives its calls twice\n"
        "13: kernel 'j': its sets do not fit the space test.tsl:mm (its errors follow)\n"
        "18: --set N=true: const 'N' is an integer, but 'true' is a boolean\n"
        "14: const 'n' is already declared at line 2\n");
}

TEST_CASE("model: a file without the model, or a model without kernels") {
  CHECK(model_messages(std::string(spaces)) == "no model is defined\n");
  CHECK(model_messages("model a { kernel k { space rows } }" + std::string(spaces)) == "");
  try {
    (void)parse_model("model a { kernel k { space rows } }" + std::string(spaces), options(), "b");
    FAIL("no error");
  } catch (const space_error& e) {
    CHECK(std::string(e.what()).find("unknown model 'b'") != std::string::npos);
  }
  CHECK(model_messages("model a { const x = 1 }") == "1: model 'a' has no kernel\n");
  // a model file is still a space file: its spaces check as before
  CHECK(errors_of("model a { kernel k { space rows } }" + std::string(spaces)) == "");
}

}  // namespace tessel::testing
