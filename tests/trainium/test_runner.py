"""Unit tests of the runner's racing rule and median interval (run by ctest
as trainium_runner; plain asserts, no pytest needed)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from tessel_trainium.runner import median, median_interval, race_decision  # noqa: E402

options = {"min_repeats": 4, "max_repeats": 10, "margin": 0.0, "target_relative_ci": 0.02}
assert race_decision([1.0] * 3, None, options) == "continue"
assert race_decision([1.0] * 4, None, options) == "tight_interval"
assert race_decision([2.0, 2.1, 2.0, 2.05], 1.0, options) == "slower_than_incumbent"
assert race_decision([0.5, 0.52, 0.5, 0.51], 1.0, options) == "faster_than_incumbent"
assert race_decision([0.9, 1.1, 0.95, 1.05], 1.0, options) == "continue"  # might beat it
assert race_decision([0.9, 1.1] * 5, 1.0, options) == "max_repeats"
assert median([3, 1, 2]) == 2 and median([4, 1, 2, 3]) == 2.5
lo, hi = median_interval(list(range(1, 21)))
assert (lo, hi) == (6, 15), (lo, hi)  # the same order statistics as tessel's C++ side
print("runner racing: ok")
