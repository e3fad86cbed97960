"""VT-GAN's traffic accounting against sizes computed by hand from the protocol.

Every array is booked to the step it belongs to: gradients (and the clients' chunk
gradients) to the step they apply, chunks, features and row indices to the step run
forward, and the chosen client's conditions to the step whose forward pass they travel
with. The expected bytes below come from the shapes the clients report at setup and
build (rows ``N``, encoded width ``f``, conditional width ``c``, chunk width ``w``), the
batch ``B`` and who was chosen in each step, never from the arrays' own sizes.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from flwr.app import Message

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.strategies import InProcessGrid, VTGANStrategy

B, N, N_CRITIC = 64, 640, 5
# Flower serialises each array with numpy.save: the .npy format 1.0 header is padded so
# that the data starts at a multiple of 64 bytes, 128 bytes for these shapes.
NPY_HEADER = 128
F32, I64 = 4, 8


def _array(rows: int, width: int, itemsize: int = F32) -> int:
    return rows * width * itemsize + NPY_HEADER


def _kind(step: int) -> str:
    """Hand schedule of 640 rows at batch 64: 10 D steps, a G step after every 5."""
    return "g" if step % (N_CRITIC + 1) == N_CRITIC else "d"


def _pairs(log: list[Message], message_type: str) -> list[tuple[Message, Message]]:
    requests = {m.metadata.message_id: m for m in log if not m.metadata.reply_to_message_id}
    return [
        (requests[m.metadata.reply_to_message_id], m)
        for m in log
        if m.metadata.reply_to_message_id
        and requests[m.metadata.reply_to_message_id].metadata.message_type == message_type
    ]


def _expected(
    log: list[Message], order: list[int]
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[int, int], dict[int, int]]:
    """Bytes per kind and client in each direction, the client chosen in each D step and
    the client that sent each step's conditions."""
    shapes = {
        reply.metadata.src_node_id: reply.content[P.CONFIG] for _, reply in _pairs(log, P.VT_SETUP)
    }
    chunk = {
        req.metadata.dst_node_id: int(req.content[P.CONFIG]["chunk_width"])  # type: ignore[arg-type]
        for req, _ in _pairs(log, P.VT_BUILD)
    }
    pairs = _pairs(log, P.VT_STEP)
    # A non-chosen client's gradient covers the distinct rows the chosen client sent.
    selected: dict[int, int] = {}
    for request, reply in pairs:
        if P.ROW_INDICES in reply.content:
            step = int(request.content[P.CONFIG]["forward_start"])  # type: ignore[arg-type]
            selected[step] = len(set(reply.content[P.ROW_INDICES][P.ROW_INDICES].numpy()))
    to_client: dict[str, list[int]] = {k: [0] * len(order) for k in "dg"}
    from_client: dict[str, list[int]] = {k: [0] * len(order) for k in "dg"}
    chosen: dict[int, int] = {}
    conditioned: dict[int, int] = {}
    was_chosen: dict[tuple[int, int], bool] = {}
    for request, _reply in pairs:
        node = request.metadata.dst_node_id
        i = order.index(node)
        assert int(shapes[node]["n_rows"]) == N  # type: ignore[arg-type]
        f = int(shapes[node]["encoded_width"])  # type: ignore[arg-type]  # D2_0: features = encoded width
        c, w = int(shapes[node]["cond_dim"]), chunk[node]  # type: ignore[arg-type]
        cfg = request.content[P.CONFIG]
        applied, forward = int(cfg["apply_start"]), int(cfg["forward_start"])  # type: ignore[arg-type]
        assert int(cfg["apply_count"]) in (0, 1) and int(cfg["forward_count"]) in (0, 1)  # type: ignore[arg-type]
        if applied != P.NO_STEP:
            kind = _kind(applied)
            if kind == "g":  # fake-feature gradients out, the chunk's gradient back
                to_client[kind][i] += _array(B, f)
                from_client[kind][i] += _array(B, w)
            elif was_chosen[(i, applied)]:  # real and fake rows' gradients
                to_client[kind][i] += _array(2 * B, f)
            else:  # the selected rows' gradients and their positions, the fake rows'
                to_client[kind][i] += _array(selected[applied] + B, f)
                to_client[kind][i] += _array(selected[applied], 1, I64)
        if forward != P.NO_STEP:
            kind = _kind(forward)
            mine = bool(cfg["chosen"][0])  # type: ignore[index]
            was_chosen[(i, forward)] = mine
            to_client[kind][i] += _array(B, w)  # the chunk of G^t's output
            if kind == "d" and mine:
                chosen[forward] = i
                from_client[kind][i] += _array(2 * B, f) + _array(B, 1, I64)  # rows + indices
            elif kind == "d":
                from_client[kind][i] += _array(B + N, f)  # fake rows, then every row
            else:
                from_client[kind][i] += _array(B, f)
        steps = [int(s) for s in cfg.get("condition_steps", [])]  # type: ignore[union-attr]
        if steps:
            # cond (and cond_real for a D step), with the forward pass of the step before
            (condition,) = steps
            conditioned[condition] = i
            kind = _kind(max(condition - 1, 0))
            from_client[kind][i] += _array((2 if _kind(condition) == "d" else 1) * B, c)
    return to_client, from_client, chosen, conditioned


@pytest.mark.parametrize("n_parties", [2, 3])
def test_traffic_per_step_matches_the_protocol_by_hand(adult_small: Path, n_parties: int) -> None:
    config = VFLGANConfig.from_dict(
        {
            "variant": "vtgan",
            "train": {"epochs": 1, "batch_size": B, "n_critic": N_CRITIC},
            "vtgan": {"latent_dim": 16, "generator_width": 32, "discriminator_width": 32},
        }
    )
    log: list[Message] = []
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": 12345} for i in range(n_parties)],
        observer=log.append,
    )
    spec = DataSpec(source=str(adult_small), n_parties=n_parties)
    strategy = VTGANStrategy(config, n_parties=n_parties, seed=5, data_spec=spec, publish_rows=16)
    result = strategy.start(grid)
    assert result.steps == 12
    assert strategy.traffic.steps == {"d": 10, "g": 2}

    order = sorted(grid.get_node_ids())  # partition i is node 1001 + i
    to_client, from_client, chosen, conditioned = _expected(log, order)
    assert sorted(conditioned) == list(range(12))
    # the client whose conditions drive a D step is the one that sends its rows' indices
    assert chosen == {s: conditioned[s] for s in range(12) if _kind(s) == "d"}
    assert strategy.traffic.to_client == to_client
    assert strategy.traffic.from_client == from_client

    per_step = strategy.traffic.per_step()
    widths = [
        int(reply.content[P.CONFIG]["encoded_width"])  # type: ignore[arg-type]
        for _, reply in sorted(
            _pairs(log, P.VT_SETUP), key=lambda pair: pair[1].metadata.src_node_id
        )
    ]
    counts: dict[int, int] = defaultdict(int)
    for client in chosen.values():
        counts[client] += 1
    for i, f in enumerate(widths):
        assert per_step["d"]["from_client"][i] == pytest.approx(from_client["d"][i] / 10)
        assert per_step["g"]["to_client"][i] == pytest.approx(to_client["g"][i] / 2)
        # real features alone: N rows in the steps this client was not chosen, B otherwise;
        # what comes back is a batch's worth of rows per step, not N
        real_features = ((10 - counts[i]) * N + counts[i] * B) * f * F32
        assert per_step["d"]["from_client"][i] > real_features / 10
        assert per_step["d"]["to_client"][i] < 4 * B * f * F32
