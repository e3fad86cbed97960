"""VFLGAN's batch masking (paper 000, Section 3.5, end) and the guarantee against the parties.

Paper 000's amplification by subsampling holds against the server and outsiders, who do
not know which rows a step uses. The parties do: every party draws the batch from the
seed they share, so against another party a row in the batch is simply used, and the
first-layer mechanism is an un-subsampled Gaussian for every step whose batch holds it.
The paper's remedy: draw ``B_hat > B`` rows, and let each party use the gradients of
``B`` of them, chosen privately, masking the other ``B_hat - B``. A party that knows the
``B_hat`` rows then sees each of them used with probability ``B / B_hat``.

Decisions (docs/privacy.md, "Batch masking"):

* The ``B`` positions come from the party's *noise seed*, the secret its DP noise comes
  from (``noise-seed`` in a node's configuration), not from the seed the parties share:
  the others must not be able to recompute them. The same positions mask the real rows,
  their fake partners and their gradient-penalty interpolates, so the party's update is
  its mechanism on a uniform ``B``-subset of the ``B_hat`` rows, and, the ``B_hat`` being a
  uniform subset of the ``n``, on a uniform ``B``-subset of the table: the guarantee
  against the server is the one of an unmasked run.
* The server's ``D_s`` reads all ``B_hat`` rows (it takes no mask: under the first-layer
  and DP-SGD mechanisms it is outside the epsilon anyway).
* Against the parties, a row is accounted for the discriminator steps whose ``B_hat``
  batch holds it, as each party can count them: the most such steps over all rows, ``k``,
  of the batches the run actually drew. The batches are a function of the shared seed
  alone, which does not depend on the data, so conditioning on them is sound. Each of the
  ``k`` steps is the mechanism subsampled ``B`` of ``B_hat`` without replacement
  (Wang, Balle and Kasiviswanathan 2019, Theorem 27, replace-one neighbours), bounded at
  every order by the un-subsampled Gaussian (subsampling never costs privacy, and the
  theorem's bound can exceed it when ``B / B_hat`` is large). An unmasked run reports the
  same account with ``B_hat = B``: the plain Gaussian composed ``k`` times.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from flwr_vflgan.privacy.accounting import GaussianSteps, composed_rdp, epsilon_from_rdp
from flwr_vflgan.privacy.config import PrivacyPlan
from flwr_vflgan.runtime.rng import Stream, batch_indices, numpy_generator


def mask_positions(secret_seed: int, step: int, drawn: int, kept: int) -> torch.Tensor:
    """The positions, among the ``drawn`` rows of discriminator step ``step``, whose
    gradients a party keeps: ``kept`` of them, uniformly without replacement, sorted.

    Parameters
    ----------
    secret_seed
        The party's noise seed (private to it).
    step
        The global step number.
    drawn
        ``B_hat``, rows of the step's batch.
    kept
        ``B``, rows the party's update uses (``1 <= kept <= drawn``).
    """
    if not 1 <= kept <= drawn:
        raise ValueError(f"cannot keep {kept} of {drawn} rows: need 1 <= kept <= drawn")
    positions = numpy_generator(secret_seed, Stream.BATCH_MASK, step).choice(
        drawn, size=kept, replace=False
    )
    return torch.from_numpy(np.sort(positions))


def max_appearances(shared_seed: int, steps: Iterable[int], n_rows: int, drawn: int) -> int:
    """The most discriminator batches of ``drawn`` rows, among ``steps``, that hold one row.

    Recomputes each step's batch from the shared seed, as every party can.
    """
    counts = np.zeros(n_rows, dtype=np.int64)
    for step in steps:
        counts[batch_indices(shared_seed, step, n_rows, drawn).numpy()] += 1
    return int(counts.max()) if n_rows else 0


def against_parties(plan: PrivacyPlan, drawn: int, appearances: int) -> dict[str, Any]:
    """The guarantee of one party's discriminator releases against the other parties.

    Parameters
    ----------
    plan
        The party's plan (its mechanism, noise and batch size ``B``).
    drawn
        ``B_hat``: rows drawn per discriminator step (``B`` without masking).
    appearances
        ``k``: the most discriminator steps whose batch held one row
        (:func:`max_appearances`).

    Returns
    -------
    dict
        ``epsilon`` at the plan's ``delta``, with ``drawn_rows``, ``sampling_rate``
        (``B / B_hat``), ``appearances`` and ``masked``.
    """
    kept, multiplier = plan.batch_size, plan.accountant_multiplier
    config = plan.config
    if appearances == 0:
        epsilon = 0.0
    else:
        subsampled = composed_rdp([GaussianSteps(drawn, kept, multiplier, appearances)])
        plain = composed_rdp([GaussianSteps(kept, kept, multiplier, appearances)])
        epsilon = epsilon_from_rdp(np.minimum(subsampled, plain), config.delta, config.conversion)
    return {
        "epsilon": float(epsilon),
        "delta": config.delta,
        "masked": drawn > kept,
        "drawn_rows": drawn,
        "batch_size": kept,
        "sampling_rate": kept / drawn,
        "appearances": appearances,
    }
