// python/module.cpp: _tessel, the native part of the Python package `tessel`
// (python/tessel/__init__.py holds the Python API). Glue only: a Study is
// opened by the driver from a study_spec (tessel/driver.hpp), and values
// cross as JSON text: the Space's queries and the Study's ops
// (tessel/ops.hpp, the same ones `tessel serve` and `tessel mcp` speak), so
// Python sees plain objects with the field names the protocols document.
#include <tessel/codec.hpp>
#include <tessel/driver.hpp>
#include <tessel/model_driver.hpp>
#include <tessel/ops.hpp>
#include <tessel/space_check.hpp>
#include <tessel/tessel.hpp>

#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace py = pybind11;

namespace tessel::python {
namespace {

using json = nlohmann::json;

/// JSON text for Python; invalid UTF-8 in user text is replaced, never thrown.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

/// `text` (JSON that Python wrote) parsed; what is not JSON, such as a NaN or
/// an infinity Python's json module writes for a float, is a tessel::error
/// (tessel.Error), not a parser's internal exception.
json parse_json(const std::string& text, std::string_view what) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw error(fmt::format("{}: not a JSON value (NaN and infinity are not numbers here): {}",
                            what, e.what()));
  }
}

/// A keyword of a Python call and the library field it sets. An
/// options_error naming the field names the keyword instead ("tessel.Study:
/// token_price: ...", not "study_spec.token_price_s: ..."); a rule the
/// library words for the command line (--backend SPEC, --budget N) is
/// replaced by `rule`, in Python's words, when that is not empty.
struct keyword {
  std::string_view field, name, rule;
};

/// tessel.Study(...)'s keywords (python/tessel/__init__.py builds the spec).
constexpr keyword study_keywords[] = {
    {"study_spec.token_price_s", "token_price", ""},
    {"study_spec.scheduler", "scheduler", ""},
    {"study_spec.verify", "verify",
     "re-measures agent-reported results on the backend; give one (backend=\"sim\", a "
     "callable, tessel.gated(...))"},
    {"study::options::jobs", "jobs", ""},
    {"study::options::window", "window", ""},
};

/// tessel.Model(...)'s and Model.tune(...)'s keywords.
constexpr keyword model_keywords[] = {
    {"model_spec.scheduler", "scheduler", ""},
    {"model_spec.cost_budget_s", "cost_budget", ""},
    {"model_spec.no_db", "db_dir=False", ""},
    {"tune-model", "", "needs a budget: budget=N (evaluations) or cost_budget=SECONDS"},
};

/// `body()`, an options_error it throws naming what `call` (a Python call:
/// "tessel.Study") was passed when `keywords` hold the field.
template <class Body>
auto with_keywords(std::string_view call, std::span<const keyword> keywords, Body&& body) {
  try {
    return body();
  } catch (const options_error& e) {
    for (const auto& k : keywords) {
      if (!e.names(k.field)) continue;
      const auto name = k.name.empty() ? std::string(call) : fmt::format("{}: {}", call, k.name);
      if (!k.rule.empty()) throw options_error(name, std::string(k.rule));
      throw e.renamed(name, " = ");
    }
    throw;
  }
}

/// A measurement from what a Python backend returned: a number (the
/// objective, seconds) or a dict with the fields of a measurement
/// (tessel/codec.hpp). Its wall time is the run cost unless it says otherwise.
measurement measurement_from(const json& r, double wall_s) {
  codec::measurement_report report;
  try {
    report = codec::read_measurement(r);
  } catch (const error& e) {
    return measurement::failure(status::runtime_error,
                                "the Python backend returned " + dump(r) + ": " + e.what());
  }
  measurement m;
  m.status = report.status.value_or(status::ok);
  if (m.ok() && !report.objective)
    return measurement::failure(status::runtime_error,
                                "the Python backend returned status ok without an objective");
  if (m.ok()) m.objective = *report.objective;
  m.message = std::move(report.message);
  m.samples = std::move(report.samples);
  m.metrics = std::move(report.metrics);
  m.cost = {report.compile_s.value_or(0), report.gate_s.value_or(0), report.run_s.value_or(wall_s)};
  return m;
}

/// A Python callable as a backend: fn(config: dict) -> float | dict. Called
/// with the GIL held; what it raises is recorded as runtime_error.
std::shared_ptr<backend> python_backend(py::function fn, std::string name) {
  callback_options o;
  o.name = std::move(name);
  o.concurrency = 1;
  auto call = [fn = std::move(fn)](const space& s, const config& c) -> measurement {
    py::gil_scoped_acquire gil;
    const auto started = std::chrono::steady_clock::now();
    try {
      const auto json_mod = py::module_::import("json");
      py::object result = fn(json_mod.attr("loads")(s.to_json(c)));
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (result.is_none())
        return measurement::failure(status::runtime_error,
                                    "the Python backend returned None: return the objective");
      return measurement_from(json::parse(json_mod.attr("dumps")(result).cast<std::string>()),
                              wall);
    } catch (py::error_already_set& e) {
      return measurement::failure(status::runtime_error,
                                  std::string("the Python backend raised ") + e.what());
    }
  };
  return std::make_shared<callback_backend>(callback_backend::measure_function(call), o);
}

/// A call's inputs as numpy arrays the callee owns: float32 (every drawn
/// value is exact in it), int32 for labels.
py::list arrays_of(const std::vector<tensor_spec>& specs,
                   const std::vector<std::vector<double>>& values) {
  py::list arrays;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& v = values[i];
    if (specs[i].type == element_type::int32) {
      py::array_t<std::int32_t> a(specs[i].shape);
      for (std::size_t e = 0; e < v.size(); ++e)
        a.mutable_data()[e] = static_cast<std::int32_t>(v[e]);
      arrays.append(a);
    } else {
      py::array_t<float> a(specs[i].shape);
      for (std::size_t e = 0; e < v.size(); ++e) a.mutable_data()[e] = static_cast<float>(v[e]);
      arrays.append(a);
    }
  }
  return arrays;
}

/// What a Python kernel or reference returned (an array, or a list of them)
/// as whole outputs, row-major.
output_values outputs_of(const py::object& result) {
  output_values out;
  const auto add = [&](const py::handle& h) {
    const auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(h);
    if (!a) throw error("a gated Python kernel returns numpy arrays (one per declared output)");
    out.emplace_back(a.data(), a.data() + a.size());
  };
  if (py::isinstance<py::list>(result) || py::isinstance<py::tuple>(result)) {
    for (const auto& h : result) add(h);
  } else {
    add(result);
  }
  return out;
}

/// A gated Python kernel (tessel.gated): kernel(config: dict, inputs: list of
/// arrays) -> arrays, reference(inputs) -> arrays; tessel times and judges
/// every call (callback_gate).
std::shared_ptr<backend> python_gated_backend(py::function kernel, py::function reference,
                                              const std::string& inputs, const std::string& outputs,
                                              const std::string& flops,
                                              const std::string& min_bytes, std::size_t timed_calls,
                                              std::uint64_t secret, double tolerance_scale) {
  callback_gate g;
  g.inputs = inputs;
  g.outputs = outputs;
  g.flops = flops;
  g.min_bytes = min_bytes;
  g.timed_calls = timed_calls;
  g.gate.secret = secret;
  g.gate.tolerance_scale = tolerance_scale;
  auto specs = std::make_shared<std::vector<tensor_spec>>();
  g.reference = [reference, specs](const std::vector<std::vector<double>>& in) {
    py::gil_scoped_acquire gil;
    return outputs_of(reference(arrays_of(*specs, in)));
  };
  auto call = [kernel = std::move(kernel), specs](const space& s, const config& c,
                                                  std::span<const hidden_input> in) {
    py::gil_scoped_acquire gil;
    if (specs->empty())
      for (const auto& t : in) specs->push_back(t.spec());
    std::vector<std::vector<double>> values;
    for (const auto& t : in) values.push_back(t.values());
    const auto json_mod = py::module_::import("json");
    return outputs_of(kernel(json_mod.attr("loads")(s.to_json(c)), arrays_of(*specs, values)));
  };
  callback_options o;
  o.name = "python (gated)";
  return std::make_shared<callback_backend>(callback_backend::kernel_function(call), std::move(g),
                                            o);
}

/// The space of a .tsl or replay file (read_space), or of .tsl text.
space load(const std::string& path, const std::string& text, const std::string& name,
           const std::string& target, const std::map<std::string, std::string>& sets) {
  study_spec spec;
  spec.file = text.empty() ? path : "<text>";
  spec.space = name;
  spec.target = target;
  spec.sets.insert(sets.begin(), sets.end());
  if (text.empty()) return read_space(spec).space;
  return parse_space(text, space_parse_options(spec.file, spec), name);
}

json configs_json(const space& s, const std::vector<config>& cs) {
  json out = json::array();
  for (const auto& c : cs) out.push_back(json::parse(s.to_json(c)));
  return out;
}

/// The config `text` names (parameters left out take their defaults).
config config_of(const space& s, const std::string& text) { return s.from_partial_json(text); }

/// A study opened by the driver from the spec Python built, with the agent
/// ops every method goes through.
struct py_study {
  opened_study opened;
  std::unique_ptr<agent_ops> ops;
  bool read_space = false;         ///< the driver read the space again, for the backend's target
  std::vector<std::string> notes;  ///< what a resume took from the study file (resume_as_given)

  std::string call(const std::string& op, const std::string& args) {
    const auto parsed = parse_json(args, op);
    py::gil_scoped_release release;
    return dump(ops->call(op, parsed));
  }
  std::string run(const stop_condition& until) {
    {
      py::gil_scoped_release release;
      opened.study->run(until);
    }
    return dump(ops->call("summary", json::object()));
  }
  /// Until the study's own stop condition (a joined study: its budget).
  std::string run_budget() { return run(opened.until()); }
};

/// open_options::resuming for tessel.Study(resume=True): the options of the
/// spec the caller left out (not in `given`, fields of study_spec::to_json)
/// are taken from the study file (take_recorded); `notes` says what was taken
/// and what the caller gave that differs.
std::function<void(study_spec&, const study_spec&)> resume_as_given(
    std::vector<std::string> given, std::vector<std::string>& notes) {
  return [given = std::move(given), &notes](study_spec& spec, const study_spec& recorded) {
    const auto said = [&given](const recorded_field& r) {
      if (r.evaluates) return option_said::cannot;  // the caller's backend, or none
      return std::find(given.begin(), given.end(), r.field) != given.end() ? option_said::given
                                                                           : option_said::left_out;
    };
    auto more = resume_notes(take_recorded(spec, recorded, said), keyword_text, ", ", "this study");
    notes.insert(notes.end(), more.begin(), more.end());
  };
}

/// `s`: the space (None: the driver reads the spec's file); `spec`: a
/// study_spec's JSON (python/tessel/__init__.py builds it);
/// `backend`: None (the spec's backend, or none) or a Python callable;
/// `given`: the spec's fields the caller gave (on resume the others are
/// taken from the study file).
std::unique_ptr<py_study> make_study(const std::optional<space>& s, const std::string& spec,
                                     py::object backend, bool resume,
                                     std::vector<std::string> given) {
  auto out = std::make_unique<py_study>();
  open_options o;
  o.mode = resume ? open_mode::resume : open_mode::create;
  o.resuming = resume_as_given(std::move(given), out->notes);
  o.space = s;  // none: the driver reads spec.file
  if (py::isinstance<py::function>(backend)) {
    o.backend = python_backend(backend.cast<py::function>(), "python");
    o.backend_label = "python";
  } else if (py::isinstance<tessel::backend>(backend)) {  // tessel.gated(...)
    o.backend = backend.cast<std::shared_ptr<tessel::backend>>();
    o.backend_label = o.backend->name();
  } else if (!backend.is_none()) {
    throw error(
        "backend: give None (you measure and tell), a spec such as \"sim\" or "
        "\"replay:PATH\", or a Python callable config -> seconds");
  }
  auto parsed = study_spec::from_json(parse_json(spec, "Study"));
  // A space loaded without a target was read for trn2: a study whose backend
  // implies another (cpu) reads its file again for that one, as the CLI does.
  if (s && parsed.target.empty() && !parsed.file.empty() &&
      parsed.resolved().target != s->def().target.name)
    o.space.reset();
  out->read_space = !o.space;
  out->opened = with_keywords("tessel.Study", study_keywords,
                              [&] { return open_study(std::move(parsed), std::move(o)); });
  out->ops =
      std::make_unique<agent_ops>(*out->opened.study, out->opened.backend, out->opened.evaluates);
  return out;
}

/// One more worker of the shared study at `url` (docs/distributed.md):
/// join_study's request, with this process's backend, settings and jobs.
std::unique_ptr<py_study> join_shared(const std::string& url, const std::string& backend,
                                      const std::map<std::string, std::string>& settings,
                                      std::size_t jobs, std::optional<std::uint64_t> seed,
                                      double wait_s, const std::string& name) {
  join_request r;
  r.url = url;
  r.backend = backend;
  r.backend_settings = settings_map(settings.begin(), settings.end());
  r.jobs = jobs;
  r.seed = seed;
  r.wait_s = wait_s;
  r.worker.name = name;
  auto joined = [&] {
    py::gil_scoped_release release;  // it may wait for the study to be created
    return join_study(r);
  }();
  auto out = std::make_unique<py_study>();
  out->opened = std::move(joined.opened);
  out->ops =
      std::make_unique<agent_ops>(*out->opened.study, out->opened.backend, out->opened.evaluates);
  return out;
}

}  // namespace
}  // namespace tessel::python

PYBIND11_MODULE(_tessel, m) {
  using namespace tessel;
  using namespace tessel::python;
  m.doc() = "tessel's native part; use the tessel package";
  // tessel.Error, raised by the translator below (not register_exception's,
  // whose own translator this one would hide): its message may quote user
  // text that is not UTF-8 (a .tsl line, a --set value), replaced by U+FFFD,
  // where pybind11's own translation raised a UnicodeDecodeError instead.
  static const py::exception<tessel::error> error_type(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const tessel::error& e) {
      const std::string_view what = e.what();
      const auto text = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(what.data(), static_cast<Py_ssize_t>(what.size()), "replace"));
      PyErr_SetObject(error_type.ptr(), text.ptr());
    }
  });

  py::class_<space>(m, "Space")
      .def_property_readonly("name", [](const space& s) { return s.name(); })
      .def("count", &space::count)
      .def("describe", [](const space& s) { return dump(space_json(s)); })
      .def("sample",
           [](const space& s, std::size_t n, std::uint64_t seed) {
             rng random(seed);
             std::vector<config> cs;
             for (std::size_t i = 0; i < n; ++i) cs.push_back(s.sample(random));
             return configs_json(s, cs).dump();
           })
      .def("at", [](const space& s, std::uint64_t r) { return s.to_json(s.at(r)); })
      .def("rank", [](const space& s, const std::string& c) { return s.rank(config_of(s, c)); })
      .def("why_invalid",
           [](const space& s, const std::string& c) { return s.why_invalid(config_of(s, c)); })
      .def("complete",
           [](const space& s, const std::string& c) { return s.to_json(config_of(s, c)); })
      .def("default_config",
           [](const space& s) -> std::optional<std::string> {
             const auto c = s.default_config();
             return c ? std::optional<std::string>(s.to_json(*c)) : std::nullopt;
           })
      .def("encode", [](const space& s, const std::string& c) { return s.encode(config_of(s, c)); })
      .def("neighbours",
           [](const space& s, const std::string& c) {
             return configs_json(s, s.neighbours(config_of(s, c))).dump();
           })
      .def("first",
           [](const space& s, std::size_t n) {
             std::vector<config> cs;
             for (const auto& c : s.configs()) {
               if (cs.size() == n) break;
               cs.push_back(c);
             }
             return configs_json(s, cs).dump();
           })
      .def("key", [](const space& s, const std::string& c) { return s.key(config_of(s, c)); })
      .def("explain", [](const space& s, const std::string& c, const std::string& spec) {
        const auto sim = simulator_for(s, spec);
        const auto cfg = config_of(s, c);
        if (const auto why = s.why_invalid(cfg); !why.empty())
          throw error("explain: config is not valid: " + why);
        return dump(explanation_json(sim->analyse(s, cfg), s, cfg));
      });

  m.def(
      "study_report",
      [](const std::string& db, const std::string& format, const std::string& plot,
         std::size_t top) {
        return study_report(reopen_study(db), {format, plot, top, db});
      },
      py::arg("db"), py::arg("format"), py::arg("plot"), py::arg("top"));

  // `tessel check` and `tessel show` (tessel/space_check.hpp, tessel/driver.hpp).
  m.def(
      "check",
      [](const std::string& spec, std::size_t samples, std::uint64_t seed,
         const std::string& backend, const std::map<std::string, std::string>& backend_set) {
        const auto parsed = study_spec::from_json(parse_json(spec, "Study"));
        const auto loaded = read_space(parsed);
        std::optional<backend_review> review;
        if (!backend.empty())
          review = review_backend(loaded.space, backend, {backend_set.begin(), backend_set.end()});
        return check_json(loaded, {parsed.file, samples, seed, std::move(review)})
            .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      },
      py::arg("spec"), py::arg("samples"), py::arg("seed"), py::arg("backend"),
      py::arg("backend_set"));
  m.def(
      "show",
      [](const std::string& db, std::size_t top) {
        const auto stored = reopen_study(db);
        return dump(overview_of(stored, top).to_json(stored));
      },
      py::arg("db"), py::arg("top"));

  // A model (tessel/model_driver.hpp): `spec` is a model_spec's JSON.
  m.def(
      "model_step",
      [](const std::string& spec) {
        return with_keywords("tessel.Model.step", model_keywords, [&] {
          return dump(default_step_json(model_spec::from_json(parse_json(spec, "Model"))));
        });
      },
      py::arg("spec"));
  m.def(
      "model_step_text",
      [](const std::string& spec) {
        return with_keywords("tessel.Model.step_text", model_keywords, [&] {
          return model_step(model_spec::from_json(parse_json(spec, "Model"))).text();
        });
      },
      py::arg("spec"));
  m.def(
      "tune_model",
      [](const std::string& spec) {
        return with_keywords("tessel.Model.tune", model_keywords, [&] {
          auto tuning = open_model_tuning(model_spec::from_json(parse_json(spec, "Model")));
          tuning.run();
          return dump(tuning.to_json());
        });
      },
      py::arg("spec"));

  m.def("load", &load, py::arg("path"), py::arg("text"), py::arg("name"), py::arg("target"),
        py::arg("sets"));

  py::class_<backend, std::shared_ptr<backend>>(m, "Backend")
      .def_property_readonly("name", [](const backend& b) { return b.name(); });
  m.def("gated_callback", &python_gated_backend, py::arg("kernel"), py::arg("reference"),
        py::arg("inputs"), py::arg("outputs"), py::arg("flops"), py::arg("min_bytes"),
        py::arg("timed_calls"), py::arg("secret"), py::arg("tolerance_scale"));

  py::class_<stop_condition>(m, "Stop")
      .def("__or__", [](const stop_condition& a, const stop_condition& b) { return a || b; })
      .def("__and__", [](const stop_condition& a, const stop_condition& b) { return a && b; });
  auto st = m.def_submodule("stop", "stop conditions, composable with | and &");
  st.def("evaluations", &stop::evaluations);
  st.def("wall_seconds", &stop::wall_seconds);
  st.def("cost_seconds", &stop::cost_seconds);
  st.def("target", &stop::target);
  st.def("no_improvement", &stop::no_improvement);
  st.def("tokens", &stop::tokens);

  py::class_<py_study>(m, "Study")
      .def(py::init(&make_study), py::arg("space"), py::arg("spec"), py::arg("backend"),
           py::arg("resume"), py::arg("given"))
      .def_static("join", &join_shared, py::arg("url"), py::arg("backend"), py::arg("settings"),
                  py::arg("jobs"), py::arg("seed"), py::arg("wait"), py::arg("name"))
      .def("read_space", [](const py_study& s) { return s.read_space; })
      .def("notes", [](const py_study& s) { return s.notes; })
      .def("space", [](const py_study& s) { return s.opened.study->space(); })
      .def("call", &py_study::call)
      .def("run", &py_study::run)
      .def("run_budget", &py_study::run_budget)
      .def("report", [](const py_study& s) { return s.ops->report_text(); });
}
