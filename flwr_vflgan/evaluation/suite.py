"""Evaluate a synthetic table against the real one with every metric of the papers.

:func:`evaluate_tables` validates the pair once, runs the metric groups that
:class:`~flwr_vflgan.evaluation.config.EvaluationConfig` switches on, and returns an
:class:`Evaluation` whose :meth:`~Evaluation.to_dict` is what ``metrics.json`` stores under
``"evaluation"``: one dict per group under stable keys, the seconds each group took, the
groups skipped and why, and the settings that shaped the numbers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from flwr_vflgan.data.schema import ColumnKind, Schema
from flwr_vflgan.evaluation.config import EvaluationConfig
from flwr_vflgan.evaluation.gaps import split_numeric_gaps
from flwr_vflgan.metrics.frechet import frechet_distance
from flwr_vflgan.metrics.tables import FeatureEncoder, MetricInputError, check_pair

__all__ = ["Evaluation", "evaluate_tables"]

log = logging.getLogger(__name__)


@dataclass
class Evaluation:
    """The outcome of :func:`evaluate_tables`.

    Attributes
    ----------
    metrics
        Metric group -> its metrics (see :data:`~flwr_vflgan.evaluation.config.METRIC_GROUPS`).
    seconds
        Metric group -> wall-clock seconds it took.
    skipped
        Metric group -> why it was not computed (switched off, no label, image data).
    settings
        Row counts, label, holdout source, partition and the configuration used.
    associations
        The real and synthetic association matrices, when ``statistics`` ran (for plots).
    """

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    associations: tuple[pd.DataFrame, pd.DataFrame] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: the groups' metrics plus ``seconds``, ``skipped``, ``settings``.

        A metric that is undefined for this pair (NaN, for example TSTS when the
        synthetic label has one class) becomes ``None``, so ``metrics.json`` stays
        strict JSON.
        """
        return _strict_json(
            {
                **self.metrics,
                "seconds": dict(self.seconds),
                "skipped": dict(self.skipped),
                "settings": dict(self.settings),
            }
        )


def _strict_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def evaluate_tables(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema | None = None,
    *,
    config: EvaluationConfig | None = None,
    label: str | None = None,
    parties: Sequence[Sequence[str]] | None = None,
    holdout: pd.DataFrame | None = None,
) -> Evaluation:
    """Run the configured metric groups on a real/synthetic pair.

    Parameters
    ----------
    real
        The real table the generator was trained on.
    synthetic
        The synthetic table (same columns).
    schema
        Column kinds; inferred from ``real`` when ``None``.
    config
        Which metrics and how; defaults to :class:`EvaluationConfig`.
    label
        The label column for the utility metrics (default: ``schema.label``). Without
        one, ``ai_utility``, ``ml_efficacy`` and ``images`` are skipped.
    parties
        The vertical partition (one list of column names per party), for paper 001's
        Avg-client / Across-client association differences.
    holdout
        Real rows the generator never saw. Without it the test split of
        ``ml_efficacy`` and the DCR baseline are carved out of ``real`` (stratified,
        ``config.holdout_fraction``), which a generator trained on all of ``real`` has
        seen: ``settings["holdout"]`` records which it was.

    Returns
    -------
    Evaluation

    Raises
    ------
    MetricInputError
        If the tables are empty or their columns differ, the label is missing from
        either table, or a numeric column is not numeric and finite.

    Notes
    -----
    A numeric column with missing values in any table is measured as its values (gaps
    filled with the real median) plus a categorical ``"<name> is missing"`` column
    (:mod:`flwr_vflgan.evaluation.gaps`); ``settings["numeric_gaps"]`` lists them.
    """
    config = config or EvaluationConfig()
    if label is None and schema is not None:
        label = schema.label
    if schema is None:
        schema = check_pair(real, synthetic, None, label=label, values=False)
    gaps = split_numeric_gaps(real, synthetic, holdout, schema, parties)
    real, synthetic, holdout, parties = gaps.real, gaps.synthetic, gaps.holdout, gaps.parties
    schema = check_pair(real, synthetic, gaps.schema, label=label)
    if holdout is not None:
        check_pair(real, holdout, schema, label=label, names=("real", "holdout"))
    out = Evaluation(settings=_settings(real, synthetic, holdout, label, parties, config))
    if gaps.columns:
        out.settings["numeric_gaps"] = list(gaps.columns)
    image = config.image_shape is not None
    if image:
        _check_image_shape(schema, label, config)
    for group in (
        "fidelity",
        "statistics",
        "avd",
        "ai_utility",
        "ml_efficacy",
        "privacy",
        "images",
    ):
        reason = _skip_reason(group, config, label, image) or _regression_skip(group, schema, label)
        if reason:
            out.skipped[group] = reason
            continue
        started = time.perf_counter()
        out.metrics[group] = _RUNNERS[group](
            _Inputs(real, synthetic, schema, config, label, parties, holdout, out)
        )
        out.seconds[group] = round(time.perf_counter() - started, 3)
        log.info("evaluation: %s took %.1f s", group, out.seconds[group])
    return out


@dataclass(frozen=True)
class _Inputs:
    real: pd.DataFrame
    synthetic: pd.DataFrame
    schema: Schema
    config: EvaluationConfig
    label: str | None
    parties: Sequence[Sequence[str]] | None
    holdout: pd.DataFrame | None
    result: Evaluation


def _settings(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    holdout: pd.DataFrame | None,
    label: str | None,
    parties: Sequence[Sequence[str]] | None,
    config: EvaluationConfig,
) -> dict[str, Any]:
    return {
        "real_rows": len(real),
        "synthetic_rows": len(synthetic),
        "holdout_rows": len(holdout) if holdout is not None else None,
        "holdout": "table" if holdout is not None else "split of the real table",
        "label": label,
        "parties": [list(p) for p in parties] if parties is not None else None,
        "config": config.to_dict(),
    }


def _skip_reason(group: str, config: EvaluationConfig, label: str | None, image: bool) -> str:
    if not getattr(config, group):
        return f"switched off (evaluation.{group}=false)"
    if group == "images" and not image:
        return "not an image table (evaluation.image_shape is not set)"
    if image and group in ("statistics", "avd", "ai_utility", "ml_efficacy"):
        return "image table: paper 000 evaluates images with the autoencoder FD and inception score"
    if group in ("ai_utility", "ml_efficacy", "images") and label is None:
        return (
            "no label column: name one (dataset.label=COLUMN when training, label=COLUMN "
            "in simulations.evaluate) or declare it in the table's schema"
        )
    return ""


def _continuous_label(schema: Schema, label: str | None) -> bool:
    """Whether ``label`` is a continuous column: utility then regresses (R²), and the
    held-out split cannot be stratified by it."""
    return label is not None and schema.kind_of(label) is ColumnKind.CONTINUOUS


def _regression_skip(group: str, schema: Schema, label: str | None) -> str:
    if group == "ml_efficacy" and _continuous_label(schema, label):
        return (
            f"label {label!r} is continuous: paper 001's five classifiers need classes "
            "(ai_utility scores it by R² instead)"
        )
    return ""


def _check_image_shape(schema: Schema, label: str | None, config: EvaluationConfig) -> None:
    assert config.image_shape is not None
    pixels = [n for n in schema.names if n != label]
    height, width = config.image_shape
    if len(pixels) != height * width:
        raise MetricInputError(
            f"evaluation.image_shape={[height, width]} needs {height * width} pixel columns, "
            f"the table has {len(pixels)} (besides the label {label!r})"
        )


def _fidelity(x: _Inputs) -> dict[str, Any]:
    # Standardised numbers and one-hot categories over every column: the encoding the
    # paper computes eq. 23 on, and the one training's model selection uses.
    encoder = FeatureEncoder(x.schema, scaling="standard")
    real = encoder.fit_transform(x.real)
    return {"fd": frechet_distance(real, encoder.transform(x.synthetic))}


def _statistics(x: _Inputs) -> dict[str, Any]:
    from flwr_vflgan.metrics.similarity import association_matrix, statistical_similarity

    result = statistical_similarity(x.real, x.synthetic, x.schema, parties=x.parties)
    if x.config.plots:
        x.result.associations = (
            association_matrix(x.real, x.schema),
            association_matrix(x.synthetic, x.schema),
        )
    return result


def _avd(x: _Inputs) -> dict[str, Any]:
    from flwr_vflgan.metrics.avd import correlation_matrix_distance, k_avd, k_avd_by_party

    c = x.config
    out: dict[str, Any] = {}
    n_columns = len(x.schema.names)
    parties = x.parties if x.parties is not None and len(x.parties) > 1 else None
    draw = {"n_combinations": c.avd_combinations, "bins": c.avd_bins, "seed": c.seed}
    for k in c.avd_k:
        if k > n_columns:
            out[f"k{k}_avd"] = None
            continue
        out[f"k{k}_avd"] = k_avd(x.real, x.synthetic, x.schema, k=k, **draw)
        if parties is not None:
            split = k_avd_by_party(x.real, x.synthetic, x.schema, parties=parties, k=k, **draw)
            out[f"k{k}_avd_within"], out[f"k{k}_avd_across"] = split["within"], split["across"]
    out["dcm"] = correlation_matrix_distance(x.real, x.synthetic, x.schema)
    return out


def _ai_utility(x: _Inputs) -> dict[str, Any]:
    from flwr_vflgan.metrics.regression import regression_utility
    from flwr_vflgan.metrics.utility import ai_training_utility

    assert x.label is not None
    c = x.config
    utility = regression_utility if _continuous_label(x.schema, x.label) else ai_training_utility
    return utility(
        x.real, x.synthetic, x.schema, label=x.label, folds=c.cv_folds, seed=c.seed, n_jobs=c.n_jobs
    )


def _real_split(x: _Inputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    if x.holdout is not None:
        return x.real, x.holdout
    from flwr_vflgan.metrics.utility import split_holdout

    if x.label is None or _continuous_label(x.schema, x.label):
        shuffled = x.real.sample(frac=1.0, random_state=x.config.seed).reset_index(drop=True)
        n_test = max(1, round(len(shuffled) * x.config.holdout_fraction))
        return shuffled.iloc[n_test:].reset_index(drop=True), shuffled.iloc[:n_test]
    return split_holdout(x.real, x.label, fraction=x.config.holdout_fraction, seed=x.config.seed)


def _ml_efficacy(x: _Inputs) -> dict[str, Any]:
    from flwr_vflgan.metrics.utility import ml_efficacy

    assert x.label is not None
    train, test = _real_split(x)
    return ml_efficacy(
        train,
        test,
        x.synthetic,
        x.schema,
        label=x.label,
        classifiers=x.config.classifiers,
        seed=x.config.seed,
        multiclass_auc=x.config.multiclass_auc,
    )


def _privacy(x: _Inputs) -> dict[str, Any]:
    from flwr_vflgan.metrics.distance import closest_record_distances

    # Synthetic rows and held-out rows are measured against the same reference rows,
    # so the holdout's distances are the baseline of a generator that copies nothing.
    reference, holdout = _real_split(x)
    return closest_record_distances(
        reference,
        x.synthetic,
        x.schema,
        holdout=holdout,
        max_rows=x.config.dcr_max_rows,
        seed=x.config.seed,
    )


def _images(x: _Inputs) -> dict[str, Any]:
    from flwr_vflgan.metrics.images import ImageEvaluator, ImageMetricsConfig

    assert x.label is not None
    pixels = [n for n in x.schema.names if n != x.label]
    evaluator = ImageEvaluator.fit(
        x.real, pixel_columns=pixels, label=x.label, config=ImageMetricsConfig(seed=x.config.seed)
    )
    return evaluator.metrics(x.synthetic)


_RUNNERS: dict[str, Callable[[_Inputs], dict[str, Any]]] = {
    "fidelity": _fidelity,
    "statistics": _statistics,
    "avd": _avd,
    "ai_utility": _ai_utility,
    "ml_efficacy": _ml_efficacy,
    "privacy": _privacy,
    "images": _images,
}
