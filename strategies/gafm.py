"""The label party of GAFM and its baselines (paper 002) as a Flower strategy.

``GAFMStrategy.start(grid)`` runs ``gafm.repetitions`` seeds of split classification
over any Flower ``Grid``: per seed a setup exchange (fresh models at every party, row
alignment checked against the label party's IDs), then one exchange per training step
(the message carrying the gradient of step ``t`` asks for the cut values of step
``t + 1``), prediction exchanges for the AUCs, and the label-stealing attacks on exactly
the gradients sent. The labels are the strategy's own (from the server's configuration);
no message to a party carries them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from flwr.app import Message
from flwr.serverapp import Grid

from flwr_vflgan.data.alignment import id_digest
from flwr_vflgan.gafm.config import GAFMSettings, Method
from flwr_vflgan.gafm.messages import CutValues, GAFMSetup, GAFMStep, PredictRows
from flwr_vflgan.gafm.training import RepetitionResult, summarize, train_repetition
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import save_server_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError

from .base import StrategyArgs, VerticalStrategy
from .exchange import (
    RunStopped,
    setup_replies,
)
from .resume import load_server_state, resume_refusal

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)


@dataclass
class GAFMResult:
    """What a GAFM-family run produced."""

    method: str
    repetitions: list[RepetitionResult]
    summary: dict[str, Any]
    exchanges: int
    wall_seconds: float
    n_rows: int
    positive_rate: float
    extra: dict[str, Any] = field(default_factory=dict)


class _FlowerLink:
    """:class:`~flwr_vflgan.gafm.training.PartyLink` over a Flower grid."""

    def __init__(self, strategy: GAFMStrategy, grid: Grid, nodes: Sequence[int]) -> None:
        self.strategy = strategy
        self.grid = grid
        self.nodes = list(nodes)
        self.n_parties = len(self.nodes)
        self.order: list[int] = []

    def _exchange(self, messages: list[Message], describe: str) -> dict[int, Message]:
        self.strategy.exchanges += 1
        return self.strategy.exchange(self.grid, messages, describe)

    def start(self, seed: int) -> int:
        s = self.strategy
        setup = GAFMSetup(
            protocol_version=P.GF_PROTOCOL_VERSION,
            settings=json.dumps(s.settings.to_dict(), sort_keys=True),
            data_spec=s.data_spec.to_json() if s.data_spec else "",
            label=s.label,
            seed=seed,
        )
        messages = [Message(setup.to_content(), node, P.GF_SETUP) for node in self.nodes]
        replies = self._exchange(messages, f"setup of seed {seed}")
        self.order, n_rows, _ = setup_replies(
            replies, self.n_parties, reference=(s.label_digest, len(s.labels))
        )
        s.name_parties(self.order)
        return n_rows

    def step(
        self, step: int, grads: list[list[torch.Tensor]] | None, rows: list[np.ndarray]
    ) -> list[list[torch.Tensor]]:
        """One exchange: every party's gradients of the pending block (packed in step
        order) and the row indices of the next block's batches (concatenated, with
        their sizes)."""
        sizes = [len(batch) for batch in rows]
        messages = []
        for p, node in enumerate(self.order):
            message = GAFMStep(
                step=step,
                grads=torch.cat([g[p] for g in grads]).numpy() if grads is not None else None,
                batch_rows=tuple(sizes),
                rows=np.concatenate(rows) if rows else None,
            )
            messages.append(Message(message.to_content(), node, P.GF_STEP))
        describe = f"step {step}" if len(rows) <= 1 else f"steps {step}-{step + len(rows) - 1}"
        replies = self._exchange(messages, describe)
        if not rows:
            return []
        cuts = self._cuts(replies, sum(sizes), describe)
        split = [torch.split(party, sizes) for party in cuts]
        return [[split[p][j] for p in range(self.n_parties)] for j in range(len(rows))]

    def predict(self, rows: np.ndarray) -> list[torch.Tensor]:
        content = PredictRows(rows)
        messages = [Message(content.to_content(), node, P.GF_PREDICT) for node in self.order]
        return self._cuts(self._exchange(messages, "prediction"), len(rows), "prediction")

    def _cuts(self, replies: dict[int, Message], n: int, describe: str) -> list[torch.Tensor]:
        out = []
        for p, node in enumerate(self.order):
            try:
                cut_dim = self.strategy.settings.cut_dim
                out.append(CutValues.from_content(replies[node].content, n, cut_dim).cuts)
            except ProtocolError as exc:
                raise RunStopped(
                    f"{describe}: party {p} (node {node}) sent bad cut values: {exc}"
                ) from exc
        return out


@dataclass
class _GAFMRun:
    """One run's state: the link to the parties and the repetitions done (those a
    checkpoint held first)."""

    link: _FlowerLink
    started: float
    results: list[RepetitionResult] = field(default_factory=list)
    resumed_repetitions: int = 0


class GAFMStrategy(VerticalStrategy["_GAFMRun", GAFMResult]):
    """Drive GAFM, vanilla split learning, Max Norm or Marvell over a Flower grid.

    Parameters
    ----------
    method
        ``gafm``, ``splitnn``, ``maxnorm`` or ``marvell``.
    settings
        The models' architecture and hyperparameters, the schedule and the repetitions.
    labels
        The label column as the label party holds it (any two values; see
        ``settings.positive_label``), in the row order of ``label_ids``.
    label_ids
        Row IDs of the labels, checked against every party's ID digest.
    label
        The label column's name; a party whose table contains it refuses to run.
    checkpoint_dir
        Where the label party keeps the finished repetitions (after each but the last)
        and resumes from: a lost party, or a rerun, starts again at the first unfinished
        repetition, whose setup gives every party fresh models from its seed; ``None``:
        no checkpoints, and a lost party stops the run.
    **common
        The settings every strategy takes (:class:`~.base.VerticalStrategy`):
        ``n_parties`` (non-label parties), ``seed`` (the first repetition's; repetition
        ``r`` uses ``seed + r``), ``data_spec``, the exchange settings and ``progress``;
        not ``publish_rows`` (no table is published).
    """

    def __init__(
        self,
        method: Method | str,
        settings: GAFMSettings,
        *,
        labels: pd.Series | np.ndarray,
        label_ids: pd.Series,
        label: str,
        checkpoint_dir: str | Path | None = None,
        **common: Unpack[StrategyArgs],
    ) -> None:
        from flwr_vflgan.gafm.training import binary_labels

        if common.get("publish_rows") is not None:
            raise ValueError("split classification publishes no table: drop publish_rows")
        if common.get("key_agreement"):
            raise ValueError(
                "split classification has no shared seed to agree on: "
                "runtime.key_agreement applies to the GAN families"
            )
        super().__init__(**common, min_parties=1)
        self.method = Method(method)
        self.settings = settings
        self.labels, self.positive = binary_labels(np.asarray(labels), settings.positive_label)
        if len(label_ids) != len(self.labels):
            raise ValueError(f"{len(label_ids)} label IDs for {len(self.labels)} labels")
        self.label_ids = pd.Series(label_ids).reset_index(drop=True)
        self.label_digest = id_digest(self.label_ids)
        self._every_label = self.labels
        self.label = label
        self.exchanges = 0
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None

    def summary(self) -> str:
        """One line describing the configured run."""
        g = self.settings
        return (
            f"GAFMStrategy({self.method.value}, label party + {self.n_parties} non-label "
            f"parties, {g.repetitions} seeds, epochs={g.epochs}, batch={g.batch_size})"
        )

    # -- the run (VerticalStrategy.start's steps) -------------------------------------------
    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> _GAFMRun:
        """The link to the non-label parties (each repetition has its own setup) and the
        repetitions the last checkpoint holds. With ``align_ids`` the label party first
        leads a private set intersection of its IDs with the parties' and keeps the labels
        of the people every party holds, in its own order."""
        run = _GAFMRun(_FlowerLink(self, grid, nodes), started)
        if self.align_ids:
            taken, rows = self.align_to_ids(grid, nodes, self.label_ids.tolist())
            self.exchanges += taken
            self.labels = self._every_label[rows]
            self.label_digest = id_digest(self.label_ids.iloc[rows].reset_index(drop=True))
        found = load_server_state(self.checkpoint_dir, self._run_config(), key_agreement=False)
        if found is not None:
            run.results = [RepetitionResult(**r) for r in found[1]["repetitions"]]
            run.resumed_repetitions = len(run.results)
            log.info(
                "resuming at repetition %d of %d", len(run.results) + 1, self.settings.repetitions
            )
        return run

    def cannot_resume(self) -> str | None:
        """A lost party can rejoin when the finished repetitions are checkpointed."""
        return resume_refusal(self.checkpoint_dir, key_agreement=False)

    def _run_config(self) -> str:
        """What a checkpoint must have been written under to be resumed: the method, the
        settings, the first seed, the parties and the labels (their digest)."""
        return json.dumps(
            {
                "method": self.method.value,
                "settings": self.settings.to_dict(),
                "seed": self.seed,
                "n_parties": self.n_parties,
                "labels": id_digest(pd.Series(self.labels)),
                "label_ids": self.label_digest,
            },
            sort_keys=True,
        )

    def _checkpoint(self, run: _GAFMRun) -> None:
        if self.checkpoint_dir is None or len(run.results) == self.settings.repetitions:
            return
        save_server_checkpoint(
            self.checkpoint_dir,
            len(run.results),
            {},
            {"repetitions": [r.to_dict() for r in run.results], "config": self._run_config()},
        )

    def train(self, run: _GAFMRun) -> None:
        """Every repetition not done yet, one seed each."""
        for r in range(len(run.results), self.settings.repetitions):
            result = train_repetition(
                self.method, self.settings, self.labels, run.link, self.seed + r, self.progress
            )
            log.info(
                "%s seed %d: test AUC %.4f, leak AUC norm %.3f mean %.3f median %.3f split %.3f",
                self.method.value,
                result.seed,
                result.test_auc,
                result.leak_auc["norm"],
                result.leak_auc["mean"],
                result.leak_auc["median"],
                result.leak_auc["median_split"],
            )
            run.results.append(result)
            self._checkpoint(run)

    def conclude(self, run: _GAFMRun, train_seconds: float) -> GAFMResult:
        """The repetitions' summary (the label party publishes no table)."""
        return GAFMResult(
            method=self.method.value,
            repetitions=run.results,
            summary=summarize(run.results),
            exchanges=self.exchanges,
            wall_seconds=time.monotonic() - run.started,
            n_rows=len(self.labels),
            positive_rate=float(self.labels.mean()),
            extra={
                "positive_label": self.positive,
                "resumed_repetitions": run.resumed_repetitions,
            },
        )
