"""The label party's training loop, independent of how it reaches the parties.

:func:`train_repetition` runs one seed of paper 002's protocol: a train/test split of the
rows, epochs of shuffled mini-batches, the label party's update per batch and the
parties' updates with the gradients it returns, the label-stealing attacks on exactly
those gradients, and the AUCs at the end. It talks to the non-label parties through a
:class:`PartyLink`: :class:`PlainLink` calls :class:`~flwr_vflgan.gafm.parties.LocalParty`
objects in this process (tests, benchmarks, the Appendix D helpers), and the Flower
strategy sends messages. One training step costs one exchange: the message that carries
the gradients of step ``t`` also asks for the cut values of step ``t + 1``.

Leak AUCs are measured on the gradients of the last epoch (every training row once),
with the class centres of each batch, as the reference code does per epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from flwr_vflgan.runtime.rng import Stream, derive_seed, numpy_generator

from .attacks import ATTACKS, LeakAccumulator
from .config import GAFMSettings, Method
from .parties import LabelParty, LocalParty

Progress = Callable[[dict[str, Any]], None]


class PartyLink(Protocol):
    """How the label party reaches the non-label parties."""

    n_parties: int

    def start(self, seed: int) -> int:
        """Give every party fresh models seeded by ``seed``; returns the row count."""

    def step(
        self, step: int, grads: list[list[torch.Tensor]] | None, rows: list[np.ndarray]
    ) -> list[list[torch.Tensor]]:
        """Apply ``grads`` (per pending step, per party, in step order) to the parties'
        last forward passes, then return the cut values (per step, per party) of the
        batches ``rows`` for training steps ``step, step + 1, ...``, all computed with the
        parameters the parties hold then. An empty ``rows`` only applies."""

    def predict(self, rows: np.ndarray) -> list[torch.Tensor]:
        """Cut values of ``rows`` in evaluation mode."""


def apply_block(
    party: LocalParty,
    steps: Sequence[int],
    rows: Sequence[np.ndarray],
    grads: Sequence[torch.Tensor],
) -> None:
    """Apply one party's gradients of a block in step order, each on a forward pass
    recomputed with its current parameters (the first exact, later ones stale)."""
    for step, batch, grad in zip(steps, rows, grads, strict=True):
        party.apply(batch, step, grad)


class PlainLink:
    """Parties as :class:`LocalParty` objects in this process (no Flower)."""

    def __init__(
        self,
        features: Sequence[torch.Tensor],
        settings: GAFMSettings,
        fields: Sequence[Sequence[int]] | None = None,
    ) -> None:
        self.features = list(features)
        self.settings = settings
        self.fields = list(fields) if fields is not None else [None] * len(self.features)
        self.n_parties = len(self.features)
        self.parties: list[LocalParty] = []
        self._last: tuple[int, list[np.ndarray]] | None = None

    def start(self, seed: int) -> int:
        self.parties = [
            LocalParty(x, self.settings, p, seed, fields)
            for p, (x, fields) in enumerate(zip(self.features, self.fields, strict=True))
        ]
        self._last = None
        return self.parties[0].n_rows

    def step(
        self, step: int, grads: list[list[torch.Tensor]] | None, rows: list[np.ndarray]
    ) -> list[list[torch.Tensor]]:
        if grads is not None:
            if self._last is None:
                raise RuntimeError("gradients arrived before any forward pass")
            first, last_rows = self._last
            steps = range(first, first + len(last_rows))
            for p, party in enumerate(self.parties):
                apply_block(party, steps, last_rows, [g[p] for g in grads])
            self._last = None
        if not rows:
            return []
        self._last = (step, list(rows))
        return [
            [party.forward(batch, step + j) for party in self.parties]
            for j, batch in enumerate(rows)
        ]

    def predict(self, rows: np.ndarray) -> list[torch.Tensor]:
        return [party.predict(rows) for party in self.parties]


@dataclass(frozen=True)
class Split:
    """The label party's train/test split of the aligned rows."""

    train: np.ndarray
    test: np.ndarray


def split_rows(n_rows: int, test_fraction: float, seed: int) -> Split:
    """A seeded random split with ``round(test_fraction * n)`` test rows (both sides non-empty)."""
    n_test = round(test_fraction * n_rows)
    if not 0 < n_test < n_rows:
        raise ValueError(
            f"a test fraction of {test_fraction} of {n_rows} rows leaves an empty train or test set"
        )
    order = numpy_generator(seed, Stream.SPLIT).permutation(n_rows)
    return Split(train=np.sort(order[n_test:]), test=np.sort(order[:n_test]))


def epoch_batches(train: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The epoch's shuffled mini-batches; the last one keeps the remainder."""
    order = train[numpy_generator(seed, Stream.EPOCH_ORDER, epoch).permutation(len(train))]
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def binary_labels(
    values: Sequence[object] | np.ndarray, positive: str | None = None
) -> tuple[np.ndarray, str]:
    """0/1 labels from a label column, and the value taken as positive.

    The positive class is ``positive`` when given, ``1`` (or ``1.0``, ``True``) when the
    values are 0/1, and otherwise the rarer of the two values. More or fewer than two values is an error:
    GAFM and its baselines are binary classifiers.
    """
    text = np.asarray([str(v) for v in values])
    classes = sorted(set(text.tolist()))
    if len(classes) != 2:
        raise ValueError(
            f"binary classification needs exactly two label values, got {classes[:10]}"
        )
    if positive is None:
        ones = [c for c in classes if c in ("1", "1.0", "True")]
        if len(ones) == 1 and {c for c in classes if c != ones[0]} <= {"0", "0.0", "False"}:
            positive = ones[0]
        else:
            counts = {c: int((text == c).sum()) for c in classes}
            positive = min(classes, key=lambda c: (counts[c], c))
    if positive not in classes:
        raise ValueError(f"positive label {positive!r} is not one of the label values {classes}")
    return (text == positive).astype(np.int64), positive


@dataclass
class RepetitionResult:
    """One seed's outcome."""

    seed: int
    train_auc: float
    test_auc: float
    flipped: bool
    """Whether the label party predicts ``1 - Y_hat`` (see :func:`oriented_aucs`)."""
    leak_auc: dict[str, float]
    """Each attack's leak AUC, the largest over the parties (the worst-case party)."""
    leak_auc_per_party: list[dict[str, float]]
    steps: int
    epochs: int
    seconds: float
    history: list[dict[str, Any]] = field(default_factory=list)
    last_stats: dict[str, float] = field(default_factory=dict)
    gradient_trace: dict[str, np.ndarray] | None = field(default=None, compare=False)
    """The last epoch's last :data:`TRACE_ROWS` rows: label, prediction and the gradient
    party 0 received (GAFM: also its GAN and CE terms). Not in :meth:`to_dict` (the run
    writes it to ``gradients.csv``); ``None`` for a repetition restored from a checkpoint."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the gradient trace)."""
        out = asdict(self)
        del out["gradient_trace"]
        return out


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    if len(np.unique(labels)) < 2:
        return float("nan")
    return float(roc_auc_score(labels, scores))


def oriented_aucs(
    labels: np.ndarray, scores: np.ndarray, split: Split
) -> tuple[float, float, bool]:
    """Train and test AUC of the label party's prediction, oriented on the training rows.

    The Wasserstein loss matches the distribution of ``Y_hat`` to that of ``Y + eps``
    and is blind to which end is which: the generator may learn ``Y_hat -> 1 - (Y + eps)``
    (Appendix B treats both cases). The label party, which knows the training labels,
    then predicts ``1 - Y_hat``: the flip is decided on the training rows alone, never
    on the test rows. Vanilla split learning's head is trained on the labels and is
    never flipped in practice. Returns (train AUC, test AUC, flipped).
    """
    train = _auc(labels[split.train], scores[: len(split.train)])
    test = _auc(labels[split.test], scores[len(split.train) :])
    if train < 0.5:
        return 1.0 - train, 1.0 - test, True
    return train, test, False


def _leak(accumulators: Sequence[LeakAccumulator]) -> list[dict[str, float]]:
    return [acc.result() for acc in accumulators]


# Rows of the gradient trace a repetition keeps (its last epoch's last rows): enough for
# paper 002's scatter plots of prediction against gradient.
TRACE_ROWS = 2_000


def _merge_traces(traces: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray] | None:
    if not traces:
        return None
    merged = {key: np.concatenate([t[key] for t in traces]) for key in traces[0]}
    return {key: values[-TRACE_ROWS:] for key, values in merged.items()}


def _train_epoch(
    link: PartyLink,
    label_party: LabelParty,
    labels: np.ndarray,
    y: torch.Tensor,
    accumulators: Sequence[LeakAccumulator],
    batches: list[np.ndarray],
    k: int,
    step: int,
    pending: list[list[torch.Tensor]] | None,
    stats: dict[str, float],
    traces: list[dict[str, np.ndarray]],
) -> tuple[list[list[torch.Tensor]] | None, int, int, dict[str, float], dict[str, float]]:
    """Run one epoch's exchanges; returns (pending grads, step, steps taken, last stats,
    stat sums). Each step's trace, when the label party traces, goes to ``traces``."""
    sums: dict[str, float] = {}
    taken = 0
    # An exchange carries up to K batches and never crosses the epoch's end.
    for start in range(0, len(batches), k):
        block = batches[start : start + k]
        parts_block = link.step(step, pending, block)
        pending = []
        for rows, parts in zip(block, parts_block, strict=True):
            result = label_party.train_step(parts, y[rows], step)
            if result.trace is not None:
                traces.append(result.trace)
            pending.append(result.grads)
            stats = result.stats
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value
            for acc, grad in zip(accumulators, result.grads, strict=True):
                acc.add(grad.numpy(), labels[rows])
            step += 1
            taken += 1
    return pending, step, taken, stats, sums


def _evaluation_record(
    link: PartyLink,
    label_party: LabelParty,
    labels: np.ndarray,
    split: Split,
    epoch: int,
    step: int,
    leak_parties: list[dict[str, float]],
    sums: dict[str, float],
    taken: int,
    started: float,
) -> dict[str, Any]:
    """The history record of an evaluation: AUCs of the current models, leak AUCs, mean stats."""
    scores = label_party.predict(link.predict(np.concatenate([split.train, split.test])))
    train_auc, test_auc, flipped = oriented_aucs(labels, scores, split)
    return {
        "epoch": epoch,
        "step": step,
        "train_auc": train_auc,
        "test_auc": test_auc,
        "flipped": flipped,
        **{f"leak_{a}": max(p[a] for p in leak_parties) for a in ATTACKS},
        **{k: v / max(1, taken) for k, v in sums.items()},
        "elapsed": time.monotonic() - started,
    }


def train_repetition(
    method: Method,
    settings: GAFMSettings,
    labels: np.ndarray,
    link: PartyLink,
    seed: int,
    progress: Progress | None = None,
) -> RepetitionResult:
    """Train one repetition and measure its AUCs and leak AUCs.

    ``labels`` are the 0/1 labels of the aligned rows, known to the label party only.
    """
    started = time.monotonic()
    labels = np.asarray(labels, dtype=np.int64)
    n_rows = link.start(seed)
    if n_rows != len(labels):
        raise ValueError(
            f"the parties hold {n_rows} rows but the label party has {len(labels)} labels"
        )
    split = split_rows(n_rows, settings.test_fraction, seed)
    y = torch.from_numpy(labels).float()
    label_party = LabelParty(method, settings, link.n_parties, seed)
    accumulators = [
        LeakAccumulator(derive_seed(seed, Stream.ATTACK, 0, p)) for p in range(link.n_parties)
    ]
    history: list[dict[str, Any]] = []
    pending: list[list[torch.Tensor]] | None = None
    step = 0
    epoch = 0
    stats: dict[str, float] = {}
    leak_parties: list[dict[str, float]] = []
    traces: list[dict[str, np.ndarray]] = []
    done = False
    k = settings.steps_per_exchange
    while epoch < settings.epochs and not done:
        for acc in accumulators:
            acc.reset()
        batches = epoch_batches(split.train, settings.batch_size, seed, epoch)
        if settings.max_steps is not None:
            batches = batches[: settings.max_steps - step]
        # The last epoch (the run's epochs, or max_steps reached within it) is traced.
        label_party.tracing = epoch == settings.epochs - 1 or (
            settings.max_steps is not None and step + len(batches) >= settings.max_steps
        )
        pending, step, taken, stats, sums = _train_epoch(
            link, label_party, labels, y, accumulators, batches, k, step, pending, stats, traces
        )
        if settings.max_steps is not None and step >= settings.max_steps:
            done = True
        epoch += 1
        leak_parties = _leak(accumulators)
        last = done or epoch == settings.epochs
        if last or (settings.eval_every and epoch % settings.eval_every == 0):
            link.step(step, pending, [])
            pending = None
            record = _evaluation_record(
                link, label_party, labels, split, epoch, step, leak_parties, sums, taken, started
            )
            history.append(record)
            if progress is not None:
                progress({**record, "seed": seed, "epochs": settings.epochs})
    result = _repetition_result(seed, history, leak_parties, step, epoch, started, stats)
    result.gradient_trace = _merge_traces(traces)
    return result


def _repetition_result(
    seed: int,
    history: list[dict[str, Any]],
    leak_parties: list[dict[str, float]],
    step: int,
    epoch: int,
    started: float,
    stats: dict[str, float],
) -> RepetitionResult:
    """The repetition's result: final AUCs from the last history record, worst-party leaks."""
    # The loop's last record (always made) predicted with the final models.
    train_auc, test_auc, flipped = (
        history[-1]["train_auc"],
        history[-1]["test_auc"],
        history[-1]["flipped"],
    )
    return RepetitionResult(
        seed=seed,
        train_auc=train_auc,
        test_auc=test_auc,
        flipped=flipped,
        leak_auc={a: max(p[a] for p in leak_parties) for a in ATTACKS},
        leak_auc_per_party=leak_parties,
        steps=step,
        epochs=epoch,
        seconds=time.monotonic() - started,
        history=history,
        last_stats=stats,
    )


def summarize(results: Sequence[RepetitionResult]) -> dict[str, Any]:
    """Table 2's columns over the repetitions: test AUC mean / worst / best (and train AUC,
    standard deviations) and each attack's leak AUC mean and standard deviation."""
    if not results:
        raise ValueError("no repetitions to summarise")
    test = np.array([r.test_auc for r in results])
    train = np.array([r.train_auc for r in results])
    out: dict[str, Any] = {
        "repetitions": len(results),
        "seeds": [r.seed for r in results],
        "test_auc": {
            "mean": float(test.mean()),
            "std": float(test.std()),
            "worst": float(test.min()),
            "best": float(test.max()),
        },
        "train_auc": {"mean": float(train.mean()), "std": float(train.std())},
        "leak_auc": {},
    }
    for attack in ATTACKS:
        values = np.array([r.leak_auc[attack] for r in results])
        out["leak_auc"][attack] = {
            "mean": float(values.mean()),
            "std": float(values.std()),
            "worst": float(values.max()),
            "best": float(values.min()),
        }
    return out
