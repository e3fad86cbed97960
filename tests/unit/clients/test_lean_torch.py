"""A party node keeps TorchDynamo (and sympy) unloaded: the stand-in answers the
optimizer's two calls as eager PyTorch does, training is bit for bit the same, and
anything else brings the real module back."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest
import torch

from flwr_vflgan.clients.lean_torch import DeferredDynamo

# A party's training for a few steps (checkpointing its optimizers too); prints the
# SHA-256 of its parameters and optimizer state and whether sympy / dynamo were loaded.
_PARTY = """
import hashlib, json, sys
import torch
if sys.argv[1] == "lean":
    from flwr_vflgan.clients.lean_torch import defer_torch_dynamo
    assert defer_torch_dynamo()
torch.set_num_threads(1)
from flwr_vflgan.clients.client_app import app  # what the node loads
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.schedule import Schedule, StepKind
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.runtime.party_data import DataSpec, party_block
data = party_block(DataSpec(source="adult", n_parties=2), 0)
config = VFLGANConfig.from_dict(json.loads(sys.argv[2]))
plan = None
if config.dp.enabled:
    from flwr_vflgan.privacy.config import plan_privacy
    plan = plan_privacy(config.dp, dataset_size=data.n_rows, batch_size=64, planned_steps=100)
trainer = PartyTrainer(config, data.encoder.spans, data.encoded, 1, 0, privacy=plan)
schedule = Schedule(data.n_rows, 64, 5, 1, None)
shape = (64, config.model.feature_dim)
for step in range(8):
    kind = schedule.kind(step)
    trainer.forward(step, kind)
    real = torch.full(shape, 1e-2) if kind is StepKind.DISCRIMINATOR else None
    trainer.apply(step, kind, real, torch.full(shape, -1e-2))
    for optimizer in (trainer.g_opt, trainer.d_opt):
        optimizer.load_state_dict(optimizer.state_dict())
digest = hashlib.sha256(trainer.state.to_numpy().tobytes()).hexdigest()
print(json.dumps({"state": digest, "sympy": "sympy" in sys.modules,
                  "dynamo": type(sys.modules.get("torch._dynamo")).__name__}))
"""


def _party(mode: str, config: str = "{}") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _PARTY, mode, config], check=True, capture_output=True, text=True
    )
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_lean_party_trains_bit_for_bit_without_loading_dynamo() -> None:
    plain, lean = _party("plain"), _party("lean")
    assert plain["sympy"] and plain["dynamo"] == "module"  # what the stand-in saves
    assert not lean["sympy"] and lean["dynamo"] == "DeferredDynamo"
    assert lean["state"] == plain["state"]


def test_a_lean_party_trains_the_same_under_dp() -> None:
    """The DP mechanism's path (first-layer noise) through the same optimizers."""
    config = '{"dp": {"mechanism": "vflgan_gaussian", "target_epsilon": 5.0}}'
    assert _party("lean", config)["state"] == _party("plain", config)["state"]


def test_the_optimizer_path_uses_only_the_two_names_the_stand_in_answers() -> None:
    """Fails when a torch release calls something else of torch._dynamo on every step
    (the stand-in would then load the real module and the memory saving would be gone)."""
    from torch import _compile
    from torch.optim import optimizer

    used = set()
    for source in (
        inspect.getsource(optimizer._use_grad_for_differentiable),
        inspect.getsource(_compile._disable_dynamo),
    ):
        used |= set(re.findall(r"torch\._dynamo\.(\w+)", source))
    assert used == {"graph_break", "disable"}, used
    assert re.search(
        r"torch\._dynamo\.disable\(fn, recursive, wrapping=False\)",
        inspect.getsource(_compile._disable_dynamo),
    )


def test_the_stand_in_answers_as_eager_torch_and_loads_the_real_module_for_anything_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stand_in = DeferredDynamo()

    def f(x: int) -> int:
        return x + 1

    assert stand_in.graph_break() is None
    assert stand_in.disable(f, True, wrapping=False) is f
    assert stand_in.disable(recursive=False)(f) is f
    with pytest.raises(AttributeError):
        stand_in.__file__  # noqa: B018  (introspection must not load the compiler)
    loaded: list[str] = []
    real = torch._dynamo  # already loaded in this process
    monkeypatch.setattr(
        "flwr_vflgan.clients.lean_torch.load_real_dynamo", lambda: loaded.append("x") or real
    )
    assert stand_in.is_compiling is real.is_compiling
    assert loaded == ["x"]
