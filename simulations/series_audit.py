"""The one-run privacy audit on series (``algorithm=vflgan_ts``): the game of
:mod:`~flwr_vflgan.simulations.audit` with real series as canaries.

    python -m simulations.audit algorithm=vflgan_ts dataset=sine6 train.epochs=50
    python -m simulations.audit algorithm=vflgan_ts dataset=basic_motions \\
        audit.canaries=40 audit.train_rows=null 'audit.guesses=[5,10,20]'

**Decision.** A table's canaries are drawn uniformly from its columns' ranges; a series
drawn that way is white noise, which no series generator reproduces, so it would tell
nothing. Here the canaries are ``audit.canaries`` of the dataset's own series, chosen
at random; each joins the training series on a fair coin, beside ``audit.train_rows``
of the other series (all of them when null). Steinke, Nasr and Jagielski's bound needs
only that the coins are independent and fair, not how the canaries were chosen, so the
same :func:`~flwr_vflgan.privacy.audit.one_run_audit` bounds epsilon from below. This is
the leave-one-out membership game on real records.

The run trains on ``train.parquet`` (the kept and included series in long format) as a
user's series file: each party scales its channels by their minimum and maximum (the
sine data's ordinary run trains unscaled). Two scores, each its own bound:

* ``table`` (black-box): :func:`series_membership_scores` on the published
  ``synthetic.csv``;
* ``critic`` (white-box): :func:`series_critic_scores`, the discriminators' logit of
  each canary in the run's newest checkpoints, as the discriminators' own loss sums
  them: every attribute discriminator's, plus the shared discriminator's on the
  parties' features (or, without it, each party's extractor head). Under
  ``dp=vflgan_gaussian`` the critic holds the shared discriminator and the later layers
  the first-layer guarantee leaves out.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data.series import SeriesEncoder, series_long_frame
from flwr_vflgan.data.series_files import read_series_file
from flwr_vflgan.privacy.audit import nearest_ratio_scores
from flwr_vflgan.runtime.party_data import series_blocks, series_table
from flwr_vflgan.simulations.audit_config import (
    AuditConfig,
    AuditGame,
    audit_seed,
    load_newest,
    write_training_table,
)
from flwr_vflgan.simulations.config import RunSpec


def series_game(
    spec: RunSpec, audit: AuditConfig, audit_dir: Path, scores: tuple[str, ...] = ("table",)
) -> AuditGame:
    """The one-run game on ``spec``'s series (module docstring), judged by ``scores``
    (``table``, ``critic``): ``train.parquet`` and ``canaries.parquet`` (the canaries in
    long format, each row with its series' coin in ``_included``) written to
    ``audit_dir``, the run in ``audit_dir/run``.

    Raises
    ------
    ValueError
        ``audit.canaries`` leaves no series to train on besides them.
    FileExistsError
        ``audit_dir`` holds another audit's training series.
    """
    table = series_table(spec.data)
    n = table.n_series
    if audit.canaries >= n:
        raise ValueError(
            f"audit.canaries={audit.canaries} leaves none of the {n} series of dataset "
            f"{spec.data.source!r} to train on besides them: choose at most {n - 1}"
        )
    rng = np.random.default_rng(audit_seed(spec, audit))
    order = rng.permutation(n)
    canaries, rest = np.sort(order[: audit.canaries]), np.sort(order[audit.canaries :])
    kept = (
        rest
        if audit.train_rows is None or audit.train_rows >= len(rest)
        else np.sort(rng.choice(rest, audit.train_rows, replace=False))
    )
    included = rng.random(audit.canaries) < 0.5
    trained = np.concatenate([kept, canaries[included]])
    shuffle = np.random.default_rng(audit.seed if audit.seed is not None else spec.seed)
    trained = trained[shuffle.permutation(len(trained))]
    write_training_table(
        audit_dir / "train.parquet", series_long_frame(table.values[trained], table.channels)
    )
    marked = series_long_frame(table.values[canaries], table.channels)
    marked["_included"] = np.repeat(included, table.length)
    write_atomically(
        audit_dir / "canaries.parquet",
        lambda p: marked.to_parquet(p, index=False),
        suffix=".parquet",
    )
    data = replace(
        spec.data,
        source=str((audit_dir / "train.parquet").resolve()),
        id_column="series",
        time_column="t",
        drop=(),
    )
    train = replace(spec, data=data, run_dir=audit_dir / "run")
    every = {
        "table": partial(_table_scores, train, table.values[canaries], table.values[kept]),
        "critic": partial(series_critic_scores, train, table.values[canaries]),
    }
    return AuditGame(train, len(trained), included, {name: every[name] for name in scores})


def _table_scores(train: RunSpec, canaries: np.ndarray, kept: np.ndarray) -> np.ndarray:
    synthetic, _, _ = read_series_file(
        train.run_dir / "synthetic.csv", id_column="series", time_column="t"
    )
    return series_membership_scores(canaries, synthetic, kept)


def series_critic_scores(train: RunSpec, canaries: np.ndarray) -> np.ndarray:
    """The trained discriminators' logit of every canary ``(m, channels, length)``, in
    the data's units: each party encodes its channels with the scaling it fitted on the
    series trained on, its attribute discriminators and feature extractor come from its
    newest checkpoint under ``train.run_dir/checkpoints``, the server's shared
    discriminator from the server's (module docstring); dropout is off.

    Raises
    ------
    ValueError
        The run left no checkpoints.
    """
    from flwr_vflgan.series.training import SeriesParty, SeriesServer

    config = train.algorithm
    root = train.run_dir / "checkpoints"
    table = series_table(train.data)
    blocks = series_blocks(train.data)
    score = torch.zeros(len(canaries))
    features = []
    for party, (held, block) in enumerate(zip(table.parties, blocks, strict=True)):
        assert isinstance(block.encoder, SeriesEncoder)  # series_blocks builds them
        trainer = SeriesParty(config, len(held), table.length, block.encoded, 0, party)
        load_newest(trainer.state, root / f"party-{party}", "step")
        disc = trainer.discriminator.eval()
        x = torch.from_numpy(block.encoder.encode(canaries[:, list(held), :]))
        with torch.no_grad():
            features.append(disc.features(x))
            score += torch.cat(disc.attribute_logits(x), dim=1).sum(dim=1)
            if not config.series.train.shared_discriminator:
                score += disc.extractor.head(features[-1]).reshape(-1)
    if config.series.train.shared_discriminator:
        server = SeriesServer(config, len(blocks), 0)
        load_newest(server.state, root, "server")
        with torch.no_grad():
            score += server.discriminator.eval()(torch.cat(features, dim=1)).reshape(-1)
    return score.numpy().astype(np.float64)


def series_membership_scores(
    canaries: np.ndarray, synthetic: np.ndarray, reference: np.ndarray
) -> np.ndarray:
    """Each canary series' ``log(d_ref / d_syn)``
    (:func:`~flwr_vflgan.privacy.audit.nearest_ratio_scores`): the Euclidean distance of
    the whole series, every channel min-max scaled by ``reference``'s range (the kept
    series, which the auditor knows), to its nearest synthetic and nearest reference
    series. All three are ``(n, channels, length)``.

    Raises
    ------
    ValueError
        The arrays' channels or lengths differ.
    """
    shapes = {canaries.shape[1:], synthetic.shape[1:], reference.shape[1:]}
    if len(shapes) != 1:
        raise ValueError(
            f"canaries, synthetic and reference series differ in (channels, length): "
            f"{canaries.shape[1:]}, {synthetic.shape[1:]}, {reference.shape[1:]}"
        )
    low = reference.min(axis=(0, 2), keepdims=True)
    span = np.maximum(reference.max(axis=(0, 2), keepdims=True) - low, 1e-12)

    def flat(values: np.ndarray) -> np.ndarray:
        return ((values - low) / span).reshape(len(values), -1).astype(np.float64)

    return nearest_ratio_scores(flat(canaries), flat(synthetic), flat(reference))
