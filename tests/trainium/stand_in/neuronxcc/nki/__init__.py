"""neuronxcc.nki, the stand-in: baremetal and benchmark run the kernel with
numpy; benchmark's latency comes from the ops' cost model (nanoseconds),
optionally with noise: TESSEL_STAND_IN_NOISE (relative standard deviation)."""
import os
import random

from . import language


class _latency:
    def __init__(self, us):
        self._us = us

    def get_latency_percentile(self, percentile):
        return self._us


class _result:
    def __init__(self, us):
        self.nc_latency = _latency(us)


def jit(func=None, **kwargs):
    return func if func is not None else (lambda f: f)


def _run(kernel, arrays):
    language._state.cost_ns = 0.0
    outputs = kernel(*arrays)
    return outputs, language._state.cost_ns


def baremetal(kernel=None, **kwargs):
    if kernel is None:
        return lambda k: baremetal(k, **kwargs)
    return lambda *arrays: _run(kernel, arrays)[0]


class _benchmarked:
    def __init__(self, kernel, warmup, iters):
        self.kernel, self.warmup, self.iters = kernel, warmup, iters
        self.benchmark_result = None

    def __call__(self, *arrays):
        outputs, cost_ns = _run(self.kernel, arrays)
        noise = float(os.environ.get("TESSEL_STAND_IN_NOISE", "0"))
        us = cost_ns / 1000.0 * max(0.05, 1 + random.gauss(0, noise))
        self.benchmark_result = _result(us)
        return outputs


def benchmark(kernel=None, warmup=2, iters=10, **kwargs):
    if kernel is None:
        return lambda k: benchmark(k, warmup=warmup, iters=iters, **kwargs)
    return _benchmarked(kernel, warmup, iters)
