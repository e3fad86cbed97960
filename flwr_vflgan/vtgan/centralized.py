"""VT-GAN's centralized baseline (paper 001, Section 4.1): the same conditional tabular
GAN with one data holder that has every column.

It runs the exact step sequence of :mod:`flwr_vflgan.vtgan.local` with a single client:
the same encoder, conditional vectors, residual and FN blocks (a client with every column
gets the whole block width), losses and schedule, so a comparison with VT-GAN isolates
the effect of splitting the table. With one client the "every row" path of the
non-chosen clients never runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.schema import Schema
from flwr_vflgan.gan.schedule import Schedule, announce_length
from flwr_vflgan.runtime.rng import Stream, derive_seed, numpy_generator

from .config import VTGANRunSettings
from .local import generate_local, train_local
from .party import VTGANParty
from .privacy import plan_vtgan_privacy
from .server import ClientShape, VTGANServer


@dataclass
class CentralizedResult:
    """The published table and the per-epoch losses."""

    synthetic: pd.DataFrame
    history: list[dict[str, float]]
    steps: int
    privacy: list[dict] = field(default_factory=list)


def train_ctgan(
    config: VTGANRunSettings,
    frame: pd.DataFrame,
    schema: Schema,
    seed: int,
    publish_rows: int | None = None,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
) -> CentralizedResult:
    """Train the centralized conditional tabular GAN on ``frame`` and publish a table."""
    settings, train = config.vtgan, config.train
    private = derive_seed(seed, Stream.INIT, 1, 1)
    encoder = ModeSpecificEncoder(
        max_modes=settings.max_modes,
        weight_threshold=settings.mode_weight_threshold,
        seed=private % (2**31),
        point_mass_share=settings.point_mass_share,
    ).fit(frame, schema)
    encoded = encoder.transform(frame, numpy_generator(private, Stream.INIT, 2))
    shape = ClientShape(
        n_columns=len(schema.names),
        encoded_width=int(encoded.shape[1]),
        cond_dim=sum(s.width for s in encoder.discrete_spans),
    )
    n_rows = int(encoded.shape[0])
    schedule = Schedule.of(n_rows, train)
    announce_length(schedule, train)
    privacy = None
    if config.dp.enabled:
        privacy = plan_vtgan_privacy(
            config.dp,
            count_noise=settings.dp_count_noise,
            count_columns=(len(encoder.discrete_spans),),
            dataset_size=n_rows,
            batch_size=train.batch_size,
            planned_steps=schedule.d_steps_before(schedule.total_steps),
        )
    server = VTGANServer(settings, train, [shape], seed, privacy)
    party = VTGANParty(
        settings,
        train,
        encoded,
        encoder.spans,
        encoder.discrete_spans,
        server.layouts[0],
        derive_seed(seed, Stream.SHUFFLE),
        0,
        privacy,
    )
    history = train_local(schedule, server, [party], on_epoch=on_epoch)
    rows = publish_rows or n_rows
    (block,) = generate_local(server, [party], rows, 0)
    table = encoder.inverse_transform(block)
    permutation = numpy_generator(seed, Stream.PUBLISH).permutation(rows)
    d_steps = schedule.d_steps_before(schedule.total_steps)
    spent = []
    if privacy is not None:
        # One data holder: its counts, its bottom and top critic parts are one release.
        spent = [privacy.summary("centralized", d_steps, 0)]
    return CentralizedResult(
        table.iloc[permutation].reset_index(drop=True), history, schedule.total_steps, spent
    )
