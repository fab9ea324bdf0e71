"""A stand-in for the Neuron compiler's Python package, for tessel's tests only
(never installed). It implements, with numpy, just the part of neuronxcc.nki
that tests/trainium/kernels.py and python/tessel_trainium/nki_adapter.py use,
plus the compiler's resource rules the tests need (tile partition dimension
<= 128) and a deterministic latency model, so the runner's compile, run,
timing and failure paths can be exercised without a NeuronCore."""
__version__ = "stand-in"
