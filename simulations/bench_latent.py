"""The one-round latent diffusion family's benchmark, measured in one run on one machine.

    python -m simulations.bench algorithm=latent_diffusion
    python -m simulations.bench algorithm=latent_diffusion +bench.runtimes=[inprocess,simulation]

For each runtime in ``bench.runtimes`` (default: the in-process grid) it trains and
publishes the run of the command line's settings and reports (the last line printed is
one JSON object):

* the wall seconds of each phase: the parties' autoencoders with the latents' exchange
  (``autoencoders``), the server's diffusion training (``diffusion``), sampling
  (``sampling``) and the parties' decoding with the publication exchange (``decoding``),
  and of the whole run (``wall_seconds``), with its ``exchanges``;
* bytes of array payload sent per party and direction (in-process only: the grid's tap
  sees every message), latents up and synthetic latents down;
* ``party_peak_rss_mb``: the peak RSS of a child process that runs one party's
  autoencoder training, encoding and decoding on the table.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import torch
from flwr.app import Message
from omegaconf import DictConfig

from flwr_vflgan.strategies.traffic import message_array_bytes

from .bench_vflgan import probe_peak_rss_mb
from .config import RunSpec, to_run_spec
from .pipeline import train_federated

_PARTY_PROBE = """
import json, sys
from flwr_vflgan.clients.party_process import prepare_party_process
prepare_party_process()  # as a party node and a stock SuperNode's ClientApp do
import torch
torch.set_num_threads(1)
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.latent.autoencoder import decode_latents, encode_rows, train_autoencoder
from flwr_vflgan.runtime.party_data import DataSpec, party_block
spec = DataSpec.from_json(sys.argv[1]); config = VFLGANConfig.from_dict(json.loads(sys.argv[2]))
data = party_block(spec, 0)
model, _ = train_autoencoder(data.encoded, data.encoder.spans, config.latent, 0)
latents = encode_rows(model, data.encoded)
data.encoder.inverse_transform(decode_latents(model, latents, data.encoder.spans))
"""


class _Bytes:
    """Array bytes each party sends and receives, from the in-process grid's tap."""

    def __init__(self) -> None:
        self.up: dict[int, int] = {}
        self.down: dict[int, int] = {}

    def __call__(self, message: Message) -> None:
        size = message_array_bytes(message)
        if message.metadata.reply_to_message_id:
            node = message.metadata.src_node_id
            self.up[node] = self.up.get(node, 0) + size
        else:
            node = message.metadata.dst_node_id
            self.down[node] = self.down.get(node, 0) + size

    def per_party(self) -> dict[str, list[int]]:
        nodes = sorted(set(self.up) | set(self.down))
        return {
            "sent_by_party": [self.up.get(n, 0) for n in nodes],
            "received_by_party": [self.down.get(n, 0) for n in nodes],
        }


def runtime_row(spec: RunSpec, runtime: Literal["inprocess", "simulation"]) -> dict[str, Any]:
    """One run of ``spec`` on ``runtime``: its phases, exchanges and (in-process) bytes."""
    tap = _Bytes() if runtime == "inprocess" else None
    with tempfile.TemporaryDirectory(prefix="bench-latent-") as scratch:
        run = replace(
            spec,
            runtime=replace(spec.runtime, kind=runtime),
            output=replace(spec.output, checkpoint=False),
            run_dir=Path(scratch),
        )
        result = train_federated(run, None, None, tap)
    row: dict[str, Any] = {
        "runtime": runtime,
        "wall_seconds": result.wall_seconds,
        "exchanges": result.exchanges,
        "phases": result.phases,
    }
    if tap is not None:
        row.update(tap.per_party())
    return row


def bench_runtimes(cfg: DictConfig) -> list[str]:
    """``bench.runtimes`` (default: the in-process grid), each checked.

    Raises
    ------
    ValueError
        A runtime other than ``inprocess`` and ``simulation``.
    """
    runtimes = [str(r) for r in cfg.get("bench", {}).get("runtimes", ["inprocess"])]
    for runtime in runtimes:
        if runtime not in ("inprocess", "simulation"):
            raise ValueError(
                f"bench.runtimes lists {runtime!r}; the benchmark runs inprocess and "
                "simulation (a deployment's phases are in its metrics.json)"
            )
    return runtimes


def runtime_rows(spec: RunSpec, runtimes: Sequence[str], digits: int = 1) -> list[dict[str, Any]]:
    """:func:`runtime_row` for each runtime, each printed as taken (seconds with
    ``digits`` decimals)."""
    rows = []
    for runtime in runtimes:
        row = runtime_row(spec, runtime)  # type: ignore[arg-type]  # bench_runtimes checked it
        phases = ", ".join(f"{k} {v:.{digits}f} s" for k, v in row["phases"].items())
        sent = row.get("sent_by_party")
        traffic = (
            f"; bytes sent by party {sent}, received {row['received_by_party']}" if sent else ""
        )
        print(
            f"{runtime:>10}: {row['wall_seconds']:7.{digits}f} s, {row['exchanges']} exchanges "
            f"({phases}){traffic}",
            flush=True,
        )
        rows.append(row)
    return rows


def measure(cfg: DictConfig) -> dict[str, Any]:
    """The family's benchmark: each runtime's phases and bytes, and a party's peak RSS,
    printed as taken."""
    runtimes = bench_runtimes(cfg)
    spec = to_run_spec(cfg, os.getcwd())
    torch.set_num_threads(spec.runtime.torch_threads)
    rows = runtime_rows(spec, runtimes)
    rss = probe_peak_rss_mb(_PARTY_PROBE, spec.data.to_json(), json.dumps(spec.algorithm.to_dict()))
    print(f"party peak RSS {rss:.0f} MiB", flush=True)
    return {
        "dataset": spec.data.source,
        "algorithm": spec.algorithm.variant.value,
        "n_parties": spec.data.n_parties,
        "runtimes": rows,
        "party_peak_rss_mb": rss,
    }
