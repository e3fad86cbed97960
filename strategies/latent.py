"""The server side of the one-round latent diffusion family as a Flower strategy.

SiloFuse (Shankar, Brouwer, Hai and Chen, ICDE 2024): each party trains an autoencoder
on its own columns and sends the latents of all its rows once; the server trains a
denoising diffusion model on the joined latents, samples synthetic latents and sends each
party its slice to decode. ``LatentDiffusionStrategy.start(grid)`` runs setup, the
latents' exchange, the diffusion model's training, and publication: three exchanges
whatever the epoch counts (plus the optional seed agreement and ID alignment before
setup). With checkpoints the server writes one after the latents arrive (phase 1) and one
after the diffusion model is trained (phase 2); a resumed run starts at the last phase
written, the parties decoding with the autoencoders of their own checkpoints.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from flwr.app import Message
from flwr.serverapp import Grid

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.latent.diffusion import LatentDiffusion
from flwr_vflgan.latent.local import diffusion_seed, sampling_seed
from flwr_vflgan.latent.messages import (
    DecodeRequest,
    EncodeRequest,
    LatentSetupReply,
    LatentsReply,
)
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.checkpoint import save_server_checkpoint
from flwr_vflgan.runtime.codec import ProtocolError
from flwr_vflgan.runtime.messages import SetupInstruction
from flwr_vflgan.runtime.rng import Stream, numpy_generator

from .base import PROGRESS_RECORD, StrategyArgs, VerticalStrategy
from .exchange import RunStopped, setup_replies
from .resume import load_server_state, resume_refusal
from .vflgan import VFLGANResult, collect_published

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

LATENTS_HELD = 1
"""Phase of a checkpoint written once the server holds every party's latents."""
DIFFUSION_TRAINED = 2
"""Phase of a checkpoint written once the diffusion model is trained."""
DIFFUSION_PREFIX = "diffusion."


@dataclass
class _Run:
    """One run's state from setup to publication."""

    grid: Grid
    order: list[int]
    n_rows: int
    widths: list[int]
    started: float
    exchanges: int = 1
    latents: np.ndarray | None = None
    model: LatentDiffusion | None = None
    history: list[dict[str, float]] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    resumed_from_phase: int | None = None


class LatentDiffusionStrategy(VerticalStrategy["_Run", VFLGANResult]):
    """Server of a one-round latent diffusion run.

    Parameters
    ----------
    config
        Algorithm configuration (``variant`` ``latent_diffusion``; sent to every party at
        setup, whose ``latent`` settings size the autoencoders and the diffusion model).
    checkpoint_dir
        Where the server writes its two checkpoints and resumes from; ``None``: none.
    party_checkpoint_root
        Directory under which parties without their own ``checkpoint-dir`` write theirs
        (``<root>/party-<id>``; simulated parties).
    **common
        The settings every strategy takes (:class:`~.base.VerticalStrategy`).
    """

    def __init__(
        self,
        config: VFLGANConfig,
        *,
        checkpoint_dir: str | Path | None = None,
        party_checkpoint_root: str | Path | None = None,
        **common: Unpack[StrategyArgs],
    ) -> None:
        if not config.is_latent:
            raise ValueError(
                "LatentDiffusionStrategy trains latent_diffusion, got variant "
                f"{config.variant.value!r}"
            )
        super().__init__(**common, min_parties=1)
        self.config = config
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.party_checkpoint_root = str(party_checkpoint_root) if party_checkpoint_root else ""

    def summary(self) -> str:
        """One line describing the configured run."""
        s = self.config.latent
        return (
            f"LatentDiffusionStrategy({self.n_parties} parties, autoencoders "
            f"{s.ae_epochs} epochs (at least {s.ae_min_steps} steps, raised to at most "
            f"{s.ae_max_epochs} epochs), diffusion {s.diffusion_epochs} epochs (at least "
            f"{s.diffusion_min_steps} steps, at most {s.diffusion_max_epochs} epochs) of T="
            f"{s.diffusion_steps}, checkpoints={'on' if self.checkpoint_dir else 'off'})"
        )

    def cannot_resume(self) -> str | None:
        """A lost party can rejoin with checkpoints (its autoencoder is in its own)."""
        return resume_refusal(self.checkpoint_dir, self.key_agreement)

    # -- the run (VerticalStrategy.start's steps) ---------------------------------------------
    def prepare(self, grid: Grid, nodes: Sequence[int], started: float) -> _Run:
        """Setup (or resumption from the server's last checkpoint): the parties' order,
        rows and latent widths."""
        server_config = json.dumps(self.config.to_dict(), sort_keys=True)
        resume = load_server_state(self.checkpoint_dir, server_config, self.key_agreement)
        phase = int(resume[1]["next_step"]) if resume else P.NO_STEP
        agreed = self.before_setup(grid, nodes)
        content = SetupInstruction(
            algorithm=server_config,
            data_spec=self.data_spec.to_json() if self.data_spec else "",
            resume_step=phase,
            run_seed=self.seed,
            checkpoint_root=self.party_checkpoint_root,
            n_parties=self.n_parties,
        ).to_content()
        replies = self.exchange(grid, [Message(content, n, P.LD_SETUP) for n in nodes], "setup")
        order, n_rows, configs = setup_replies(replies, self.n_parties)
        self.name_parties(order)
        widths = []
        for pid, cfg in enumerate(configs):
            try:
                widths.append(LatentSetupReply.width_of(cfg))
            except ProtocolError as exc:
                raise RunStopped(f"party {pid} sent a malformed setup reply: {exc}") from exc
        run = _Run(grid, order, n_rows, widths, started, exchanges=1 + agreed)
        if resume:
            self._restore(run, *resume)
        return run

    def _restore(self, run: _Run, arrays: dict[str, np.ndarray], meta: dict) -> None:
        """The latents (phase 1) and the trained diffusion model (phase 2) of a checkpoint."""
        phase = int(meta["next_step"])
        if list(meta["widths"]) != run.widths or int(meta["n_rows"]) != run.n_rows:
            raise RunStopped(
                f"the checkpoint in {self.checkpoint_dir} was written for latent widths "
                f"{meta['widths']} over {meta['n_rows']} rows, but the parties now report "
                f"{run.widths} over {run.n_rows}: start in a new run directory"
            )
        run.resumed_from_phase = phase
        run.exchanges += int(meta["exchanges"])
        run.history = list(meta["history"])
        run.phases = dict(meta["phases"])
        run.latents = arrays["latents"]
        if phase >= DIFFUSION_TRAINED:
            state = {
                k.removeprefix(DIFFUSION_PREFIX): v
                for k, v in arrays.items()
                if k.startswith(DIFFUSION_PREFIX)
            }
            run.model = LatentDiffusion.restore(
                sum(run.widths), self.config.latent, diffusion_seed(self.seed), state
            )
        log.info("resuming from phase %d (%s)", phase, _PHASES[phase])

    def train(self, run: _Run) -> None:
        """The latents' exchange (unless a checkpoint holds them), then the diffusion
        model's training on the server."""
        if run.latents is None:
            begun = time.monotonic()
            run.latents = self._collect_latents(run)
            run.phases["autoencoders"] = time.monotonic() - begun
            self._checkpoint(run, LATENTS_HELD)
        if run.model is None:
            begun = time.monotonic()
            model = LatentDiffusion(sum(run.widths), self.config.latent, diffusion_seed(self.seed))
            losses = model.fit(run.latents, self._log_epoch(run))
            run.model = model
            run.phases["diffusion"] = time.monotonic() - begun
            log.info("diffusion model trained: final loss %.4f", losses[-1] if losses else 0.0)
            self._checkpoint(run, DIFFUSION_TRAINED)

    def _collect_latents(self, run: _Run) -> np.ndarray:
        """One exchange: every party's latents, joined in party order."""
        request = EncodeRequest(checkpoint=self.checkpoint_dir is not None).to_content()
        replies = self.exchange(
            run.grid, [Message(request, n, P.LD_ENCODE) for n in run.order], "latents"
        )
        run.exchanges += 1
        blocks = []
        for width, node in zip(run.widths, run.order, strict=True):
            try:
                reply = LatentsReply.from_content(replies[node].content, run.n_rows, width)
            except ProtocolError as exc:
                raise RunStopped(f"{self.party(node)} sent malformed latents: {exc}") from exc
            blocks.append(reply.latents)
        return np.concatenate(blocks, axis=1)

    def _log_epoch(self, run: _Run) -> Callable[[int, float], None]:
        total = self.config.latent.diffusion_epochs_for(run.n_rows)

        def on_epoch(epoch: int, loss: float) -> None:
            elapsed = time.monotonic() - run.started
            record = {"epoch": epoch + 1, "diffusion_loss": float(loss), "elapsed": elapsed}
            run.history.append(record)
            log.info(
                "diffusion epoch %d/%d loss %.4f", epoch + 1, total, loss, extra=PROGRESS_RECORD
            )
            if self.progress is not None:
                self.progress({**record, "total_epochs": total})

        return on_epoch

    def _checkpoint(self, run: _Run, phase: int) -> None:
        if self.checkpoint_dir is None:
            return
        assert run.latents is not None
        arrays = {"latents": run.latents}
        if run.model is not None:
            arrays.update({DIFFUSION_PREFIX + k: v for k, v in run.model.state().items()})
        save_server_checkpoint(
            self.checkpoint_dir,
            phase,
            arrays,
            {
                "widths": run.widths,
                "n_rows": run.n_rows,
                "exchanges": run.exchanges,
                "history": run.history,
                "phases": run.phases,
                "config": json.dumps(self.config.to_dict(), sort_keys=True),
            },
        )

    def conclude(self, run: _Run, train_seconds: float) -> VFLGANResult:
        """Sample the synthetic latents, send each party its slice, join the decoded
        columns and shuffle the rows."""
        assert run.model is not None
        rows = self.publish_rows or run.n_rows
        begun = time.monotonic()
        sampled = run.model.sample(rows, sampling_seed(self.seed))
        run.phases["sampling"] = time.monotonic() - begun
        begun = time.monotonic()
        slices = np.split(sampled, np.cumsum(run.widths)[:-1], axis=1)
        messages = [
            Message(DecodeRequest(np.ascontiguousarray(s)).to_content(), node, P.LD_DECODE)
            for s, node in zip(slices, run.order, strict=True)
        ]
        replies = self.exchange(run.grid, messages, "publication")
        table, _ = collect_published(replies, run.order, rows, private=False)
        run.phases["decoding"] = time.monotonic() - begun
        permutation = numpy_generator(self.seed, Stream.PUBLISH).permutation(rows)
        return VFLGANResult(
            synthetic=table.iloc[permutation].reset_index(drop=True),
            history=run.history,
            steps=self.config.latent.diffusion_epochs_for(run.n_rows),
            exchanges=run.exchanges + 1,
            wall_seconds=time.monotonic() - run.started,
            n_rows=run.n_rows,
            resumed_from_step=run.resumed_from_phase,
            train_seconds=train_seconds,
            phases=run.phases,
        )


_PHASES = {LATENTS_HELD: "latents held", DIFFUSION_TRAINED: "diffusion model trained"}
