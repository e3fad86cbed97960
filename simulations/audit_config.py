"""The ``audit`` node of ``python -m simulations.audit`` and what both audit schemes share:
the rows kept and the training tables they write beside the audit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.checked import is_int
from flwr_vflgan.config import Variant
from flwr_vflgan.privacy.baselines import ATTACKS
from flwr_vflgan.privacy.table_features import FEATURE_MAPS
from flwr_vflgan.privacy.vulnerable import VULNERABILITY
from flwr_vflgan.runtime.checkpoint import latest_checkpoint
from flwr_vflgan.runtime.party_data import load_full_table
from flwr_vflgan.simulations.config import RunSpec, register_configs

SCHEMES = ("one_run", "assd", "asif", "baselines", "thesis_mia")
"""The audits: Steinke et al.'s one-run bound; paper 000's shadow-model game on the
published tables (ASSD) and on the parties' intermediate features (ASIF); the
membership attacks of paper 000's Table 3 on every training record (baselines); paper
004's attack on targets with a chosen share of outliers (thesis_mia)."""
SPLIT_DISCRIMINATORS = (Variant.VFLGAN, Variant.VFLGAN_BASE)
"""The algorithms with split discriminators: the one-run ``critic`` score and ASIF read
their first parts' features."""
SCORES = ("table", "critic")
"""The one-run audit's membership scores, black-box first."""


@dataclass(frozen=True)
class AuditConfig:
    """The ``audit`` node.

    Parameters
    ----------
    scheme
        ``one_run``: canaries in or out on a coin, one training run. ``assd``: paper 000's
        shadow-model game on one target record, read from the published tables; ``asif``:
        the same shadows, read from the intermediate features every party sends the
        server (VFLGAN, VFLGAN-base); see :mod:`~flwr_vflgan.simulations.shadow_audit`.
        Both read ``train_rows``, ``seed`` and the fields from ``shadows`` to
        ``ray_address``. ``baselines``: paper 000's Table 3 attacks on one run trained on
        ``train_rows`` rows, judged against as many unseen rows, with ``reference_rows``
        rows for the attacker (:mod:`~flwr_vflgan.simulations.baseline_audit`).
        ``thesis_mia``: paper 004's Monte-Carlo Hamming attack (Figure 5.7) on one run
        trained on ``train_rows`` rows, ``repetitions`` draws of ``targets`` targets per
        share of ``outlier_shares`` (:mod:`~flwr_vflgan.simulations.thesis_audit`).
    scores
        The membership scores audited, each giving its own bound (``null``: every score
        the algorithm has). ``table`` (black-box, any algorithm): the log-ratio of a
        canary's distance to its nearest row of the rest of the training table to its
        distance to its nearest published row. ``critic`` (white-box, VFLGAN,
        VFLGAN-base and VFLGAN-TS): the discriminator's score of the canary in the run's
        last checkpoint, every party's local score plus the shared discriminator's. Under
        ``dp=end_to_end`` both are post-processing of what the guarantee covers; under
        ``dp=vflgan_gaussian`` the critic holds the shared discriminator that guarantee
        leaves out.
    canaries
        ``m``, canaries drawn (about half join the training table).
    train_rows
        Rows of the dataset trained on beside the canaries, drawn at random (``null``:
        all). Fewer rows make each canary weigh more and the audit stronger.
    guesses
        The guess counts ``k`` tried (``k`` "in" and ``k`` "out" guesses each); each is
        at most half the canaries.
    confidence
        Confidence of the lower bound.
    delta
        Delta of the bound (``null``: the run's ``dp.delta``).
    seed
        Seed of the canaries, the coins and the rows kept (``null``: the run's seed).
    shadows
        ASSD: generators trained per world (without and with the target; paper 000: 100).
    target
        ASSD: the target record, ``distance`` (the row farthest from its nearest
        neighbour, paper 000's Record 1), ``outliers`` (the most outlying attributes,
        Record 2) or a row position in the table trained on.
    feature_maps
        ASSD: Stadler et al.'s feature sets the adversary reads, each its own result:
        ``naive``, ``correlation``, ``histogram``, ``range`` (the numeric columns' extremes).
    repetitions
        ASSD: fresh splits of the shadow tables into the forest's training and test sets.
        thesis_mia: fresh draws of the targets per share.
    train_fraction
        ASSD: share of each world's tables the forest trains on (paper 000: 0.7).
    executor
        ASSD: ``plain`` trains the shadows one after another in this process; ``ray`` as
        Ray tasks, one CPU each, on this machine or the cluster at ``ray_address``.
    jobs
        ASSD with ``executor=ray`` on this machine: CPUs Ray may use (``null``: all).
    ray_address
        ASSD: the address of a running Ray cluster (``ray start --head`` prints it);
        ``null`` starts Ray on this machine.
    reference_rows
        Baselines: rows of the dataset the attacker holds as its reference (none trained
        the generator or are judged; paper 000, Table 3: 10,000 for Housing).
    attacks
        Baselines: the attacks run (``logan_0``, ``logan_d1``, ``mc``, ``gan_leaks_0``,
        ``gan_leaks_cal``, ``domias``); ``null``: all.
    targets
        thesis_mia: ``m``, the training targets and as many unseen ones (paper 004: 100).
    outlier_shares
        thesis_mia: the shares of outliers among the training targets, each its own
        result (paper 004: 0, 0.5 and 1).
    unseen_outliers
        thesis_mia: the unseen targets hold the same share of outliers as the training
        targets (outliers by the training table's quartiles). ``false`` (the thesis):
        they are drawn uniformly, so the attack then also tells outliers from ordinary
        rows.
    """

    scheme: Literal["one_run", "assd", "asif", "baselines", "thesis_mia"] = "one_run"
    scores: tuple[Literal["table", "critic"], ...] | None = None
    canaries: int = 1000
    train_rows: int | None = 500
    guesses: tuple[int, ...] = (25, 50, 100, 250)
    confidence: float = 0.95
    delta: float | None = None
    seed: int | None = None
    shadows: int = 20
    target: str | int = "distance"
    feature_maps: tuple[str, ...] = ("naive", "correlation")
    repetitions: int = 5
    train_fraction: float = 0.7
    executor: Literal["plain", "ray"] = "plain"
    jobs: int | None = None
    ray_address: str | None = None
    reference_rows: int = 10000
    attacks: tuple[str, ...] | None = None
    targets: int = 100
    outlier_shares: tuple[float, ...] = (0.0, 0.5, 1.0)
    unseen_outliers: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "guesses", tuple(self.guesses))
        object.__setattr__(self, "feature_maps", tuple(self.feature_maps))
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown audit.scheme {self.scheme!r}; valid: {list(SCHEMES)}")
        self._check_shadow_game()
        self._check_baselines()
        self._check_thesis_mia()
        if self.scores is not None:
            object.__setattr__(self, "scores", tuple(self.scores))
            unknown = [v for v in self.scores if v not in SCORES]
            if unknown or not self.scores:
                raise ValueError(
                    f"audit.scores must list some of {list(SCORES)}, got {list(self.scores)}"
                )
        if not is_int(self.canaries) or self.canaries < 2:
            raise ValueError(f"audit.canaries must be an integer >= 2, got {self.canaries!r}")
        if self.train_rows is not None and (not is_int(self.train_rows) or self.train_rows < 1):
            raise ValueError(
                f"audit.train_rows must be a positive integer or null, got {self.train_rows!r}"
            )
        if not self.guesses or not all(
            is_int(k) and 1 <= k <= self.canaries // 2 for k in self.guesses
        ):
            raise ValueError(
                f"audit.guesses must list counts between 1 and audit.canaries/2 = "
                f"{self.canaries // 2}, got {list(self.guesses)}"
            )
        if not 0 < self.confidence < 1:
            raise ValueError(f"audit.confidence must be in (0, 1), got {self.confidence!r}")
        if self.delta is not None and not 0 <= self.delta < 1:
            raise ValueError(f"audit.delta must be in [0, 1) or null, got {self.delta!r}")
        if self.seed is not None and (not is_int(self.seed) or self.seed < 0):
            raise ValueError(f"audit.seed must be an integer >= 0 or null, got {self.seed!r}")

    def _check_baselines(self) -> None:
        if not is_int(self.reference_rows) or self.reference_rows < 2:
            raise ValueError(
                f"audit.reference_rows must be an integer >= 2, got {self.reference_rows!r}"
            )
        if self.attacks is not None:
            object.__setattr__(self, "attacks", tuple(self.attacks))
            unknown = [a for a in self.attacks if a not in ATTACKS]
            if unknown or not self.attacks:
                raise ValueError(
                    f"audit.attacks must list some of {list(ATTACKS)}, got {list(self.attacks)}"
                )
        if self.scheme == "baselines" and self.train_rows is None:
            raise ValueError(
                "audit.scheme=baselines trains on audit.train_rows rows and judges as many "
                "unseen ones: give audit.train_rows=<n> (paper 000: 100 or 200)"
            )

    def _check_thesis_mia(self) -> None:
        object.__setattr__(self, "outlier_shares", tuple(self.outlier_shares))
        if not is_int(self.targets) or self.targets < 1:
            raise ValueError(f"audit.targets must be an integer >= 1, got {self.targets!r}")
        if not self.outlier_shares or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
            for v in self.outlier_shares
        ):
            raise ValueError(
                f"audit.outlier_shares must list shares in [0, 1], got {list(self.outlier_shares)}"
            )
        if self.scheme == "thesis_mia" and (
            self.train_rows is None or self.train_rows < self.targets
        ):
            raise ValueError(
                f"audit.scheme=thesis_mia draws audit.targets={self.targets} targets from "
                f"audit.train_rows training rows and keeps the rest unseen: give "
                f"audit.train_rows=<n> of at least {self.targets}"
            )

    def _check_shadow_game(self) -> None:
        if not is_int(self.shadows) or self.shadows < 2:
            raise ValueError(f"audit.shadows must be an integer >= 2, got {self.shadows!r}")
        if not (self.target in VULNERABILITY or (is_int(self.target) and int(self.target) >= 0)):
            raise ValueError(
                f"audit.target must be one of {list(VULNERABILITY)} or a row position >= 0, "
                f"got {self.target!r}"
            )
        unknown = [m for m in self.feature_maps if m not in FEATURE_MAPS]
        if unknown or not self.feature_maps:
            raise ValueError(
                f"audit.feature_maps must list some of {list(FEATURE_MAPS)}, got "
                f"{list(self.feature_maps)}"
            )
        if not is_int(self.repetitions) or self.repetitions < 1:
            raise ValueError(f"audit.repetitions must be an integer >= 1, got {self.repetitions!r}")
        if not 0 < self.train_fraction < 1:
            raise ValueError(f"audit.train_fraction must be in (0, 1), got {self.train_fraction!r}")
        train = round(self.train_fraction * self.shadows)
        if not 1 <= train < self.shadows:
            raise ValueError(
                f"audit.train_fraction={self.train_fraction} of audit.shadows={self.shadows} "
                f"leaves {train} tables per world to train the adversary and "
                f"{self.shadows - train} to test it; both need at least one"
            )
        if self.executor not in ("plain", "ray"):
            raise ValueError(f"unknown audit.executor {self.executor!r}; valid: ['plain', 'ray']")
        if self.jobs is not None and (not is_int(self.jobs) or self.jobs < 1):
            raise ValueError(f"audit.jobs must be an integer >= 1 or null, got {self.jobs!r}")


def register_audit_config() -> None:
    """Register the ``audit_base`` node (idempotent)."""
    register_configs()
    node = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(AuditConfig()).items()}
    ConfigStore.instance().store(name="audit_base", node={"audit": node})


register_audit_config()


def audit_config(cfg: DictConfig) -> AuditConfig:
    """The ``audit`` node of a composed configuration, validated."""
    raw = OmegaConf.to_container(cfg.audit, resolve=True)
    assert isinstance(raw, dict)
    valid = set(AuditConfig.__dataclass_fields__)
    unknown = sorted(str(k) for k in raw if k not in valid)
    if unknown:
        raise ValueError(f"unknown keys {unknown} in 'audit'; valid: {sorted(valid)}")
    return AuditConfig(**{str(k): v for k, v in raw.items()})


def audit_seed(spec: RunSpec, audit: AuditConfig) -> int:
    """The seed of the audit's draws: ``audit.seed``, else the run's."""
    return spec.seed if audit.seed is None else audit.seed


def kept_rows(frame: pd.DataFrame, rows: int | None, rng: np.random.Generator) -> pd.DataFrame:
    """``rows`` rows of ``frame`` drawn without replacement, in table order (all of them
    when ``rows`` is ``None`` or at least the table's length)."""
    if rows is None or rows >= len(frame):
        return frame
    return frame.iloc[np.sort(rng.choice(len(frame), rows, replace=False))]


def training_spec(spec: RunSpec, audit_dir: Path, table: pd.DataFrame) -> RunSpec:
    """``spec`` trained on ``table`` (written to ``train.parquet``) in ``audit_dir/run``,
    with the original dataset's column kinds and label (:func:`table_spec`)."""
    return table_spec(spec, audit_dir / "train.parquet", table, audit_dir / "run")


def table_spec(spec: RunSpec, path: Path, table: pd.DataFrame, run_dir: Path) -> RunSpec:
    """``spec`` trained on ``table``, written to ``path``, in ``run_dir``, with the
    original dataset's column kinds and label.

    Raises
    ------
    FileExistsError
        ``path`` holds a training table that differs from ``table`` (another audit's
        canaries, rows or seed): the runs beside it belong to that table.
    """
    dataset, _ = load_full_table(spec.data)
    write_training_table(path, table)
    kinds = {c.name: c.kind.value for c in dataset.schema.columns}
    data = replace(
        spec.data,
        source=str(path.resolve()),
        declared=kinds,
        label=dataset.schema.label,
        id_column=None,
        drop=(),
    )
    return replace(spec, data=data, run_dir=run_dir)


def write_training_table(path: Path, table: pd.DataFrame) -> None:
    """Write an audit's training table to ``path`` (Parquet), atomically.

    Raises
    ------
    FileExistsError
        ``path`` holds a training table that differs from ``table`` (another audit's
        canaries, rows or seed): the runs beside it belong to that table.
    """
    if path.exists() and not pd.read_parquet(path).equals(table):
        raise FileExistsError(
            f"{path.parent} holds an audit of another training table (other canaries, rows "
            "or seed): give this audit a new hydra.run.dir"
        )
    write_atomically(path, lambda p: table.to_parquet(p, index=False), suffix=".parquet")


@dataclass(frozen=True)
class AuditGame:
    """One run of the one-run audit, drawn: the run that trains on the kept rows and the
    included canaries, each canary's coin, and the membership scores it can be judged by
    (each called once the run has finished)."""

    train: RunSpec
    rows: int
    """Rows (or series) trained on: the kept ones and the included canaries."""
    included: np.ndarray
    scores: dict[str, Callable[[], np.ndarray]]


def load_newest(state: Any, directory: Path, prefix: str) -> None:
    """Load ``state`` from the newest checkpoint ``<prefix>-<n>.npz`` in ``directory``.

    Raises
    ------
    ValueError
        The directory holds no checkpoint (the run kept none).
    """
    found = latest_checkpoint(directory, prefix)
    if found is None:
        raise ValueError(
            f"the audit reads the run's discriminators and {directory} has no checkpoint: "
            "keep output.checkpoint=true"
        )
    arrays, meta = found
    state.load(arrays["flat"], meta["optimizer_steps"])


def audit_header(spec: RunSpec, metrics: dict[str, Any], scheme: str) -> dict[str, Any]:
    """What every audit's JSON file opens with: the run audited and the epsilon it claims
    (``None`` without DP), from the metrics of a run of ``spec``."""
    privacy = metrics.get("privacy") or {}
    epsilon = privacy.get("epsilon")
    return {
        "algorithm": spec.algorithm.variant.value,
        "dataset": spec.data.source,
        "seed": spec.seed,
        "dp": spec.algorithm.dp.mechanism.value,
        "claimed_epsilon": None if epsilon is None else float(epsilon),
        "guarantee": privacy.get("guarantee"),
        "scheme": scheme,
    }
