"""MaxText's `train_compile`, plus what the sharding advice needs from the same compile.

    python -m launcher.preflight.aot_probe <MaxText argv>   (env LAUNCHER_AOT_PROBE_OUT=<dir>)

Runs `maxtext.trainers.pre_train.train_compile` unchanged (it prints XLA's memory and cost
analysis) and, around its `jit_and_compile`, writes into the output directory:
  - optimized.hlo: the compiled program's optimized HLO (collectives, loop trip counts);
  - analytic.json: MaxText's own per-device training TFLOPs for one step, and the TFLOPs its
    remat policy adds, and the model's dimensions (see remat_costs).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

OUT_ENV = "LAUNCHER_AOT_PROBE_OUT"


def main() -> None:
    from absl import app

    from launcher.core.maxtext.deferred_imports import maxtext_imports

    with maxtext_imports():
        from maxtext.trainers.pre_train import train_compile

    out = Path(os.environ[OUT_ENV])
    compile_step = train_compile.jit_and_compile

    def capture(*args, **kwargs):
        compiled = compile_step(*args, **kwargs)
        (out / "optimized.hlo").write_text(compiled.as_text())
        # MaxText's config, bound by name whichever way train_compile passed it.
        config = inspect.signature(compile_step).bind(*args, **kwargs).arguments["config"]
        try:
            from maxtext.utils import maxtext_utils

            from launcher.preflight.remat_costs import ModelDims

            total, weights, attention = maxtext_utils.calculate_tflops_training_per_device(
                config, log=False
            )
            analytic = {"tflops": total, "weight_tflops": weights, "attention_tflops": attention}
            dims = ModelDims.of(config)
            analytic["remat_tflops"] = dims.remat_flops() / 1e12
            analytic["model_dims"] = asdict(dims)
            (out / "analytic.json").write_text(json.dumps(analytic))
        except Exception as e:  # no compute term then: the advice leaves this split unranked
            (out / "analytic.json").write_text(json.dumps({"error": repr(e)}))
        return compiled

    train_compile.jit_and_compile = capture
    app.run(train_compile.main, argv=[sys.argv[0], *sys.argv[1:]])


if __name__ == "__main__":
    main()
