"""The one place the runner touches the NKI stack (neuronxcc.nki). Kept thin:
everything else in the runner is plain Python that tessel's tests exercise.

APIs read (docs/trainium.md cites the pages):
  - nki.baremetal(kernel, save_neff_name=...): compile and run a kernel on
    numpy arrays on the local NeuronCore; returns the kernel's outputs.
  - nki.benchmark(kernel, warmup=W, iters=N, save_neff_name=...): the same,
    through neuron-bench; afterwards `kernel.benchmark_result.nc_latency`
    holds the latency statistics, read with get_latency_percentile(50)
    (microseconds). One sample = the p50 of one batch of N iterations.
  - compile only (no device): neuronxcc.nki.compiler.backends.neuron.
    NumpyKernel.BaremetalKernel with execute_neff overridden to stop after
    the NEFF is written. This class is internal to neuronxcc; when it is
    missing the runner falls back to compiling inside the first device run
    (compile_s then 0, recorded as such).
Config values reach the kernel as keyword arguments (compile-time constants:
NKI traces the Python function, so a keyword is a constant of the NEFF).
"""

import os
import shutil

LATENCY_SOURCE = "nki.benchmark: benchmark_result.nc_latency.get_latency_percentile(50) per batch"


class CompileError(Exception):
    """The NKI compiler rejected the kernel; the message is the compiler's."""


def _nki():
    try:
        from neuronxcc import nki  # Neuron SDK 2.x
    except ImportError:  # pragma: no cover - newer SDKs ship `nki` on its own
        import nki
    return nki


def _bind(kernel, constants):
    def bound(*arrays):
        return kernel(*arrays, **constants)

    bound.__name__ = getattr(kernel, "__name__", "kernel")
    bound.__wrapped__ = kernel
    return bound


def compile(kernel, arrays, constants, neff_path):
    """Writes the NEFF of kernel(*arrays, **constants) to neff_path."""
    try:
        from neuronxcc.nki.compiler.backends.neuron.NumpyKernel import BaremetalKernel
    except ImportError:
        with open(neff_path, "w") as f:  # compiled inside the device run instead
            f.write("deferred")
        return

    class _CompileOnly(BaremetalKernel):
        def execute_neff(self, neff, ir, boundargs):
            shutil.move(neff, neff_path)

    function = getattr(kernel, "func", kernel)
    try:
        _CompileOnly(func=_bind(function, constants), func_name=function.__name__,
                     kernel_return=True)(*arrays)
    except Exception as e:  # the compiler's message is the point
        raise CompileError(f"{type(e).__name__}: {e}") from e
    if not os.path.exists(neff_path):
        raise CompileError("the NKI compiler produced no NEFF")


def run(kernel, arrays, constants, neff_path):
    nki = _nki()
    function = getattr(kernel, "func", kernel)
    return nki.baremetal(_bind(function, constants), save_neff_name=neff_path + ".run")(*arrays)


def warm_up(kernel, arrays, constants, neff_path, iterations):
    if iterations > 0:
        sample_latency_s(kernel, arrays, constants, neff_path, iterations)


def sample_latency_s(kernel, arrays, constants, neff_path, iterations):
    """(seconds, outputs): one batch's p50, and what the timed call returned
    (None when this SDK's benchmark call returns nothing)."""
    nki = _nki()
    function = getattr(kernel, "func", kernel)
    bench = nki.benchmark(_bind(function, constants), warmup=0, iters=iterations,
                          save_neff_name=neff_path + ".bench")
    outputs = bench(*arrays)
    return bench.benchmark_result.nc_latency.get_latency_percentile(50) * 1e-6, outputs
