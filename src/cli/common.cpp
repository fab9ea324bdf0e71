#include "common.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>
#include <tessel/settings.hpp>
#include <tessel/strategies.hpp>
#include <tessel/target.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace tessel::cli {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written: "ok" first

/// `NAME=VALUE` with a non-empty NAME; CLI11 reports the message as a usage error.
std::string check_assignment(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return "expected NAME=VALUE, got '" + text + "'";
  return {};
}

/// The number `text` is in full (strtod's syntax), if it is one.
std::optional<double> number_of(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

/// A validator of numbers: "" when `accept` holds for the finite number
/// `text` is, else "must be WHAT, got 'TEXT'" (CLI11 puts the option first).
CLI::Validator number_validator(const std::string& what, bool (*accept)(double)) {
  return CLI::Validator(
      [what, accept](const std::string& text) -> std::string {
        const auto value = number_of(text);
        if (value && std::isfinite(*value) && accept(*value)) return {};
        return "must be " + what + ", got '" + text + "'";
      },
      "", what);
}

/// `--help`'s "one of ..." list, from a registry.
std::string listed(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

const CLI::Validator& whole_number() {
  static const CLI::Validator v(
      [](const std::string& text) -> std::string {
        std::uint64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc{} && end == text.data() + text.size() &&
            (text.size() == 1 || text.front() != '0'))  // CLI11 reads "010" as octal 8
          return {};
        return "expected an integer from 0 to 18446744073709551615, got '" + text + "'";
      },
      "", "whole number");
  return v;
}

const CLI::Validator& non_negative() {
  static const auto v = number_validator("a finite number >= 0", [](double x) { return x >= 0; });
  return v;
}

const CLI::Validator& positive() {
  static const auto v = number_validator("a finite number > 0", [](double x) { return x > 0; });
  return v;
}

const CLI::Validator& finite() {
  static const auto v = number_validator("a finite number", [](double) { return true; });
  return v;
}

study_spec spec_options::resolved() const {
  auto out = spec;
  for (const auto& [name, value] : parse_assignments(sets, "--set")) out.sets[name] = value;
  out.backend_settings = parse_assignments(backend_settings, "--backend-set");
  out.fidelity_settings = parse_assignments(fidelity_settings, "--fidelity-set");
  // Settings with nothing to apply them to were ignored without a word.
  if (!out.fidelity_settings.empty() && out.fidelity.empty())
    throw error(fmt::format("--fidelity-set {}=...: multi-fidelity settings need --fidelity",
                            out.fidelity_settings.begin()->first));
  // tune --resume takes the backend from the study file, the settings given on top.
  const bool takes_backend =
      mode() == open_mode::resume && command && command->get_name() == "tune";
  if (!out.backend_settings.empty() && out.backend.empty() && !is_replay_file(out.file) &&
      !(takes_backend && out.fidelity.empty()))
    throw error(fmt::format("--backend-set {}=...: {}", out.backend_settings.begin()->first,
                            out.fidelity.empty()
                                ? "there is no --backend to apply it to"
                                : "with --fidelity, give each level its settings in its spec "
                                  "(--fidelity sim:KEY=VALUE,...)"));
  if (no_db)
    out.db.clear();
  else if (out.db.empty())
    out.db = study_spec::default_db;
  return out.resolved();
}

open_mode spec_options::mode() const {
  return overwrite ? open_mode::overwrite : resume ? open_mode::resume : open_mode::create;
}

void add_space_options(CLI::App& command, spec_options& o) {
  command.add_option("FILE", o.spec.file, "The .tsl file to read")
      ->type_name("PATH")
      ->required()
      ->check(CLI::ExistingFile.description(""));  // keep "PATH" alone in --help
  command
      .add_option("--space", o.spec.space,
                  "The space to use when FILE declares several (default: the first)")
      ->type_name("NAME");
  command
      .add_option("--target", o.spec.target,
                  "The target to check against: " + listed(builtin_target_names()) +
                      ", or a target FILE declares (cpu with --backend cpu)")
      ->type_name("TARGET")
      ->default_str(default_target());  // shown only: "" lets the spec resolve it
  command
      .add_option("--set", o.sets, "Override a const of the space, e.g. --set M=8192; repeatable")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_assignment, "", "assignment"));
}

config config_choice::in(const space& s, const std::string& command) const {
  if (config.empty() == best.empty())
    throw error(command + ": give the config to " + command +
                " with --config JSON (or @PATH) or --best DB");
  return chosen_config(s, config, best);
}

void add_config_options(CLI::App& command, config_choice& o, const std::string& verb) {
  command
      .add_option("--config", o.config,
                  "The config as a JSON object (parameters left out take their default), or "
                  "@PATH of a file holding one")
      ->type_name("JSON");
  command.add_option("--best", o.best, verb + " the best trial of this study file instead")
      ->type_name("DB")
      ->excludes("--config");
}

void add_study_options(CLI::App& command, spec_options& o) {
  o.command = &command;
  add_space_options(command, o);
  auto& s = o.spec;
  auto* b = command
                .add_option("--backend", s.backend,
                            "What evaluates configs: " + listed(backend_schemes()) +
                                " (sim, replay:PATH, command:'CMD {param}', ...; a replay FILE "
                                "defaults to replay:FILE)")
                ->type_name("SPEC");
  command
      .add_option("--replay-space", s.replay_space,
                  "A replay FILE's space: product (every combination of the recorded values; "
                  "a config the table lacks answers invalid, as a compiler would reject it) or "
                  "table (the stored configs only: the kernel's restrictions known)")
      ->type_name("KIND")
      ->check(CLI::IsMember({"product", "table"}).description(""))
      ->capture_default_str();
  command
      .add_option("--backend-set", o.backend_settings,
                  "A backend setting, e.g. --backend-set timeout=30; repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command
      .add_option("--fidelity", s.fidelity,
                  "Multi-fidelity instead of --backend: give it twice, the cheap low fidelity "
                  "first (e.g. --fidelity sim:target=trn2 --fidelity replay:device.json); every "
                  "config is screened at the first, promising ones measured at the second "
                  "(docs/fidelity.md)")
      ->type_name("SPEC")
      ->allow_extra_args(false)
      ->excludes(b);
  command
      .add_option("--fidelity-set", o.fidelity_settings,
                  "A multi-fidelity setting: warmup, z, min_agreement, top_fraction, "
                  "top_patience, top_min, min_spread, audit_every, max_high, promote_failures; "
                  "repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command
      .add_option("--strategy", s.strategy,
                  "Search strategy: " + listed(strategy_names()) +
                      " (bo and auto take options: bo[KEY=VALUE;...], docs/strategies.md)")
      ->type_name("NAME")
      ->capture_default_str();
  command.add_option("--seed", s.seed, "Seed of every random choice (recorded in the study file)")
      ->type_name("S")
      ->check(whole_number())
      ->capture_default_str();
  command
      .add_option("--jobs,-j", s.jobs,
                  "Threads evaluating at once (0 = the backend's concurrency); the trials are "
                  "the same at any --jobs")
      ->type_name("N")
      ->check(whole_number())
      ->capture_default_str();
  command
      .add_option("--window", s.window,
                  "Proposals in flight at once: each is made knowing all results but the last "
                  "N-1, so at most N evaluations run in parallel (0 = as many as --jobs: more "
                  "parallel, but the trials then depend on --jobs)")
      ->type_name("N")
      ->check(whole_number())
      ->capture_default_str();
  command
      .add_option("--db", s.db,
                  "Where the study is stored: a SQLite file (default <space>.tessel.db), or a "
                  "postgresql:// URL, a study that `tessel worker` processes share "
                  "(docs/distributed.md)")
      ->type_name("PATH|URL");
  command.add_flag("--resume", o.resume,
                   "Continue the study in --db: keep finished trials, re-run interrupted ones");
  command
      .add_flag("--overwrite", o.overwrite,
                "Delete the study in --db (all its trials) and start a new one there")
      ->excludes("--resume");
  command.add_flag("--no-db", o.no_db, "Keep nothing on disk")
      ->excludes("--db")
      ->excludes("--resume")
      ->excludes("--overwrite");
  command.add_flag_callback(
      "--no-baseline", [&s] { s.baseline = false; },
      "Do not evaluate the space's default config first");
  command
      .add_option("--scheduler", s.scheduler,
                  "utility: rank candidates by expected gain per predicted second (cost-aware); "
                  "fifo: evaluate proposals in the order the strategy made them")
      ->type_name("KIND")
      ->check(CLI::IsMember({"utility", "fifo"}).description(""))
      ->capture_default_str();
  command
      .add_option("--cost-alpha", s.cost_alpha,
                  "How strongly the utility scheduler prefers cheap candidates at the start: "
                  "expected gain / cost^A, A cooling to 0 over the budget (0 = ignore cost)")
      ->type_name("A")
      ->check(non_negative())
      ->capture_default_str();
  command
      .add_option("--cost-rule", s.cost_rule,
                  "How the utility scheduler weighs cost: cooled_ei (expected gain / cost^A) or "
                  "gittins (the Pandora's-box Gittins index; docs/scheduler.md)")
      ->type_name("RULE")
      ->check(CLI::IsMember({"cooled_ei", "gittins"}).description(""))
      ->capture_default_str();
  command
      .add_option("--min-gain", s.min_gain,
                  "Stop when the best expected gain left is below this fraction of the best "
                  "objective (utility scheduler; 0 = never)")
      ->type_name("F")
      ->check(non_negative())
      ->capture_default_str();
  command.add_flag_callback(
      "--no-gate", [&s] { s.gate = false; },
      "--backend sim: time configs without checking their outputs in the "
      "equivalence gate (docs/simulator.md)");
}

void add_session_options(CLI::App& command, spec_options& o) {
  // A session has no stop condition, so the cost-aware scheduler cannot tell
  // how much of the budget is spent unless it is told (docs/scheduler.md).
  auto& s = o.spec;
  command
      .add_option("--budget", s.budget_hint,
                  "Evaluations the session expects: the cost weight cools from 1 to 0 over "
                  "them (utility scheduler; the session does not stop there)")
      ->type_name("N")
      ->check(whole_number());
  command
      .add_option("--cost-budget", s.cost_budget_hint_s,
                  "Seconds of evaluation cost the session expects, as --budget")
      ->type_name("SECONDS")
      ->check(non_negative());
  // The names before issue 27, kept working but not listed.
  command.add_option("--budget-hint", s.budget_hint)->group("")->check(whole_number());
  command.add_option("--cost-budget-hint", s.cost_budget_hint_s)->group("")->check(non_negative());
  command
      .add_option("--token-price", s.token_price_s,
                  "Seconds of evaluation cost 1,000 agent tokens are worth: the scheduler weighs "
                  "a candidate's device time plus its tokens (0 = record tokens only)")
      ->check(non_negative())
      ->type_name("S");
  command.add_flag("--verify", s.verify,
                   "Re-measure agent-reported results (tell) on the backend before they can be "
                   "the best (needs --backend)");
}

std::string default_target(const std::string& backend) {
  study_spec spec;
  spec.backend = backend;
  return spec.resolved().target;
}

std::vector<std::string> model_options::chosen_targets() const {
  return targets.empty() ? std::vector<std::string>{default_target(backend)} : targets;
}

model_spec model_options::spec_for(const std::string& target) const {
  model_spec s;
  s.file = file;
  s.model = model;
  s.target = target;
  s.sets = parse_assignments(sets, "--set");
  s.backend = backend;
  s.backend_settings = parse_assignments(backend_settings, "--backend-set");
  s.gate = gate;
  return s;
}

void add_model_options(CLI::App& command, model_options& o) {
  command.add_option("FILE", o.file, "A .tsl file with a model block (docs/models.md)")
      ->required()
      ->type_name("PATH");
  command.add_option("--model", o.model, "Which model of FILE (default: the first)")
      ->type_name("NAME");
  command
      .add_option("--target", o.targets,
                  "Target(s) every kernel is checked and timed on; give two (trn2, trn2_lnc2) to "
                  "compare them")
      ->type_name("TARGET")
      ->default_str(default_target());  // shown only: none given is chosen_targets()
  command.add_option("--set", o.sets, "Override a const of the model, e.g. --set layers=12")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  command.add_option("--backend", o.backend, "What times each kernel (default sim)")
      ->type_name("SPEC")
      ->capture_default_str();
  command
      .add_option("--backend-set", o.backend_settings,
                  "A backend setting for every kernel, e.g. --backend-set model=analytic")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command.add_flag_callback(
      "--no-gate", [&o] { o.gate = false; },
      "--backend sim: time configs without the equivalence gate");
  command.add_flag("--json", o.json, "Print one JSON object instead of the tables");
}

namespace {

bool given(const CLI::App& command, std::string_view name) {
  const auto* option = name.empty() ? nullptr : command.get_option_no_throw(std::string(name));
  return option && option->count() > 0;
}

/// `--option value` as a person gives it (a flag: itself, or "the baseline").
std::string option_text(const recorded_field& r, const std::string& value_json) {
  const auto value = nlohmann::json::parse(value_json);
  if (value.is_boolean()) return value.get<bool>() ? "the baseline" : std::string(r.option);
  return fmt::format("{} {}", r.option,
                     value.is_string() ? value.get<std::string>() : value.dump());
}

/// Takes from `recorded` what `command` left out (take_recorded over
/// recorded_fields(), by their CLI option); returns the notes to print, each
/// after the study file's location.
std::vector<std::string> take_left_out(study_spec& spec, const study_spec& recorded,
                                       const CLI::App& command) {
  const auto said = [&command](const recorded_field& r) {
    if (!command.get_option_no_throw(std::string(r.only_with.empty() ? r.option : r.only_with)) ||
        (r.evaluates && command.get_name() != "tune"))  // serve's agent may measure itself
      return option_said::cannot;
    // --fidelity says what evaluates as --backend does.
    const bool fidelity = r.field == "backend" && given(command, "--fidelity");
    return fidelity || given(command, r.option) || given(command, r.only_with)
               ? option_said::given
               : option_said::left_out;
  };
  const auto settings = spec.backend_settings;  // given: on top of a backend taken
  const auto options = take_recorded(spec, recorded, said);
  auto notes = resume_notes(options, option_text, " ", "this run");
  const bool took_backend = std::any_of(options.begin(), options.end(), [](const auto& o) {
    return o.field == "backend" && o.taken;
  });
  if (took_backend && !settings.empty()) {
    std::vector<std::string> given_settings;
    for (const auto& [key, value] : settings) given_settings.push_back(key + "=" + value);
    notes.push_back(fmt::format("--backend-set {} applied on top of the settings it began with",
                                fmt::join(given_settings, " --backend-set ")));
  }
  return notes;
}

}  // namespace

std::function<std::vector<std::string>(study_spec&, const study_spec&)> resume_as_given(
    const CLI::App& command) {
  return [&command](study_spec& spec, const study_spec& recorded) {
    return take_left_out(spec, recorded, command);
  };
}

void print_notes(const std::string& where, const std::vector<std::string>& notes) {
  for (const auto& note : notes) fmt::print(stderr, "tessel: note: {}: {}\n", where, note);
}

opened_study open_as_given(const spec_options& o, study_spec spec) {
  open_options options;
  options.mode = o.mode();
  std::vector<std::string> notes;
  if (o.command)
    options.resuming = [taking = resume_as_given(*o.command), &notes](study_spec& given,
                                                                      const study_spec& recorded) {
      notes = taking(given, recorded);
    };
  auto opened = open_study(std::move(spec), std::move(options));
  if (opened.db) print_notes(opened.db->location(), notes);
  return opened;
}

std::vector<std::string>& command_line() {
  static std::vector<std::string> words;
  return words;
}

// What a run that SIGINT or SIGTERM ends says on stderr
// (announce_interrupts). The handler only write(2)s text made before it was
// installed and a count kept in a lock-free atomic (async-signal-safe).
namespace interrupted {
namespace {

std::atomic<std::uint64_t> finished{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
// Set once, before the handler is installed; never changed after.
std::string before, one, many;  // before COUNT, then one or many
bool counted = false;

void write_all(std::string_view text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const auto n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

extern "C" void on_signal(int sig) {
  const int saved = errno;
  write_all(before);
  if (counted) {
    const auto count = finished.load();
    char digits[20];
    std::size_t n = 0;
    auto v = count;
    do {
      digits[sizeof digits - ++n] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0);
    write_all(std::string_view(digits + sizeof digits - n, n));
    write_all(count == 1 ? one : many);
  }
  errno = saved;
  ::raise(sig);  // SA_RESETHAND: delivered with the default action once this returns
}

/// The command line that resumes this run: as typed, without --overwrite
/// (it excludes --resume), with --resume.
std::string resume_command() {
  std::string out;
  bool resumes = false;
  for (const auto& word : command_line()) {
    if (word == "--overwrite") continue;
    resumes = resumes || word == "--resume";
    out += (out.empty() ? "" : " ") + shell_quote(word);
  }
  return resumes ? out : out + " --resume";
}

/// Counts one more finished trial (a study's observers see each once).
class finished_counter final : public observer {
 public:
  void on_trial(const trial&, const progress&) override { finished.fetch_add(1); }
};

/// Counts one more finished trial whose result this worker measured and the
/// store kept: a shared study's observers also see the results of every other
/// worker, as this one reads them back (trial::worker says whose).
class own_finished_counter final : public observer {
 public:
  explicit own_finished_counter(const study& s) : study_(&s) {}
  void on_trial(const trial& t, const progress&) override {
    if (t.worker != 0 && t.worker == study_->worker_id()) finished.fetch_add(1);
  }

 private:
  const study* study_;
};

/// The count starts at the finished trials of `studies`; an observer added
/// to each keeps it.
void count_from(const std::vector<study*>& studies) {
  std::uint64_t now = 0;
  for (auto* s : studies) {
    for (const auto& t : s->trials()) now += t.state == trial_state::finished;
    s->add_observer(std::make_shared<finished_counter>());
  }
  finished.store(now);
}

/// "tessel: interrupted; " on a line of its own.
std::string line_start() {
  return isatty(fileno(stderr)) != 0 ? "\ntessel: interrupted; " : "tessel: interrupted; ";
}

void install() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace
}  // namespace interrupted

void announce_interrupts(const std::string& where, const std::vector<study*>& studies) {
  using namespace interrupted;
  if (where.empty()) {
    before = line_start() + "nothing is stored (--no-db)\n";
  } else {
    before = line_start();
    const auto rest = fmt::format(" stored in {}; resume with: {}\n", where, resume_command());
    one = " finished trial is" + rest;
    many = " finished trials are" + rest;
    counted = true;
  }
  count_from(studies);
  install();
}

void announce_worker_interrupts(const std::string& worker, const std::string& where, double lease_s,
                                study& shared) {
  using namespace interrupted;
  before = line_start() + "worker " + worker + " stops; ";
  const auto rest = fmt::format(
      " stored in {}; the trials it was running go back to the queue when its lease ({} s) "
      "runs out\n",
      where, lease_s);
  one = " finished trial of this worker is" + rest;
  many = " finished trials of this worker are" + rest;
  counted = true;
  finished.store(0);  // it has measured nothing yet: it joins in run()
  shared.add_observer(std::make_shared<own_finished_counter>(shared));
  install();
}

void stop_announcing_interrupts() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

namespace {

/// The library's fields the command line sets: an options_error naming one
/// names the option instead ("--jobs 100000: must be at most 4096 ...", not
/// "study::options::jobs = 100000: ..."). Backend settings are named by the
/// backends' factories (settings_reader::validated).
constexpr typed_name option_names[] = {
    {"study::options::jobs", "--jobs"},
    {"study::options::window", "--window"},
    {"study_spec.replay_space", "--replay-space"},
    {"study_spec.fidelity", "--fidelity"},
    {"study_spec.budget.high_evaluations", "--high-budget"},
    {"study_spec.verify", "--verify"},
    {"nki_options.target", "--target"},  // emit: a target FILE declares is no built-in
    {"nki_options.fault", "--fault"},
    {"join_request::worker.heartbeat_s", "--heartbeat"},  // worker
    {"join_request::worker.lease_s", "--lease"},
};

int report(const std::exception& e, bool as_json, bool one_line) {
  fmt::print(stderr, "{}", failure_text(e));
  if (as_json) {
    const json out = {{"ok", false}, {"error", failure_json(e)}};
    // User text (messages, source lines) may hold invalid UTF-8: replaced, never thrown.
    fmt::print("{}\n", out.dump(one_line ? -1 : 2, ' ', false, json::error_handler_t::replace));
  }
  return dynamic_cast<const tessel::error*>(&e) ? exit_code::bad_input : exit_code::internal;
}

}  // namespace

int report_errors(const std::function<int()>& body, bool as_json, bool one_line) {
  try {
    return body();
  } catch (const options_error& e) {
    for (const auto& [field, option] : option_names)
      if (e.field() == field) return report(e.renamed(std::string(option), " "), as_json, one_line);
    return report(e, as_json, one_line);
  } catch (const std::exception& e) {
    return report(e, as_json, one_line);
  }
}

}  // namespace tessel::cli
