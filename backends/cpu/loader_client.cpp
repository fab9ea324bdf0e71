// loader_client.cpp: starts the loader and reads its answer (loader_client.hpp).
#include "cpu/loader_client.hpp"

#include "command/process.hpp"
#include "command/protocol.hpp"

#include <tessel/error.hpp>
#include <tessel/settings.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include <pwd.h>
#include <unistd.h>

extern "C" char** environ;  // NOLINT: POSIX

namespace tessel::detail {
namespace fs = std::filesystem;
namespace {

std::string dims_of(const tensor_spec& t) { return fmt::format("{}", fmt::join(t.shape, "x")); }

std::string read_bytes(const fs::path& path, std::uintmax_t limit) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw error(fmt::format("it wrote no {}", path.filename().string()));
  if (size > limit)
    throw error(
        fmt::format("{} has {} bytes, more than its shape allows", path.filename().string(), size));
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A new run's token: 128 random bits, as hex. The loader reads it from its
/// stdin before the kernel's process starts and puts it in its answer; the
/// kernel's process never holds it (docs/gate.md, "Round twelve: the answer").
std::string new_token() {
  thread_local std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", device());
  return token;
}

/// What the loader's stdout held: its answer (the one line that carries
/// `token`) and whether anything else was written there, which the loader
/// never does (a forged answer, or a second one).
struct answer_lines {
  std::optional<nlohmann::json> answer;
  std::size_t foreign = 0;  ///< non-empty lines that are not the answer
  std::size_t answers = 0;  ///< lines with the token
};

answer_lines answer_of(const std::string& output, const std::string& token) {
  std::istringstream lines(output);
  answer_lines out;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("token", "") == token) {
      ++out.answers;
      out.answer = std::move(j);
    } else {
      ++out.foreign;
    }
  }
  return out;
}

std::vector<std::string> arguments(const loader_setup& setup, const sealed_file& library,
                                   const fs::path& dir, const std::optional<loader_timing>& t) {
  std::vector<std::string> args{setup.loader->path().string(), library.path().string(),
                                t ? "time" : "run"};
  for (const auto& in : setup.inputs)
    args.insert(args.end(), {"--in", std::string(to_string(in.type)), dims_of(in),
                             (dir / (in.name + ".npy")).string()});
  for (const auto& out : setup.outputs)
    args.insert(args.end(), {"--out", std::string(to_string(out.type)), dims_of(out),
                             (dir / ("out_" + out.name + ".npy")).string()});
  for (const auto& c : setup.constants) args.insert(args.end(), {"--const", c});
  if (!setup.kernel_user.empty()) args.insert(args.end(), {"--kernel-user", setup.kernel_user});
  if (t) {
    const auto number = [](double v) { return fmt::format("{:.17g}", v); };
    args.insert(
        args.end(),
        {"--warmup", std::to_string(t->warmup), "--min-sample", number(t->min_sample_s),
         "--min-repeats", std::to_string(t->racing.min_repeats), "--max-repeats",
         std::to_string(t->racing.max_repeats), "--margin", number(t->racing.margin), "--target-ci",
         number(t->racing.target_relative_ci), "--max-seconds", number(t->racing.max_seconds),
         "--incumbent", number(t->incumbent_s), "--loop-seed", std::to_string(t->loop_seed)});
  }
  return args;
}

}  // namespace

std::string kernel_user_ids(const std::string& user) {
  if (user == "root" || user == "0" || user == "0:0") return {};
  const auto number = [](const std::string& text) -> std::optional<std::size_t> {
    const auto v = parse_whole(text);
    return v && *v < 4294967295U ? v : std::nullopt;  // (uid_t)-1 is no one
  };
  const auto colon = user.find(':');
  if (const auto uid = number(user.substr(0, colon))) {
    const auto gid = colon == std::string::npos ? uid : number(user.substr(colon + 1));
    if (!gid)
      throw error(
          fmt::format("backend cpu: kernel_user '{}' must be a user name, UID or UID:GID", user));
    if (*uid == 0 || *gid == 0)
      throw error(fmt::format(
          "backend cpu: kernel_user '{}' keeps root's uid or gid: say kernel_user=root", user));
    return fmt::format("{}:{}", *uid, *gid);
  }
  std::vector<char> text(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (colon == std::string::npos &&
      ::getpwnam_r(user.c_str(), &entry, text.data(), text.size(), &found) == 0 &&
      found != nullptr) {
    if (found->pw_uid == 0) return {};
    return fmt::format("{}:{}", found->pw_uid, found->pw_gid);
  }
  if (user == "nobody") return "65534:65534";  // a system without the name in its passwd
  throw error(fmt::format(
      "backend cpu: kernel_user '{}' is no user of this system (a user name, UID or UID:GID; "
      "root keeps uid 0)",
      user));
}

loader_run run_loader(const loader_setup& setup, const sealed_file& library,
                      const std::vector<std::string>& inputs, const std::vector<int>& cpus,
                      const std::optional<loader_timing>& timing) {
  const scratch_dir dir("tessel-cpu");
  for (std::size_t i = 0; i < setup.inputs.size(); ++i)
    std::ofstream(dir.path() / (setup.inputs[i].name + ".npy"), std::ios::binary)
        .write(inputs[i].data(), static_cast<std::streamsize>(inputs[i].size()));
  process_request request;
  request.arguments = arguments(setup, library, dir.path(), timing);
  for (const auto* copy : {setup.loader.get(), &library})  // a private file has none
    if (copy->fd() >= 0) request.inherited.push_back(copy->fd());
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) request.environment.emplace_back(*e);
  for (const auto& [name, value] : setup.environment) {
    const std::string prefix = name + "=";  // (clang 14 cannot capture a structured binding)
    std::erase_if(request.environment,
                  [&prefix](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    request.environment.push_back(prefix + value);
  }
  request.timeout_s = setup.timeout_s;
  request.kill_grace_s = setup.kill_grace_s;
  request.cpus = cpus;
  request.max_output_bytes = 1u << 20;
  const std::string token = new_token();
  request.input = token + "\n" + (timing ? std::to_string(timing->judged_seed) + "\n" : "");
  file_guard::run_scope guarded(setup.guard.get());
  const auto result = run_process(request);

  loader_run out;
  auto& r = out.run;
  r.seconds = result.wall_s;
  {
    std::vector<std::string> names;
    for (const auto& path : guarded.changed()) names.push_back(path.string());
    if (!names.empty()) {
      r.status = status::suspicious;
      r.message = fmt::format(
          "its process changed tessel's own files in the compile cache ({}); they are restored",
          fmt::join(names, ", "));
      return out;
    }
  }
  const auto stderr_tail = [&] {
    const auto tail = tail_of(result.errors, 10, 1500);
    return tail.empty() ? std::string() : "\nstderr:\n" + tail;
  };
  const auto [answer, foreign, answers] = answer_of(result.output, token);
  if (foreign > 0 || answers > 1 || result.output_truncated) {
    // The loader writes one line on its answer channel, its answer with
    // the token; anything else there was written by the kernel's process
    // (through its ancestors' pipes, /proc/PID/fd), to be read as the answer.
    r.status = status::suspicious;
    r.message = fmt::format(
        "something other than the loader wrote on its answer channel ({} line(s) without the "
        "run's token, {} with it): a forged answer",
        foreign, answers);
    return out;
  }
  if (result.timed_out) {
    r.status = status::timeout;
    r.message = fmt::format(
        "ran past {} s and was killed (the run limit; change it with --backend-set timeout=S or "
        "cpu_options::run_timeout_s)",
        setup.timeout_s);
  } else if (!result.started) {
    r.status = status::runtime_error;
    r.message = "the loader did not start: " + result.start_error;
  } else if (result.signal != 0) {
    r.status = status::runtime_error;
    r.message = fmt::format("crashed ({}){}", signal_name(result.signal), stderr_tail());
  } else if (!answer || result.exit_code != 0) {
    r.status = status::runtime_error;
    r.message = fmt::format("exited with code {} and no answer{}", result.exit_code, stderr_tail());
  } else if (answer->value("status", "") == "suspicious") {
    // A rule of the call no honest mistake breaks (it wrote its inputs): the
    // status says so; the message says what happened (the verdict's wording,
    // "suspicious: ...", is the caller's: cpu_backend.cpp).
    r.status = status::suspicious;
    r.message = answer->value("message", "the loader saw the kernel cheat");
  } else if (answer->value("status", "") != "ok") {
    r.status = status::runtime_error;
    r.message = answer->value("message", "the loader failed") + stderr_tail();
  }
  if (r.status != status::ok) return out;
  try {
    const auto outputs = [&](const std::string& suffix) {  // "": the last call's
      std::vector<std::string> files;
      for (const auto& o : setup.outputs)
        files.push_back(read_bytes(dir.path() / ("out_" + o.name + ".npy" + suffix),
                                   static_cast<std::uintmax_t>(o.elements()) * 8 + 4096));
      return files;
    };
    r.outputs = outputs("");
    if (timing) {
      for (const auto& v : answer->at("samples_s")) out.samples.push_back(v.get<double>());
      out.stopped =
          parse_race_stop(answer->at("stopped").get<std::string>()).value_or(race_stop::failed);
      out.iters = answer->at("iters").get<std::size_t>();
      out.calls = answer->at("calls").get<std::uint64_t>();
      out.judged_call = answer->value("judged_call", std::uint64_t{0});
      if (out.judged_call >= out.calls && out.judged_call > 0)
        throw error("its judged call is not before its last");
      if (out.judged_call > 0) out.judged_outputs = outputs(".judged");
      out.seccomp = answer->value("seccomp", false);
      if (out.calls == 0) throw error("it made no call");
    }
  } catch (const std::exception& e) {
    r.status = status::runtime_error;
    r.message = fmt::format("reading the loader's answer: {}", e.what());
  }
  return out;
}

std::optional<std::string> loader_run::sample_fault() const {
  if (samples.empty()) return "the loader timed no samples";
  if (std::any_of(samples.begin(), samples.end(), [](double v) { return !std::isfinite(v); }))
    return "the loader timed a sample that is not a finite number";
  if (std::all_of(samples.begin(), samples.end(), [](double v) { return v > 0; }))
    return std::nullopt;
  return "a sample timed 0: its calls took less time than the handoff between the timing parent "
         "and the kernel's process (about 5 us a sample, subtracted from it); make the kernel do "
         "more work per call, or raise min_sample so that a sample repeats more calls";
}

}  // namespace tessel::detail
