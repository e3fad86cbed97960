"""The command line's one reporter: progress lines and the final summary (stdout)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from .config import RunSpec


class Reporter:
    """Prints a run's progress; the only place the command-line tools print."""

    def __init__(self, spec: RunSpec, stream: TextIO | None = None) -> None:
        self.spec = spec
        self.stream = stream or sys.stdout

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def start(self) -> None:
        """Announce the run."""
        s = self.spec
        t = s.algorithm.train
        steps = f", max_steps={t.max_steps}" if t.max_steps else ""
        self._print(
            f"flwr-vflgan: {s.algorithm.variant.value} on {s.data.source}, {s.data.n_parties} parties, "
            f"runtime={s.runtime.kind}, epochs={t.epochs}{steps}, seed={s.seed}\n"
            f"run directory: {s.run_dir}"
        )

    def progress(self, record: dict[str, float]) -> None:
        """One line per evaluation."""
        self._print(
            f"epoch {int(record['epoch']):4d}  step {int(record['step']):7d}/{int(record['total_steps'])}  "
            f"FD {record['fd']:.4f}  best {record['best_fd']:.4f}  {record['elapsed']:.0f}s"
        )

    def finish(self, metrics: dict[str, Any]) -> None:
        """The summary after the outputs were written."""
        best = metrics["best_epoch"]
        self._print(
            f"done in {metrics['wall_seconds']:.0f}s: {metrics['steps']} steps, {metrics['exchanges']} exchanges; "
            f"best epoch {best}; FD of synthetic.csv {metrics['fd']:.4f}\n"
            f"wrote {self.spec.run_dir / 'synthetic.csv'} ({metrics['synthetic_rows']} rows), metrics.json, config.json"
        )
