"""tessel's device-side runner for the `trainium` backend (docs/trainium.md).

One process per request: tessel writes one JSON object on stdin, the runner
answers with one JSON object as the last line of stdout. Tensors travel as
.npy files (paths in the request), or inline as base64 .npy when the request
says so (remote hosts over ssh). Anything the kernel prints goes to stderr, so
it can never forge the answer line.

Operations ("op"):
  compile    compile the kernel for one config (cached by config key and
             source hash); answers compile_s and whether the cache hit.
  run        run the kernel once on the given inputs and write its outputs.
  time       warm up, then time the kernel with adaptive repeats (racing
             against tessel's incumbent); answers every sample in seconds.
  reference  run the reference function on the given inputs (never in the
             same process as a kernel) and write its outputs.

Answer: {"status": "ok" | "compile_error" | "runtime_error" |
"out_of_memory", "message": str, ...op-specific fields}. A timeout is not
the runner's to report: tessel kills the process group and records it.
"""

import base64
import hashlib
import importlib.util
import io
import json
import math
import os
import sys
import time
import traceback

PROTOCOL = 1


def _answer(channel, payload):
    payload.setdefault("protocol", PROTOCOL)
    channel.write(json.dumps(payload) + "\n")
    channel.flush()


def _load_function(spec, what):
    """'path/to/file.py:name' -> (function, source bytes)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"{what} must be FILE.py:FUNCTION, got {spec!r}")
    with open(path, "rb") as f:
        source = f.read()
    module_name = "_tessel_" + what + "_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    spec_ = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec_)
    sys.modules[module_name] = module
    spec_.loader.exec_module(module)
    if not hasattr(module, name):
        raise ValueError(f"{path} has no function {name!r}")
    return getattr(module, name), source


def _numpy():
    import numpy

    return numpy


def _dtype(name):
    np = _numpy()
    if name in ("bfloat16", "bf16"):
        try:
            import ml_dtypes  # shipped with the Neuron SDK

            return ml_dtypes.bfloat16
        except ImportError:
            return np.float32
    known = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "fp8_e4m3": np.float32,
             "fp8_e5m2": np.float32}
    return known[name] if name in known else np.dtype(name)


def _read_inputs(request):
    np = _numpy()
    arrays = []
    for spec in request.get("inputs", []):
        if "npy_base64" in spec:
            array = np.load(io.BytesIO(base64.b64decode(spec["npy_base64"])), allow_pickle=False)
        else:
            array = np.load(spec["path"], allow_pickle=False)
        if "dtype" in spec:
            array = array.astype(_dtype(spec["dtype"]))
        arrays.append(array)
    return arrays


def _write_outputs(request, produced):
    """Writes the kernel's (or reference's) outputs as float32/int32 .npy."""
    np = _numpy()
    declared = request.get("outputs", [])
    if not isinstance(produced, (tuple, list)):
        produced = [produced]
    if len(produced) != len(declared):
        raise RuntimeError(f"returned {len(produced)} outputs, expected {len(declared)}")
    written = []
    for spec, value in zip(declared, produced):
        array = np.asarray(value)
        array = array.astype(np.int32 if array.dtype.kind in "iu" else np.float32)
        if list(array.shape) != list(spec["shape"]):
            raise RuntimeError(
                f"output {spec['name']} has shape {list(array.shape)}, expected {spec['shape']}"
            )
        entry = {"name": spec["name"], "shape": list(array.shape)}
        if request.get("inline"):
            buffer = io.BytesIO()
            np.save(buffer, array, allow_pickle=False)
            entry["npy_base64"] = base64.b64encode(buffer.getvalue()).decode()
        else:
            np.save(spec["path"], array, allow_pickle=False)
            entry["path"] = spec["path"]
        written.append(entry)
    return written


def _classify(error):
    """(status, message) for an exception out of the NKI stack or the kernel."""
    text = f"{type(error).__name__}: {error}"
    lowered = text.lower()
    if isinstance(error, MemoryError) or "out of memory" in lowered or "oom" in lowered.split():
        return "out_of_memory", text
    return "runtime_error", text


# --- compile cache -------------------------------------------------------------


def cache_key(config_key, source, constants):
    digest = hashlib.sha256()
    digest.update(source)
    digest.update(json.dumps(constants, sort_keys=True).encode())
    return f"{config_key}-{digest.hexdigest()[:16]}"


def _compile(request, adapter, kernel, source, arrays):
    """(compile_s, cached, neff_path). Raises adapter.CompileError."""
    cache_dir = request.get("cache_dir") or os.path.join(os.getcwd(), ".tessel-neff-cache")
    os.makedirs(cache_dir, exist_ok=True)
    key = cache_key(request.get("config_key", "0"), source, request.get("constants", {}))
    neff = os.path.join(cache_dir, key + ".neff")
    failed = os.path.join(cache_dir, key + ".compile_error")
    if os.path.exists(failed):
        with open(failed) as f:
            raise adapter.CompileError(f.read())
    if os.path.exists(neff):
        return 0.0, True, neff
    started = time.perf_counter()
    try:
        adapter.compile(kernel, arrays, request.get("constants", {}), neff + ".tmp")
    except adapter.CompileError as e:
        with open(failed, "w") as f:
            f.write(str(e))
        raise
    os.replace(neff + ".tmp", neff)
    return time.perf_counter() - started, False, neff


# --- racing --------------------------------------------------------------------


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def median_interval(values, z=1.96):
    """Distribution-free ~95% confidence interval of the median: the order
    statistics at n/2 -+ z sqrt(n)/2 (Conover, Practical Nonparametric
    Statistics, 3rd ed., sec. 3.2). Same rule as tessel's C++ side."""
    ordered = sorted(values)
    n = len(ordered)
    half = z * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    return ordered[lo], ordered[max(lo, hi)]


def race_decision(samples, incumbent, options):
    """'continue' or why to stop: a port of tessel's race_decision
    (include/tessel/race_rule.hpp; tests/trainium/racing_agreement_test.cpp
    checks that the two agree). After min_repeats: stop when the interval of
    the median lies above the incumbent (clearly slower), or below it with
    enough repeats, or when no incumbent is given and the interval is tight;
    keep measuring while the interval straddles the incumbent (it might beat
    it), up to max_repeats."""
    n = len(samples)
    if n >= options["max_repeats"]:
        return "max_repeats"
    if n < options["min_repeats"]:
        return "continue"
    lo, hi = median_interval(samples)
    if incumbent is not None and incumbent > 0:
        if lo > incumbent * (1 + options.get("margin", 0.0)):
            return "slower_than_incumbent"
        if hi < incumbent:
            return "faster_than_incumbent"
        return "continue"
    centre = median(samples)
    if centre > 0 and (hi - lo) / centre <= options.get("target_relative_ci", 0.02):
        return "tight_interval"
    return "continue"


def _time(request, adapter, kernel, arrays, neff):
    options = {
        "min_repeats": int(request.get("min_repeats", 5)),
        "max_repeats": int(request.get("max_repeats", 30)),
        "margin": float(request.get("margin", 0.0)),
        "target_relative_ci": float(request.get("target_relative_ci", 0.02)),
    }
    max_seconds = float(request.get("max_seconds", 0.0))
    incumbent = request.get("incumbent_s")
    batch = int(request.get("iters_per_sample", 10))
    constants = request.get("constants", {})
    adapter.warm_up(kernel, arrays, constants, neff, int(request.get("warmup", 3)))
    samples, outputs = [], None
    started = time.perf_counter()
    while True:
        decision = race_decision(samples, incumbent, options)
        if decision != "continue":
            return samples, decision, outputs
        if max_seconds > 0 and samples and time.perf_counter() - started >= max_seconds:
            return samples, "time_limit", outputs
        seconds, outputs = adapter.sample_latency_s(kernel, arrays, constants, neff, batch)
        samples.append(seconds)


# --- the request ---------------------------------------------------------------


def _load_adapter():
    from tessel_trainium import nki_adapter

    return nki_adapter


def serve(request, channel):
    op = request.get("op")
    if op not in ("compile", "run", "time", "reference"):
        _answer(channel, {"status": "runtime_error", "message": f"unknown op {op!r}"})
        return
    if op == "reference":
        try:
            reference, _ = _load_function(request["reference"], "reference")
            arrays = _read_inputs(request)
            produced = reference(*arrays)
            _answer(channel, {"status": "ok", "outputs": _write_outputs(request, produced)})
        except Exception as e:  # the reference's failure is data too
            _answer(channel, {"status": "runtime_error", "message": "reference: " + str(e)})
        return
    adapter = _load_adapter()
    try:
        kernel, source = _load_function(request["kernel"], "kernel")
        arrays = _read_inputs(request)
    except Exception as e:
        _answer(channel, {"status": "compile_error", "message": f"{type(e).__name__}: {e}"})
        return
    try:
        compile_s, cached, neff = _compile(request, adapter, kernel, source, arrays)
    except adapter.CompileError as e:
        _answer(channel, {"status": "compile_error", "message": str(e)})
        return
    except Exception as e:
        status, message = _classify(e)
        _answer(channel, {"status": "compile_error" if status == "runtime_error" else status,
                          "message": message})
        return
    answer = {"status": "ok", "compile_s": compile_s, "compile_cached": cached}
    try:
        if op == "run":
            produced = adapter.run(kernel, arrays, request.get("constants", {}), neff)
            answer["outputs"] = _write_outputs(request, produced)
        elif op == "time":
            samples, decision, produced = _time(request, adapter, kernel, arrays, neff)
            answer["samples_s"] = samples
            if produced is not None and request.get("outputs"):
                # what the timed calls computed: tessel checks it too, so a
                # kernel cannot be correct in the gate and skip work when timed
                answer["outputs"] = _write_outputs(request, produced)
            answer["stopped"] = decision
            answer["latency_source"] = adapter.LATENCY_SOURCE
    except Exception as e:
        status, message = _classify(e)
        answer = {"status": status, "message": message,
                  "compile_s": compile_s, "compile_cached": cached,
                  "traceback": traceback.format_exc(limit=5)}
    _answer(channel, answer)


def main():
    # The answer goes to the original stdout; whatever the kernel or the NKI
    # stack prints goes to stderr (tessel keeps its tail).
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        request = json.loads(sys.stdin.read())
    except Exception as e:
        _answer(channel, {"status": "runtime_error", "message": f"bad request: {e}"})
        return 2
    serve(request, channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
