// `tessel copy FROM TO`: a study from one store into another, SQLite and
// PostgreSQL either way (docs/distributed.md): to share a study that began
// in a file, or to keep a shared one as a file.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/storage.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <memory>

namespace tessel::cli {
namespace {

struct copy_options {
  std::string from, to;
};

int run_copy(const copy_options& o) {
  const auto stored = reopen_study(o.from);  // checks FROM, rebuilds its space
  const auto to = open_store(std::string_view(o.to));
  copy_study(*open_store(o.from, store_access::read), *to, stored.space);
  fmt::print("copied study of space '{}' ({} trials) from {} to {}\n", stored.record.space_name,
             stored.trials.size(), o.from, to->location());
  return exit_code::success;
}

}  // namespace

command add_copy_command(CLI::App& tool) {
  auto o = std::make_shared<copy_options>();
  auto* app = tool.add_subcommand(
      "copy", "Copy a study between stores: a SQLite file and a PostgreSQL study, either way");
  app->add_option("FROM", o->from, "The study to copy: a study file, or a postgresql:// URL")
      ->type_name("DB")
      ->required();
  app->add_option("TO", o->to, "Where to: a new study file, or a postgresql:// URL")
      ->type_name("DB")
      ->required();
  return {app, [o] { return report_errors([&] { return run_copy(*o); }, false); }};
}

}  // namespace tessel::cli
