"""The command line's one reporter: progress lines and the final summary (stdout)."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from flwr_vflgan.gan.schedule import describe_length
from flwr_vflgan.privacy.guarantee import against_parties_description, spent_description

from .config import RunSpec

BAR_WIDTH = 30
PLAIN_TICK_SECONDS = 60.0
"""Least time between two progress lines within an epoch when stdout is not a terminal."""


class Reporter:
    """Prints a run's progress; the only place the command-line tools print."""

    def __init__(self, spec: RunSpec, stream: TextIO | None = None) -> None:
        self.spec = spec
        self.stream = stream or sys.stdout
        self._bar_shown = False
        self._last_plain_tick = 0.0

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def start(self) -> None:
        """Announce the run, and keep the strategies' epoch log lines (which repeat the
        progress lines printed here) off the console; the log file still has them."""
        quiet_progress_records()
        s = self.spec
        if s.algorithm.is_gafm:
            g = s.algorithm.gafm
            steps = f", max_steps={g.max_steps}" if g.max_steps else ""
            self._print(
                f"flwr-vflgan: {s.algorithm.variant.value} on {s.data.source}, label party + "
                f"{s.data.n_parties} non-label part{'y' if s.data.n_parties == 1 else 'ies'}, "
                f"runtime={s.runtime.kind}, epochs={g.epochs}"
                f"{steps}, seeds {s.seed}..{s.seed + g.repetitions - 1}\n"
                f"run directory: {s.run_dir}"
            )
            return
        if s.algorithm.is_latent:
            la = s.algorithm.latent
            self._print(
                f"flwr-vflgan: latent_diffusion on {s.data.source}, {s.data.n_parties} "
                f"part{'y' if s.data.n_parties == 1 else 'ies'}, runtime={s.runtime.kind}, "
                f"autoencoders {la.ae_epochs} epochs, diffusion {la.diffusion_epochs} epochs, "
                f"seed={s.seed}\nrun directory: {s.run_dir}"
            )
            return
        if s.algorithm.is_dplt:
            d, dp = s.algorithm.dplt, s.algorithm.dp
            self._print(
                f"flwr-vflgan: dplt on {s.data.source}, {s.data.n_parties} parties, "
                f"runtime={s.runtime.kind}, {d.bins} bins, groups of {d.group_size} bits, "
                f"{d.latent_states} latent states, seed={s.seed}, pure epsilon-DP at epsilon "
                f"{dp.target_epsilon:g}\nrun directory: {s.run_dir}"
            )
            return
        t = s.algorithm.train
        steps = f", max_steps={t.max_steps}" if t.max_steps else ""
        dp = s.algorithm.dp
        privacy = (
            f", dp={dp.mechanism.value} (epsilon {dp.target_epsilon:g}, delta {dp.delta:g})"
            if dp.enabled
            else ""
        )
        self._print(
            f"flwr-vflgan: {s.algorithm.variant.value} on {s.data.source}, {s.data.n_parties} parties, "
            f"runtime={s.runtime.kind}, {describe_length(t)}{steps}, seed={s.seed}{privacy}\n"
            f"run directory: {s.run_dir}"
        )

    def progress(self, record: dict[str, float]) -> None:
        """One line per evaluation (VFLGAN family, GAFM) or per epoch's losses (VT-GAN);
        within a long epoch, a progress bar (ticks)."""
        if record.get("tick"):
            self._tick(record)
            return
        self._clear_bar()
        if "test_auc" in record:
            self._print(
                f"seed {int(record['seed']):3d}  epoch {int(record['epoch']):4d}/{int(record['epochs'])}  "
                f"test AUC {record['test_auc']:.4f}  leak AUC norm {record['leak_norm']:.3f} "
                f"cosine {record['leak_cosine']:.3f} mean {record['leak_mean']:.3f} "
                f"median {record['leak_median']:.3f} split {record['leak_median_split']:.3f}  "
                f"{record['elapsed']:.0f}s"
            )
            return
        if "diffusion_loss" in record:
            self._print(
                f"diffusion epoch {int(record['epoch']):4d}/{int(record['total_epochs'])}  "
                f"loss {record['diffusion_loss']:.4f}  {record['elapsed']:.0f}s"
            )
            return
        head = (
            f"epoch {int(record['epoch']):4d}  step {int(record['step']):7d}/"
            f"{int(record['total_steps'])}  "
        )
        if "fd" in record:
            body = f"FD {record['fd']:.4f}  best {record['best_fd']:.4f}"
        else:
            body = "  ".join(
                f"{k} {record[k]:.4f}" for k in ("d_loss", "g_loss", "cond_loss") if k in record
            )
        self._print(f"{head}{body}  {record['elapsed']:.0f}s")

    def _tick(self, record: dict[str, float]) -> None:
        """A bar redrawn in place on a terminal; elsewhere (a log, CI) a plain line at
        most every :data:`PLAIN_TICK_SECONDS`."""
        done, total, elapsed = int(record["step"]), int(record["total_steps"]), record["elapsed"]
        fraction = min(1.0, done / max(total, 1))
        eta = elapsed / fraction - elapsed if fraction > 0 else float("nan")
        text = (
            f"step {done:7d}/{total}  {100 * fraction:5.1f}%  {elapsed:.0f}s, about {eta:.0f}s left"
        )
        if self.stream.isatty():
            filled = round(BAR_WIDTH * fraction)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            self.stream.write(f"\r[{bar}] {text}")
            self.stream.flush()
            self._bar_shown = True
        elif elapsed - self._last_plain_tick >= PLAIN_TICK_SECONDS:
            self._last_plain_tick = elapsed
            self._print(text)

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self.stream.write("\r\033[K")
            self._bar_shown = False

    def _trained(self, metrics: dict[str, Any]) -> tuple[str, str]:
        """The summary's account of the training (steps and exchanges, or the one-round
        family's phases) and of the published model."""
        if self.spec.algorithm.is_marginal:
            return f"{metrics['steps']} marginals selected", ""
        if self.spec.algorithm.is_latent or self.spec.algorithm.is_dplt:
            phases = ", ".join(f"{k} {v:.0f}s" for k, v in metrics.get("phases", {}).items())
            return f"{metrics['exchanges']} exchanges ({phases})", ""
        best = metrics["best_epoch"]
        selected = f"best epoch {best}; " if best is not None else "last generator; "
        return f"{metrics['steps']} steps, {metrics['exchanges']} exchanges", selected

    def finish(self, metrics: dict[str, Any]) -> None:
        """The summary after the outputs were written."""
        self._clear_bar()
        if "summary" in metrics:
            summary = metrics["summary"]
            auc = summary["test_auc"]
            leak = summary["leak_auc"]
            self._print(
                f"done in {metrics['wall_seconds']:.0f}s: {summary['repetitions']} seeds, "
                f"{metrics['exchanges']} exchanges\n"
                f"test AUC     mean {auc['mean']:.4f}  worst {auc['worst']:.4f}  best {auc['best']:.4f}\n"
                + "\n".join(
                    f"leak AUC     {a:<12} {leak[a]['mean']:.3f} +- {leak[a]['std']:.3f}"
                    for a in ("norm", "cosine", "mean", "median", "median_split")
                )
                + f"\nwrote {self.spec.run_dir / 'metrics.json'}, report.md, config.json"
            )
            return
        fd = "not evaluated" if metrics["fd"] is None else f"{metrics['fd']:.4f}"
        steps, selected = self._trained(metrics)
        unit = "series" if self.spec.algorithm.is_series else "rows"
        self._print(
            f"done in {metrics['wall_seconds']:.0f}s: {steps}; "
            f"{selected}FD of synthetic.csv {fd}\n"
            f"wrote {self.spec.run_dir / 'synthetic.csv'} ({metrics['synthetic_rows']} {unit}), metrics.json, config.json"
        )
        scores = metrics.get("series")
        if scores:
            self._print(
                f"series       discriminative score {scores['discriminative_score']:.3f} (0 best), "
                f"cross-party amplitude correlation "
                f"{scores['cross_party_amplitude_correlation']:.3f} "
                f"(real {scores['real_cross_party_amplitude_correlation']:.3f}); report.md"
            )
        privacy = metrics.get("privacy")
        if privacy:
            self._print(
                f"privacy      epsilon covers {privacy['guarantee']}: {privacy['covers']}\n"
                f"privacy      not covered: {'; '.join(privacy['not_covered'])}"
            )
            for party in privacy["parties"]:
                self._print(
                    f"privacy      {party['party']}: epsilon {party['epsilon']:.4f} of "
                    f"{party['target_epsilon']:g} at delta {party['delta']:g} for "
                    f"{privacy['guarantee']} ({privacy['mechanism']}, {spent_description(party)})"
                )
                insiders = against_parties_description(party)
                if insiders:
                    self._print(f"privacy      {party['party']}: {insiders}")
            if privacy.get("joint_epsilon") is not None:
                self._print(
                    f"privacy      joint: epsilon {privacy['joint_epsilon']:.4f} of "
                    f"{privacy['target_epsilon']:g} for every part's releases together"
                )
            if privacy["budget_stop"]:
                self._print(f"privacy      stopped early: {privacy['budget_stop']}")
        if "evaluation" in metrics:
            print_evaluation(metrics["evaluation"], self.spec.run_dir, self.stream)


_HEADLINES = {
    "fidelity": ("fd",),
    "statistics": (
        "avg_jsd",
        "avg_wd",
        "diff_corr",
        "diff_corr_avg_client",
        "diff_corr_across_client",
    ),
    "avd": ("dcm",),  # after every order's k-AVD and its part across parties (_avd_keys)
    "ai_utility": (
        "trtr_accuracy",
        "tstr_accuracy",
        "majority_accuracy",
        "trtr_r2",
        "tstr_r2",
        "total_difference",
    ),
    "ml_efficacy": ("accuracy_difference", "f1_difference", "auc_difference"),
    "privacy": ("dcr_median", "holdout_dcr_median", "exact_match_fraction", "nndr_median"),
    "images": ("image_fd", "inception_score", "real_inception_score"),
}


def print_evaluation(
    evaluation: dict[str, Any], out_dir: Path, stream: TextIO | None = None
) -> None:
    """One line per metric group with its headline numbers, then the files written."""
    stream = stream or sys.stdout
    for group, keys in _HEADLINES.items():
        if group not in evaluation:
            continue
        values = evaluation[group]
        if group == "avd":
            keys = _avd_keys(values) + keys
        shown = "  ".join(
            f"{k} {values[k]:.4g}" for k in keys if isinstance(values.get(k), (int, float))
        )
        seconds = evaluation.get("seconds", {}).get(group, 0.0)
        print(f"{group:12s} {shown}  ({seconds:.1f}s)", file=stream, flush=True)
    for group, why in evaluation.get("skipped", {}).items():
        print(f"{group:12s} skipped: {why}", file=stream, flush=True)
    print(f"wrote {out_dir / 'report.md'}, metrics.json and plots", file=stream, flush=True)


def _avd_keys(values: dict[str, Any]) -> tuple[str, ...]:
    """``k2_avd k2_avd_across k3_avd ...``: each order of ``evaluation.avd_k`` and, with a
    partition, its part across parties (the within part stays in metrics.json)."""
    return tuple(k for k in values if re.fullmatch(r"k\d+_avd(_across)?", k))


def _not_progress(record: logging.LogRecord) -> bool:
    return not getattr(record, "progress", False)


def quiet_progress_records() -> None:
    """Filter records tagged with ``PROGRESS_RECORD`` from the root logger's console
    handlers (not its files); idempotent."""
    for handler in logging.getLogger().handlers:
        console = isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        )
        if console and _not_progress not in handler.filters:
            handler.addFilter(_not_progress)
