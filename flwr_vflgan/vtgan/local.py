"""VT-GAN's training step sequence run directly on the party and server objects.

This is Algorithm 1 of paper 001 without a network: the Flower strategy and clients
exchange exactly these values as messages. It trains the centralized baseline (one
client holding every column: CTGAN's conditional tabular GAN with the same blocks) and
lets unit tests check the protocol's arithmetic without Flower.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from flwr_vflgan.gan.schedule import Schedule, StepKind

from .party import VTGANParty
from .server import VTGANServer

Observer = Callable[[dict], None]


def run_step(
    step: int,
    kind: StepKind,
    server: VTGANServer,
    parties: Sequence[VTGANParty],
    observe: Observer | None = None,
) -> dict[str, float]:
    """One discriminator or generator step; returns its losses.

    ``observe`` receives what the server learns in the step (the chosen client, its
    conditions and its row indices), as the shuffling test's attacker would record it.
    """
    batch = server.train.batch_size
    client = server.choose_client(step)
    condition = parties[client].condition(step, batch)
    cond_fake = server.full_condition(client, condition.cond)
    chunks = server.chunks(step, cond_fake, keep_graph=kind is StepKind.GENERATOR)
    fake = [party.forward_fake(step, chunk) for party, chunk in zip(parties, chunks, strict=True)]
    if kind is StepKind.DISCRIMINATOR:
        real = [party.forward_real(step, i == client) for i, party in enumerate(parties)]
        rows = real[client].rows
        # Without DP the chosen client names its rows; under DP the batch is uniform and
        # every client sends the same rows, unnamed.
        assert (rows is None) == (server.privacy is not None)
        if observe is not None and rows is not None:
            observe({"step": step, "client": client, "cond": condition.cond_real, "rows": rows})
        cond_real = server.full_condition(client, condition.cond_real)
        grads_real, grads_fake, loss = server.discriminator_step(
            step, client, [r.features for r in real], rows, fake, cond_real, cond_fake
        )
        for i, party in enumerate(parties):
            party.apply_discriminator(step, chunks[i], i == client, grads_real[i], grads_fake[i])
        return {"d_loss": loss}
    grads, loss = server.generator_loss(step, fake, cond_fake)
    chunk_grads, cond_losses = [], []
    for i, party in enumerate(parties):
        chunk_grad, cond_loss = party.apply_generator(step, chunks[i], i == client, grads[i])
        chunk_grads.append(chunk_grad)
        cond_losses.append(cond_loss)
    server.generator_update(chunk_grads)
    if server.settings.shuffle:
        for party in parties:
            party.shuffle()
    return {"g_loss": loss, "cond_loss": float(sum(cond_losses))}


def train_local(
    schedule: Schedule,
    server: VTGANServer,
    parties: Sequence[VTGANParty],
    observe: Observer | None = None,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Every step of ``schedule``; returns the mean losses of each epoch."""
    history: list[dict[str, float]] = []
    sums: dict[str, list[float]] = {}
    for step in range(schedule.total_steps):
        losses = run_step(step, schedule.kind(step), server, parties, observe)
        for key, value in losses.items():
            sums.setdefault(key, []).append(value)
        if schedule.ends_epoch(step) or step + 1 == schedule.total_steps:
            record = {"epoch": float(schedule.epoch_of(step)), "step": float(step + 1)}
            record.update({k: float(np.mean(v)) for k, v in sums.items()})
            history.append(record)
            sums = {}
            if on_epoch is not None:
                on_epoch(schedule.epoch_of(step), {**record, "total_steps": schedule.total_steps})
    return history


def generate_local(
    server: VTGANServer, parties: Sequence[VTGANParty], n_rows: int, draw: int
) -> list[np.ndarray]:
    """Encoded synthetic rows of every client (not yet shuffled), for publication."""
    owners = server.generation_owners(n_rows, draw)
    parts = {
        int(client): parties[client].generation_conditions(int((owners == client).sum()), draw)
        for client in np.unique(owners)
    }
    chunks = server.generation_chunks(server.assemble_condition(owners, parts), draw)
    return [
        party.generate(chunk, draw).numpy() for party, chunk in zip(parties, chunks, strict=True)
    ]
