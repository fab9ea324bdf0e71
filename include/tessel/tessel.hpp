// tessel/tessel.hpp: the umbrella header, every public header of tessel.
// Link tessel::tessel. Prefer the specific headers in library code: each
// public header compiles on its own (tests/headers/ checks both, and that this
// list names every header under include/tessel/).
#pragma once

#include <tessel/backend.hpp>
#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
#include <tessel/calibration.hpp>
#include <tessel/codec.hpp>
#include <tessel/config.hpp>
#include <tessel/constraints.hpp>
#include <tessel/cpu.hpp>
#include <tessel/cpu_kernel.hpp>
#include <tessel/did_you_mean.hpp>
#include <tessel/driver.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/expr.hpp>
#include <tessel/fidelity.hpp>
#include <tessel/files.hpp>
#include <tessel/gate.hpp>
#include <tessel/hash.hpp>
#include <tessel/interactions.hpp>
#include <tessel/loop_rule.hpp>
#include <tessel/measurement.hpp>
#include <tessel/model.hpp>
#include <tessel/model_driver.hpp>
#include <tessel/ops.hpp>
#include <tessel/race_rule.hpp>
#include <tessel/racing.hpp>
#include <tessel/random.hpp>
#include <tessel/report.hpp>
#include <tessel/roofline.hpp>
#include <tessel/settings.hpp>
#include <tessel/sim.hpp>
#include <tessel/space.hpp>
#include <tessel/space_check.hpp>
#include <tessel/storage.hpp>
#include <tessel/strategies.hpp>
#include <tessel/strategy.hpp>
#include <tessel/study.hpp>
#include <tessel/surrogate.hpp>
#include <tessel/target.hpp>
#include <tessel/text.hpp>
#include <tessel/trainium.hpp>
#include <tessel/trial.hpp>
