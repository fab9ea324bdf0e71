"""A model's step and its tuning from Python (docs/models.md): where the Qwen3 MoE
layer's time goes, then a small budget across its kernels.

    PYTHONPATH=build/ci/python python3 examples/python_model.py --budget 20
"""
import argparse

import tessel

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="examples/models/qwen3_moe_layer.tsl")
parser.add_argument("--budget", type=int, default=20)
args = parser.parse_args()

model = tessel.Model(args.model)
step = model.step()
print(f"{step['model']} on {step['target']}: step {step['step_s'] * 1e3:.3f} ms at the defaults")
for k in sorted(step["kernels"], key=lambda k: -k["share"])[:3]:
    print(f"  {k['name']:<10} {k['calls']:>3} calls  {k['share']:6.1%} of the step")

tuned = model.tune(budget=args.budget, seed=1, db_dir=False)
print(f"tuned with {tuned['evaluations']} evaluations: "
      f"{tuned['before_s'] * 1e3:.3f} ms -> {tuned['after_s'] * 1e3:.3f} ms")
for k in tuned["kernels"]:
    if k["best_s"] < k["first_s"]:
        print(f"  {k['name']:<10} {k['evaluations']:>2} evaluations  "
              f"{k['first_s'] * 1e6:8.1f} us -> {k['best_s'] * 1e6:8.1f} us")
