"""The marginal baselines' benchmark (``python -m simulations.bench algorithm=aim
dp=end_to_end``): one synthesis at the run's budget, timed, with its rounds."""

from __future__ import annotations

import os
import time
from typing import Any

from omegaconf import DictConfig

from flwr_vflgan.runtime.party_data import load_full_table
from flwr_vflgan.simulations.config import to_run_spec
from flwr_vflgan.simulations.pipeline import train_marginals


def measure(cfg: DictConfig) -> dict[str, Any]:
    """Seconds of one AIM or MST synthesis on the run's dataset, and per selection."""
    spec = to_run_spec(cfg, os.getcwd())
    real = load_full_table(spec.data)[0]
    started = time.monotonic()
    result = train_marginals(spec, real)
    seconds = time.monotonic() - started
    summary = result.privacy[0]
    results = {
        "algorithm": spec.algorithm.variant.value,
        "dataset": spec.data.source,
        "rows": len(real.frame),
        "target_epsilon": summary["target_epsilon"],
        "seconds": seconds,
        "measurements": summary["steps"],
        "selections": summary["selections"],
        "seconds_per_selection": seconds / max(summary["selections"], 1),
    }
    print(
        f"{results['algorithm']} at epsilon {results['target_epsilon']:g}: {seconds:.1f} s, "
        f"{results['selections']} selections, {results['measurements']} noisy marginals",
        flush=True,
    )
    return results
