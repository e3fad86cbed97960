"""Benchmark of the evaluation suite on an Adult-sized pair (target: under 2 minutes).

    python -m simulations.bench_evaluate                                    # Adult vs a permuted copy
    python -m simulations.bench_evaluate synthetic=runs/vflgan-adult/synthetic.csv
    python -m simulations.bench_evaluate evaluation.cv_folds=10             # the paper's CV

Evaluates ``real`` (default: the bundled Adult table, 48,842 rows) against ``synthetic``
(default ``permuted``: the real table with every column permuted on its own, which has
the real marginals and no dependence) with every metric group of the ``evaluation``
node, and prints the seconds each group took. The last line is one JSON object with
``seconds`` per group, ``total_seconds`` (the suite, without reading files or plotting)
and ``within_target`` (``total_seconds`` < 120 with ``cv_folds=0``, issue 3's target on
2 cores). Any ``simulations.evaluate`` key can be overridden.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd
from hydra import compose, initialize_config_module

from flwr_vflgan.data.partition import partition_columns
from flwr_vflgan.evaluation import evaluate_tables
from flwr_vflgan.simulations.config import register_configs, to_evaluate_spec
from flwr_vflgan.simulations.evaluate import load_other, load_real

TARGET_SECONDS = 120.0


def permuted(frame: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Every column permuted independently (real marginals, no dependence)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({c: frame[c].to_numpy()[rng.permutation(len(frame))] for c in frame})


def main(argv: list[str]) -> dict:
    """Run the benchmark with Hydra-style ``key=value`` overrides."""
    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        cfg = compose("evaluate", overrides=["real=adult", "synthetic=permuted", *argv])
    spec, config = to_evaluate_spec(cfg)
    real = load_real(spec)
    synthetic = (
        permuted(real.frame)
        if spec.synthetic == "permuted"
        else load_other(spec.synthetic, "synthetic")
    )
    parties = partition_columns(real.schema.names, spec.n_parties or 2, strategy="even")
    started = time.perf_counter()
    evaluation = evaluate_tables(real.frame, synthetic, real.schema, config=config, parties=parties)
    total = time.perf_counter() - started
    for group, seconds in evaluation.seconds.items():
        print(f"{group:12s} {seconds:7.1f} s")
    result = {
        "real": spec.real,
        "synthetic": spec.synthetic,
        "rows": len(real.frame),
        "cv_folds": config.cv_folds,
        "seconds": evaluation.seconds,
        "total_seconds": round(total, 2),
        "target_seconds": TARGET_SECONDS,
        "within_target": bool(total < TARGET_SECONDS) if config.cv_folds == 0 else None,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
