// `tessel report` as a user runs it, and the page as a browser draws it:
// headless Chromium (Debian's chromium, installed by scripts/setup) loads
// the report of a small simulator study, a check script injected into a
// copy of the page measures every plot as laid out, and a screenshot is
// taken. One study, two browser starts: a few seconds in all. The same
// report of a shared study on a real PostgreSQL server
// (storage/pg_cluster.hpp).
#include "storage/pg_cluster.hpp"
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

using namespace cli_testing;
using json = nlohmann::json;
using tessel::testing::pg_cluster;

namespace {

/// `tessel ARGS` (the name `tessel` is also the library's namespace here).
result run(const std::string& args) { return cli_testing::tessel(args); }

const std::string work = work_folder;
const std::string matmul = "'" + std::string(TESSEL_SOURCE_DIR) + "/examples/matmul.tsl'";

/// Runs `command` in a shell: its exit code, stdout and stderr.
result shell(const std::string& command) {
  const std::string base = work + "/shell_" + std::to_string(::getpid());
  const int status = std::system((command + " >'" + base + ".out' 2>'" + base + ".err'").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(base + ".out"),
          read_text(base + ".err")};
}

/// chromium headless, as root in a container allows: no sandbox, no GPU, no
/// network of its own, a fresh profile.
std::string chromium(const std::string& arguments) {
  const std::string profile = work + "/chromium_profile";
  std::filesystem::remove_all(profile);
  return "timeout 90 chromium --headless --no-sandbox --disable-gpu "
         "--disable-background-networking "
         "--disable-component-update --disable-sync --no-first-run --hide-scrollbars "
         "--user-data-dir='" +
         profile + "' " + arguments;
}

/// Measures every plot once the page has loaded, into <pre id="render-check">:
/// its laid-out size, its points and failure marks, and how many of its
/// shapes the browser gave a non-empty box. Errors land in the page title.
constexpr const char* check_script = R"(<script>
window.onerror = (message) => { document.title = 'ERROR ' + message; };
window.addEventListener('load', () => {
  const out = {};
  for (const svg of document.querySelectorAll('svg.plot')) {
    const box = svg.getBoundingClientRect();
    const shapes = svg.querySelectorAll('circle, rect, path');
    let drawn = 0;
    for (const s of shapes) { const b = s.getBBox(); if (b.width > 0 || b.height > 0) ++drawn; }
    out[svg.dataset.plot] = {width: box.width, height: box.height, shapes: shapes.length, drawn,
                             ok: svg.querySelectorAll('circle.ok').length,
                             failed: svg.querySelectorAll('path.fail').length,
                             top: svg.querySelectorAll('path.top').length};
  }
  const pre = document.createElement('pre');
  pre.id = 'render-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>)";

bool chromium_runs() {
  static const bool runs = shell(chromium("--version")).code == 0;
  return runs;
}

/// What the browser drew of `page` (as written to `name`.html): per plot,
/// the check script's measures. Checks that the page ran without console
/// output or errors.
json drawn_plots(const std::string& page, const std::string& name) {
  const std::string checked = work + "/" + name + "_checked.html";
  {
    std::string copy = page;
    copy.insert(copy.rfind("</body>"), check_script);
    std::ofstream(checked) << copy;
  }
  const auto dom =
      shell(chromium("--enable-logging=stderr --v=0 --virtual-time-budget=5000 "
                     "--dump-dom 'file://" +
                     checked + "'"));
  REQUIRE(dom.code == 0);
  CHECK_MESSAGE(!contains(dom.err, ":CONSOLE"), "console output:\n",
                dom.err);  // INFO:CONSOLE:LINE] "message"
  CHECK(!contains(dom.out, "<title>ERROR"));
  const auto from = dom.out.find("<pre id=\"render-check\">");
  REQUIRE(from != std::string::npos);
  const auto start = from + std::string("<pre id=\"render-check\">").size();
  return json::parse(dom.out.substr(start, dom.out.find("</pre>", start) - start));
}

/// What the browser drew of a simulator study's `page`, each of its plots
/// checked drawn at a readable size with every shape laid out with a box;
/// nullopt (and a message) where chromium does not start.
std::optional<json> drawn_simulator_plots(const std::string& page, const std::string& name) {
  if (!chromium_runs()) {
    MESSAGE("SKIPPED the browser half: chromium does not start here (scripts/setup installs it)");
    return std::nullopt;
  }
  auto plots = drawn_plots(page, name);
  for (const char* plot : {"convergence", "convergence_cost", "objective_by_parameter",
                           "importance", "interactions", "parallel", "status", "engines"}) {
    INFO("plot ", plot, ": ", plots.dump());
    REQUIRE(plots.contains(plot));
    const auto& p = plots.at(plot);
    CHECK(p.at("width").get<double>() > 400);
    CHECK(p.at("height").get<double>() > 150);
    CHECK(p.at("shapes").get<int>() > 3);
    CHECK(p.at("drawn") == p.at("shapes"));
  }
  return plots;
}

}  // namespace

TEST_CASE("report: headless Chromium draws every plot of a simulator study") {
  const std::string db = work + "/report.tessel.db", html = work + "/report.html";
  for (const auto& p : {db, db + "-wal", db + "-shm", html}) std::filesystem::remove(p);
  REQUIRE(run("tune " + matmul +
              " --backend sim --target trn2 --budget 40 --seed 1 --quiet "
              "--db '" +
              db + "'")
              .code == 0);
  const auto shown = run("show '" + db + "' --json");
  REQUIRE(shown.code == 0);
  const auto counts = json::parse(shown.out).at("by_status");
  const int ok = counts.value("ok", 0), failed = 40 - ok;
  const auto made = run("report '" + db + "' -o '" + html + "' --top 8");
  REQUIRE(made.code == 0);
  CHECK(contains(made.err, "to " + html));
  const std::string page = read_text(html);
  CHECK(page.find("<script") == std::string::npos);  // self-contained, no code to run
  CHECK(page.find("http://") == std::string::npos);  // nothing fetched at view time
  CHECK(page.find("https://") == std::string::npos);

  const auto drawn = drawn_simulator_plots(page, "report");
  if (!drawn) return;
  const auto& plots = *drawn;
  CHECK(!plots.contains("fidelity"));  // not a multi-fidelity study
  CHECK(plots.at("convergence").at("ok") == ok);
  CHECK(plots.at("convergence").at("failed") == failed);
  CHECK(plots.at("parallel").at("top") == std::min(8, ok));

  const std::string png = work + "/report.png";
  std::filesystem::remove(png);
  REQUIRE(
      shell(chromium("--window-size=1100,2400 --screenshot='" + png + "' 'file://" + html + "'"))
          .code == 0);
  REQUIRE(std::filesystem::exists(png));
  CHECK(read_text(png).starts_with("\x89PNG"));
  CHECK(std::filesystem::file_size(png) > 50'000);  // a blank page is a few kB
}

TEST_CASE("report: --format svg writes one plot; clear errors; explain --interactions") {
  const std::string db = work + "/report_svg.tessel.db";
  for (const auto& p : {db, db + "-wal", db + "-shm"}) std::filesystem::remove(p);
  REQUIRE(run("tune " + matmul + " --backend sim --budget 12 --seed 2 --quiet --db '" + db + "'")
              .code == 0);
  auto r = run("report '" + db + "' --format svg --plot convergence");
  REQUIRE(r.code == 0);
  CHECK(r.out.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns="));
  r = run("report '" + db + "' --format svg");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "--format svg draws one plot: name it with --plot (convergence, "));
  r = run("report '" + db + "' --format svg --plot bars");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "no plot named 'bars'"));
  r = run("report '" + db + "' --format pdf");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "unknown --format 'pdf' (html or svg)"));
  r = run("report '" + db + "' --format svg --plot fidelity");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "plot 'fidelity' has nothing to draw"));

  // explain --interactions on the same study: the best against the baseline.
  r = run("explain " + matmul + " --best '" + db + "' --interactions --budget 6");
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "standalone: the base plus one change\n"));
  CHECK(contains(r.out, "cascading: the base plus two changes\n"));
  CHECK(contains(r.out, "budget: 6 evaluations spent, "));
  CHECK(contains(r.out, "  measured\n"));
  r = run("explain " + matmul + " --best '" + db + "' --interactions --json");
  CHECK(r.code == 2);  // --interactions excludes --json
}

TEST_CASE("report: a shared study on PostgreSQL renders as a study file does") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("report");
  REQUIRE(run("tune " + matmul + " --backend sim --target trn2 --budget 24 --seed 3 --quiet " +
              "--db '" + url + "'")
              .code == 0);
  const std::string html = work + "/report_pg.html";
  std::filesystem::remove(html);
  const auto made = run("report '" + url + "' -o '" + html + "' --top 6");
  INFO(made.err);
  REQUIRE(made.code == 0);
  CHECK(contains(made.err, "to " + html));
  const std::string page = read_text(html);
  // Its copy in a study file draws the same page but for the study's
  // location in the page's header.
  const std::string db = work + "/report_pg_copy.tessel.db";
  for (const auto& p : {db, db + "-wal", db + "-shm"}) std::filesystem::remove(p);
  REQUIRE(run("copy '" + url + "' '" + db + "'").code == 0);
  auto from_file = run("report '" + db + "' --top 6").out;
  const auto at = from_file.find("<td>" + db + "</td>");
  REQUIRE(at != std::string::npos);
  CHECK(from_file.replace(at + 4, db.size(), url) == page);

  const auto plots = drawn_simulator_plots(page, "report_pg");
  if (!plots) return;
  const auto shown = json::parse(run("show '" + url + "' --json").out);
  CHECK(plots->at("convergence").at("ok") == shown.at("by_status").value("ok", 0));
}
