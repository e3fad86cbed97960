"""Paper 004's measures over epsilon (its Figures 5.2, 5.4, 5.6, 5.10, 5.12 and 5.13 and
Appendix Figures A.1-A.5 and A.7), written beside paper 000's Table 1 by
:mod:`~flwr_vflgan.simulations.reproduce`.

    python -m simulations.reproduce 'reproduce.datasets=[adult_thesis]' 'reproduce.seeds=[0]' \\
        'reproduce.algorithms=[vdgan]' reproduce.non_dp=false reproduce.dp_mechanism=dpsgd \\
        'reproduce.dp_epsilons=[0.5,1,2,4,8]' reproduce.out_dir=runs/thesis-adult \\
        dataset.rows=10000 train.epochs=30 evaluation.avd=true 'evaluation.avd_k=[2,4,6]' \\
        evaluation.ml_efficacy=true

The thesis's five methods are the runs of one ``reproduce.out_dir``, made by up to four
invocations (one per mechanism: the GANs without DP, DPLT, VDGAN-DPSGD and VDGAN-PATE;
docs/reproduction.md has them). Each invocation's table reads every finished run of
the out dir that has the thesis's measures (k-AVD with ``evaluation.avd`` and the MLP's
AUC with ``evaluation.ml_efficacy``), not only its own, so the last one draws all five:
``<out_dir>/paper004_<dataset>.md`` (mean and spread over seeds per method and epsilon)
and ``<out_dir>/paper004_<dataset>.png`` (the measures against epsilon, a line per DP
method, a level per method without DP), with the teacher bars, the association maps and
the attack-against-utility plot where the runs allow them (:func:`write_paper004`). A run
trained on ``dataset.rows`` of its table is also attacked (:func:`run_mia`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data.schema import Schema
from flwr_vflgan.evaluation.plots import pyplot, save_figure
from flwr_vflgan.metrics.associations import association_matrix
from flwr_vflgan.privacy.thesis_mia import attribute_codes, thesis_mia, thesis_outliers
from flwr_vflgan.runtime.party_data import DataSpec, load_full_table, spec_from_mapping
from flwr_vflgan.simulations.outputs import write_json
from flwr_vflgan.simulations.seed_summary import mean_spread

METHODS = {
    ("wgan_gp", "none"): "Center-NoDP",
    ("vdgan", "none"): "VD-NoDP",
    ("dplt", "end_to_end"): "DPLT",
    ("vdgan", "dpsgd"): "VDGAN-DPSGD",
    ("vdgan", "pate"): "VDGAN-PATE",
}
"""The thesis's methods (Section 5.3) by (``algorithm.variant``, DP mechanism)."""

MEASURES = {
    "k2_avd": ("2-AVD", "Fig. A.1"),
    "k4_avd": ("4-AVD", "Fig. 5.2"),
    "k6_avd": ("6-AVD", "Fig. A.1"),
    "dcm": ("DCM", "Fig. 5.4"),
    "mlp_auc": ("MLP AUC (TSTR)", "Figs. 5.6, A.3"),
    "adaboost_auc": ("AdaBoost AUC (TSTR)", "Figs. 5.5, A.3"),
    "mia_0": ("MIA, 0 % outliers", "Fig. A.4"),
    "mia_50": ("MIA, 50 % outliers", "Figs. 5.10, A.4"),
    "mia_100": ("MIA, 100 % outliers", "Fig. A.4"),
    "mia_50_matched": ("MIA, 50 % outliers, matched", "-"),
}
"""Each measure's name and the thesis's figure of it (lower is better but for the AUC;
0.5 is the attack's coin)."""
OVER_EPSILON = ("k2_avd", "k4_avd", "k6_avd", "dcm", "mlp_auc", "mia_50")
"""The measures drawn against epsilon."""

MIA_SHARES = (0.0, 0.5, 1.0)
MATCHED_SHARE = 0.5
"""The share also attacked with unseen targets of the same make-up (as many outliers):
the thesis draws them uniformly, so its accuracy also measures how typical the training
targets are (docs/privacy.md, "Paper 004's attack on outlier targets")."""
MIA_TARGETS = 100
"""The thesis's ``m`` (Section 5.4.2): training targets, and as many unseen ones."""
MIA_REPETITIONS = 10


Group = tuple[str, int | None, int]
"""A method as run: its name, the teacher count (VDGAN-PATE only) and the epochs."""
Found = dict[Group, dict[float | None, list[dict[str, float]]]]


def run_measures(run_dir: Path) -> tuple[Group, float | None, dict[str, float]] | None:
    """A finished run's group, epsilon (``None`` without DP) and measures; ``None``
    when it is not one of :data:`METHODS` or lacks the measures."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
        metrics = json.loads((run_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        return None
    algorithm = config.get("algorithm", {})
    dp = algorithm.get("dp") or {}
    mechanism = dp.get("mechanism") or "none"
    method = METHODS.get((algorithm.get("variant"), mechanism))
    evaluation = metrics.get("evaluation", {})
    avd, ml = evaluation.get("avd", {}), evaluation.get("ml_efficacy", {})
    if method is None or "k4_avd" not in avd or "mlp_synthetic_auc" not in ml:
        return None
    measures = {k: float(avd[k]) for k in ("k2_avd", "k4_avd", "k6_avd", "dcm") if k in avd}
    measures["mlp_auc"] = float(ml["mlp_synthetic_auc"])
    measures["mlp_real_auc"] = float(ml.get("mlp_real_auc", math.nan))
    if "adaboost_synthetic_auc" in ml:  # with evaluation.classifiers=[mlp,adaboost]
        measures["adaboost_auc"] = float(ml["adaboost_synthetic_auc"])
        measures["adaboost_real_auc"] = float(ml.get("adaboost_real_auc", math.nan))
    measures.update(run_mia(run_dir, config))
    epsilon = None if mechanism == "none" else float(dp["target_epsilon"])
    teachers = int(dp["pate_teachers"]) if mechanism == "pate" else None
    epochs = int(config.get("algorithm", {}).get("train", {}).get("epochs", 0))
    return (method, teachers, epochs), epsilon, measures


@functools.lru_cache(maxsize=4)
def _members_and_unseen(spec_json: str) -> tuple[pd.DataFrame, pd.DataFrame, Schema]:
    """A sampled run's training rows (``dataset.rows``) and the table's other rows. In an
    up-sampled table (paper 004's) some of those are copies of training rows; they stay,
    since leaving them out would leave the rarer rows and bias the attack (a copy scores
    as its original: such pairs are coin flips, so the accuracy is, if anything, low)."""
    spec = DataSpec.from_json(spec_json)
    full, full_ids = load_full_table(replace(spec, rows=None))
    sample, ids = load_full_table(spec)
    rest = full.frame[~full_ids.isin(set(ids)).to_numpy()].reset_index(drop=True)
    return sample.frame, rest, sample.schema


def run_mia(run_dir: Path, config: dict[str, Any]) -> dict[str, float]:
    """Paper 004's membership attack on a run trained on ``dataset.rows`` of its table:
    the accuracy for each share of :data:`MIA_SHARES` outlier targets
    (:func:`~flwr_vflgan.privacy.thesis_mia.thesis_mia`, the unseen targets from the rows
    the sample left out), cached in the run's ``thesis_mia.json``. Empty for a run of a
    whole table; NaN for a share the training rows hold too few outliers for."""
    cache, published_path = run_dir / "thesis_mia.json", run_dir / "synthetic.csv"
    data = config.get("data") or {}
    if data.get("rows") is None or not published_path.exists():
        return {}
    # The cache holds for these settings and this published table only (a run trained
    # again publishes another).
    digest = hashlib.sha256(published_path.read_bytes()).hexdigest()
    settings = [MIA_TARGETS, MIA_REPETITIONS, list(MIA_SHARES), MATCHED_SHARE, digest]
    cached = json.loads(cache.read_text()) if cache.exists() else {}
    if cached.get("settings") == settings:
        return dict(cached["accuracy"])
    members, unseen, schema = _members_and_unseen(spec_from_mapping(data).to_json())
    synthetic = pd.read_csv(published_path)[list(schema.names)]
    trained, never, published = attribute_codes([members, unseen, synthetic], schema, synthetic)
    is_outlier = thesis_outliers(members, schema)
    matched = thesis_outliers(unseen, schema, members)
    accuracy = {}
    for share, unseen_outlier in [*((s, None) for s in MIA_SHARES), (MATCHED_SHARE, matched)]:
        name = f"mia_{share * 100:.0f}" + ("" if unseen_outlier is None else "_matched")
        try:
            (result,) = thesis_mia(
                trained,
                never,
                published,
                is_outlier,
                targets=MIA_TARGETS,
                shares=[share],
                repetitions=MIA_REPETITIONS,
                seed=0,
                unseen_outlier=unseen_outlier,
            )
            accuracy[name] = result.mean
        except ValueError:
            accuracy[name] = math.nan
    write_json(cache, {"settings": settings, "accuracy": accuracy})
    return accuracy


Measured = tuple[Group, float | None, dict[str, float], Path]
"""A finished run: its group, epsilon, measures and directory."""


def measured_runs(dataset_dir: Path) -> list[Measured]:
    """Every finished run under ``<out_dir>/<dataset>/<method>/seed<k>/`` with the
    thesis's measures (:func:`run_measures`), in directory order."""
    runs = []
    for run_dir in sorted(dataset_dir.glob("*/seed*")):
        measured = run_measures(run_dir)
        if measured is not None:
            runs.append((*measured, run_dir))
    return runs


def collect(dataset_dir: Path, runs: Sequence[Measured] | None = None) -> Found:
    """The finished runs (``runs``, else :func:`measured_runs` of ``dataset_dir``) by
    group (method, teachers, epochs) and epsilon, the groups in :data:`METHODS`' order."""
    found: Found = {}
    for group, epsilon, measures, _ in measured_runs(dataset_dir) if runs is None else runs:
        found.setdefault(group, {}).setdefault(epsilon, []).append(measures)
    order = list(METHODS.values())
    return dict(sorted(found.items(), key=lambda item: (order.index(item[0][0]), *_rest(item[0]))))


def _rest(group: Group) -> tuple[int, int]:
    return (group[1] or 0, group[2])


def label(group: Group) -> str:
    """``VDGAN-PATE, 10 teachers``: the method, with its teacher count."""
    method, teachers, _ = group
    return method if teachers is None else f"{method}, {teachers} teachers"


def main_epochs(found: Found) -> int:
    """The epoch count of most runs (the sweep over epsilon; shorter ablations aside)."""
    counts: dict[int, int] = {}
    for group, runs in found.items():
        counts[group[2]] = counts.get(group[2], 0) + sum(len(r) for r in runs.values())
    return max(counts, key=lambda e: (counts[e], e))


def render(dataset: str, found: Found) -> str:
    """Markdown: one row per method and epsilon, mean ± spread over seeds."""
    names = [name for name, _ in MEASURES.values()]
    lines = [
        f"# Paper 004's measures over epsilon: {dataset}",
        "",
        "Mean ± sample standard deviation over the seeds in `seeds`; k-AVD and DCM lower is "
        "better, the MLP's AUC (trained on the synthetic table, tested on the real one) "
        "higher. The thesis's figure of each measure: "
        + ", ".join(f"{name} {figure}" for name, figure in MEASURES.values())
        + ".",
        "",
        "| method | epochs | epsilon | seeds | " + " | ".join(names) + " |",
        "|---|---|---|---|" + "---|" * len(names),
    ]
    for group, by_epsilon in found.items():
        for epsilon, runs in sorted(by_epsilon.items(), key=_epsilon_order):
            cells = [_cell([run.get(key, math.nan) for run in runs]) for key in MEASURES]
            shown = "no DP" if epsilon is None else f"{epsilon:g}"
            lines.append(
                f"| {label(group)} | {group[2]} | {shown} | {len(runs)} | "
                + " | ".join(cells)
                + " |"
            )
    runs = [run for by_epsilon in found.values() for rs in by_epsilon.values() for run in rs]
    real = {k: _cell([r.get(f"{k}_real_auc", math.nan) for r in runs]) for k in ("mlp", "adaboost")}
    lines += [
        "",
        f"Trained on the real table (TRTR): MLP AUC {real['mlp']}, AdaBoost AUC "
        f"{real['adaboost']}.",
        "",
    ]
    return "\n".join(lines)


def _epsilon_order(item: tuple[float | None, Any]) -> float:
    return -1.0 if item[0] is None else item[0]


def _cell(values: Sequence[float]) -> str:
    mean, spread = mean_spread(values)
    return "-" if math.isnan(mean) else f"{mean:.3f} ± {spread:.3f}"


def plot(dataset: str, found: Found, path: Path) -> Path:
    """The measures against epsilon of the runs of :func:`main_epochs`: a line per DP
    method, a dashed level per method without DP."""
    plt = pyplot()
    epochs = main_epochs(found)
    groups = [group for group in found if group[2] == epochs]
    fig, axes = plt.subplots(1, len(OVER_EPSILON), figsize=(4 * len(OVER_EPSILON), 3.4))
    for ax, key in zip(axes, OVER_EPSILON, strict=True):
        name, figure = MEASURES[key]
        for index, group in enumerate(groups):
            by_epsilon, method = found[group], label(group)
            colour = f"C{index}"
            if None in by_epsilon:
                level, _ = mean_spread([r.get(key, math.nan) for r in by_epsilon[None]])
                ax.axhline(level, color=colour, linestyle="--", label=method)
            points = sorted(e for e in by_epsilon if e is not None)
            if points:
                means = [
                    mean_spread([r.get(key, math.nan) for r in by_epsilon[e]])[0] for e in points
                ]
                ax.plot(points, means, marker="o", color=colour, label=method)
        ax.set_xscale("log", base=2)
        ax.set(title=f"{name} ({figure})", xlabel="epsilon")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Paper 004's measures over epsilon, {dataset} ({epochs} epochs)")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_teachers(dataset: str, found: Found, path: Path) -> Path | None:
    """Figure 5.12's layout: VDGAN-PATE's 4-AVD, DCM and MLP AUC per teacher count (a
    bar each) and epsilon (a group each), for the epoch count with the most teacher
    counts; the methods without DP as levels. ``None`` with fewer than two counts."""
    by_epochs: dict[int, list[Group]] = {}
    for group in found:
        if group[1] is not None:
            by_epochs.setdefault(group[2], []).append(group)
    if not by_epochs or max(len(g) for g in by_epochs.values()) < 2:
        return None
    epochs = max(by_epochs, key=lambda e: (len(by_epochs[e]), e))
    pate = sorted(by_epochs[epochs], key=lambda g: g[1] or 0)
    epsilons = sorted({e for g in pate for e in found[g] if e is not None})
    plt = pyplot()
    keys = ("k4_avd", "dcm", "mlp_auc")
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.4))
    width = 0.8 / len(pate)
    for ax, key in zip(axes, keys, strict=True):
        for index, group in enumerate(pate):
            means = [
                mean_spread([r.get(key, math.nan) for r in found[group].get(e, [])])[0]
                for e in epsilons
            ]
            xs = [i + (index - (len(pate) - 1) / 2) * width for i in range(len(epsilons))]
            ax.bar(xs, means, width, label=f"{group[1]} teachers")
        for index, group in enumerate(g for g in found if None in found[g]):
            level, _ = mean_spread([r.get(key, math.nan) for r in found[group][None]])
            ax.axhline(level, color=f"C{index + len(pate)}", linestyle="--", label=label(group))
        ax.set_xticks(range(len(epsilons)), [f"epsilon {e:g}" for e in epsilons])
        ax.set_title(MEASURES[key][0])
    axes[0].legend(fontsize=7)
    fig.suptitle(f"VDGAN-PATE by number of teachers, {dataset} ({epochs} epochs; Fig. 5.12)")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_mia_utility(dataset: str, found: Found, path: Path) -> Path | None:
    """Figures 5.10 and A.5: the attack's accuracy on 50 % outlier targets against each
    utility measure, a point per method and epsilon (the runs of :func:`main_epochs`);
    ``None`` when no run has it. The ideal corner is a coin (0.5) at the best utility."""
    epochs = main_epochs(found)
    groups = [g for g in found if g[2] == epochs]
    if not any(r.get("mia_50") is not None for g in groups for rs in found[g].values() for r in rs):
        return None
    plt = pyplot()
    keys = ("k4_avd", "dcm", "mlp_auc")
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.6))
    for ax, key in zip(axes, keys, strict=True):
        for index, group in enumerate(groups):
            points = [
                (
                    mean_spread([r.get(key, math.nan) for r in runs])[0],
                    mean_spread([r.get("mia_50", math.nan) for r in runs])[0],
                )
                for runs in found[group].values()
            ]
            ax.scatter(*zip(*points, strict=True), color=f"C{index}", label=label(group))
        ax.axhline(0.5, color="grey", linewidth=0.8)
        ax.set(xlabel=MEASURES[key][0], ylabel="MIA accuracy, 50 % outliers")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Membership attack against utility, {dataset} (Figs. 5.10, A.5)")
    fig.tight_layout()
    return save_figure(fig, path)


def correlation_runs(runs: Sequence[Measured], epsilon: float) -> list[tuple[str, Path]]:
    """Seed 0's run dir of each DP group at ``epsilon`` and :func:`main_epochs`, by
    label, in :data:`METHODS`' order."""
    found = collect(Path(), runs)
    if not found:
        return []
    epochs = main_epochs(found)
    dirs = {
        group: run_dir
        for group, run_epsilon, _, run_dir in runs
        if run_dir.name == "seed0" and run_epsilon == epsilon and group[2] == epochs
    }
    return [(label(group), dirs[group]) for group in found if group in dirs]


def plot_correlations(runs: Sequence[Measured], path: Path, epsilon: float = 1.0) -> Path | None:
    """Figure A.2 (and 5.3's layout): the association matrix of the real table beside
    those of the DP methods' tables at ``epsilon`` (seed 0); ``None`` without such runs."""
    chosen = correlation_runs(runs, epsilon)
    if not chosen:
        return None
    config = json.loads((chosen[0][1] / "config.json").read_text())
    real, _ = load_full_table(spec_from_mapping(config["data"]))
    schema = real.schema
    panels = [("real", association_matrix(real.frame, schema))]
    for name, run_dir in chosen:
        synthetic = pd.read_csv(run_dir / "synthetic.csv")[list(schema.names)]
        panels.append((name, association_matrix(synthetic, schema)))
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.4))
    for ax, (name, matrix) in zip(np.atleast_1d(axes), panels, strict=True):
        image = ax.imshow(matrix.to_numpy(float), vmin=-1.0, vmax=1.0, cmap="coolwarm")
        ax.set_title(name, fontsize=9)
        ticks = np.arange(len(matrix.columns))
        ax.set_xticks(ticks, [str(c)[:10] for c in matrix.columns], rotation=90, fontsize=5)
        ax.set_yticks(ticks, [str(c)[:10] for c in matrix.columns], fontsize=5)
    fig.colorbar(image, ax=list(np.atleast_1d(axes)), fraction=0.02)
    fig.suptitle(f"Associations, real vs synthetic at epsilon {epsilon:g} (Fig. A.2)")
    return save_figure(fig, path)


def _write_text(text: str, path: Path) -> None:
    path.write_text(text)


def write_paper004(out_dir: Path, datasets: Sequence[str]) -> list[Path]:
    """``paper004_<dataset>.md`` and ``.png`` for each dataset whose runs have the
    thesis's measures, with ``paper004_<dataset>_teachers.png`` when VDGAN-PATE ran
    with several teacher counts, ``paper004_<dataset>_maps.png`` when DP runs at
    epsilon 1 published a table and ``paper004_<dataset>_mia.png`` when runs on a
    sample (``dataset.rows``) could be attacked; the paths written."""
    written: list[Path] = []
    for dataset in datasets:
        runs = measured_runs(out_dir / dataset)
        found = collect(out_dir / dataset, runs)
        if not found:
            continue
        markdown = out_dir / f"paper004_{dataset}.md"
        write_atomically(markdown, functools.partial(_write_text, render(dataset, found)))
        written += [markdown, plot(dataset, found, out_dir / f"paper004_{dataset}.png")]
        teachers = plot_teachers(dataset, found, out_dir / f"paper004_{dataset}_teachers.png")
        maps = plot_correlations(runs, out_dir / f"paper004_{dataset}_maps.png")
        mia = plot_mia_utility(dataset, found, out_dir / f"paper004_{dataset}_mia.png")
        written += [p for p in (teachers, maps, mia) if p is not None]
    return written
