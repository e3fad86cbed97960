"""What a strategy with checkpoints needs to resume a run: the server's newest checkpoint
(checked against the run's configuration) and the reasons a run cannot take a lost party
back. Shared by the families that write checkpoints (VFLGAN's and VT-GAN)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flwr_vflgan.config import settings_as_read_now
from flwr_vflgan.runtime.checkpoint import latest_server_checkpoint, refuse_other_config

from .exchange import RunStopped

AGREED_SEED_ON_RESUME = (
    "runtime.key_agreement draws a new shared seed for every run, but a resumed run needs "
    "the seed of the run it resumes: give every party the same node_config 'shared-seed' "
    "to resume, or start in a new directory"
)


def resume_refusal(checkpoint_dir: Path | None, key_agreement: bool) -> str | None:
    """Why a run with these settings cannot resume from its last checkpoint after a party
    is lost (``None``: it can)."""
    if checkpoint_dir is None:
        return "it keeps no checkpoints (output.checkpoint=false)"
    if key_agreement:
        return (
            "runtime.key_agreement agrees on a new shared seed at every setup, and "
            "resuming needs the old one"
        )
    return None


def load_server_state(
    checkpoint_dir: Path | None, server_config: str, key_agreement: bool
) -> tuple[dict[str, np.ndarray], dict] | None:
    """The arrays and metadata of the newest server checkpoint in ``checkpoint_dir``, or
    ``None`` (no directory, or nothing written yet: the run starts afresh).

    Raises
    ------
    ValueError
        The checkpoint was written under another configuration.
    RunStopped
        There is one to resume, but the parties agree on a new shared seed at setup.
    """
    if checkpoint_dir is None:
        return None
    found = latest_server_checkpoint(checkpoint_dir)
    if found is None:
        return None
    arrays, meta = found
    refuse_other_config(checkpoint_dir, meta["config"], server_config, settings_as_read_now)
    if key_agreement:
        raise RunStopped(AGREED_SEED_ON_RESUME)
    return arrays, meta
