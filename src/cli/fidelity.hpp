// src/cli/fidelity.hpp: `--fidelity SPEC` (repeated, low first) and
// `--fidelity-set KEY=VALUE` for tune and serve, and the fidelity section of
// the tune report and `tessel show` (docs/fidelity.md).
#pragma once

#include <tessel/backends.hpp>
#include <tessel/fidelity.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::cli {

/// "SCHEME[:ARGUMENT][,KEY=VALUE...]" -> ("SCHEME:ARGUMENT", settings). After
/// the scheme, comma-separated pieces of the form NAME=VALUE (NAME of
/// letters, digits, '_', '.') are settings; the other pieces, commas
/// restored, are the argument: "sim:target=trn2" is the simulator with
/// target trn2, "replay:t.json,concurrency=2" a replay file with a setting.
[[nodiscard]] std::pair<std::string, backend_settings> split_fidelity_spec(std::string_view spec);

/// The multi-fidelity backend of two --fidelity specs (low, then high) and
/// the --fidelity-set options (warmup, z, min_agreement, audit_every,
/// promote_failures). `gate` false adds gate=false to simulator specs (--no-gate).
/// Throws tessel::error for another count of specs or a bad setting.
[[nodiscard]] std::shared_ptr<multi_fidelity_backend> make_fidelity_backend(
    const std::vector<std::string>& specs, const std::vector<std::string>& settings, bool gate);

/// The report section ("fidelity\n  low-fidelity evals ...").
[[nodiscard]] std::string fidelity_text(const multi_fidelity_stats& s);
[[nodiscard]] nlohmann::json fidelity_json(const multi_fidelity_stats& s);

}  // namespace tessel::cli
