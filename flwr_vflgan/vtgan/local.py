"""VT-GAN's training step sequence run directly on the party and server objects.

This is Algorithm 1 of paper 001 without a network: the Flower strategy and clients
exchange exactly these values as messages. It trains the centralized baseline (one
client holding every column: CTGAN's conditional tabular GAN with the same blocks) and
lets unit tests check the protocol's arithmetic without Flower.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from flwr_vflgan.gan.schedule import Schedule, StepKind

from .blocks import (
    BlockForward,
    blocks,
    party_apply_critic_block,
    party_forward_block,
    server_critic_block,
)
from .party import VTGANParty
from .server import VTGANServer

Observer = Callable[[dict], None]


def run_block(
    steps: range,
    kind: StepKind,
    server: VTGANServer,
    parties: Sequence[VTGANParty],
    observe: Observer | None = None,
) -> dict[str, list[float]]:
    """One block of steps (:mod:`~flwr_vflgan.vtgan.blocks`); returns its losses.

    ``observe`` receives what the server learns in each critic step (the chosen client,
    its conditions and its row indices), as the shuffling test's attacker would record it.
    """
    batch = server.train.batch_size
    generator = kind is StepKind.GENERATOR
    clients = [server.choose_client(step) for step in steps]
    conditions = [parties[c].condition(step, batch) for step, c in zip(steps, clients, strict=True)]
    cond_fake = [server.full_condition(c, d.cond) for c, d in zip(clients, conditions, strict=True)]
    chunks = [
        server.chunks(step, cond, keep_graph=generator)
        for step, cond in zip(steps, cond_fake, strict=True)
    ]
    mine = [[c == i for c in clients] for i in range(len(parties))]
    forwards = [
        party_forward_block(party, steps, [c[i] for c in chunks], mine[i], not generator)
        for i, party in enumerate(parties)
    ]
    if generator:
        return _generator_step(
            steps[0], clients[0], server, parties, forwards, chunks[0], cond_fake[0]
        )
    for j, (step, client) in enumerate(zip(steps, clients, strict=True)):
        rows = forwards[client].rows[j]
        # Without DP the chosen client names its rows; under DP the batch is uniform and
        # every client sends the same rows, unnamed.
        assert (rows is None) == (server.privacy is not None)
        if observe is not None and rows is not None:
            observe({"step": step, "client": client, "cond": conditions[j].cond_real, "rows": rows})
    cond_real = [
        server.full_condition(c, d.cond_real) for c, d in zip(clients, conditions, strict=True)
    ]
    grads, losses = server_critic_block(server, steps, clients, cond_real, cond_fake, forwards)
    for i, party in enumerate(parties):
        party_apply_critic_block(party, steps, [c[i] for c in chunks], mine[i], grads[i])
    return {"d_loss": losses}


def _generator_step(
    step: int,
    client: int,
    server: VTGANServer,
    parties: Sequence[VTGANParty],
    forwards: Sequence[BlockForward],
    chunks: Sequence[torch.Tensor],
    cond: torch.Tensor,
) -> dict[str, list[float]]:
    grads, loss = server.generator_loss(step, [f.fake[0] for f in forwards], cond)
    chunk_grads, cond_losses = [], []
    for i, party in enumerate(parties):
        chunk_grad, cond_loss = party.apply_generator(step, chunks[i], i == client, grads[i])
        chunk_grads.append(chunk_grad)
        cond_losses.append(cond_loss)
    server.generator_update(chunk_grads)
    if server.settings.shuffle:
        for party in parties:
            party.shuffle()
    return {"g_loss": [loss], "cond_loss": [float(sum(cond_losses))]}


def run_step(
    step: int,
    kind: StepKind,
    server: VTGANServer,
    parties: Sequence[VTGANParty],
    observe: Observer | None = None,
) -> dict[str, float]:
    """One step as a block of its own (``K = 1``, Algorithm 1); returns its losses."""
    losses = run_block(range(step, step + 1), kind, server, parties, observe)
    return {key: values[0] for key, values in losses.items()}


def train_local(
    schedule: Schedule,
    server: VTGANServer,
    parties: Sequence[VTGANParty],
    observe: Observer | None = None,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    steps_per_exchange: int = 1,
) -> list[dict[str, float]]:
    """Every step of ``schedule``, ``steps_per_exchange`` critic steps per block; returns
    the mean losses of each epoch."""
    history: list[dict[str, float]] = []
    sums: dict[str, list[float]] = {}
    for steps in blocks(schedule, steps_per_exchange):
        for key, values in run_block(
            steps, schedule.kind(steps[0]), server, parties, observe
        ).items():
            sums.setdefault(key, []).extend(values)
        last = steps[-1]
        if schedule.ends_epoch(last) or last + 1 == schedule.total_steps:
            record = {"epoch": float(schedule.epoch_of(last)), "step": float(last + 1)}
            record.update({k: float(np.mean(v)) for k, v in sums.items()})
            history.append(record)
            sums = {}
            if on_epoch is not None:
                on_epoch(schedule.epoch_of(last), {**record, "total_steps": schedule.total_steps})
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
