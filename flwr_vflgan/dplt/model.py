"""DPLT's mathematics: binary attributes, their grouping, the latent attributes, the tree.

The differentially private latent tree (Tang, Cheng, Su, Chen and Shao, IEEE TDSC 2019),
as paper 004 (Section 3.3) describes it: every attribute becomes bits (PrivBayes' binary
encoding), each party groups its correlated bits and summarises each group by a latent
attribute, the server joins the latent attributes by a maximum spanning tree of their
pairwise mutual information, and synthesis samples the tree from root to leaves, each
party then drawing its bits given its latent attributes. The reference code is not
public; every choice the two papers leave open is written where it is made and in
docs/privacy.md ("DPLT").

Neighbours are tables of the same size that differ in one row (replacing it), as in
PrivBayes, whose mutual-information sensitivity the grouping uses: a histogram then has
L1 sensitivity 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flwr_vflgan.dplt.config import DPLTSettings

__all__ = [
    "BudgetPlan",
    "LatentGroup",
    "LatentTree",
    "bits_of",
    "codes_of",
    "group_bits",
    "group_sizes",
    "mi_sensitivity",
    "mutual_information",
    "spanning_tree",
    "state_count",
]

HISTOGRAM_SENSITIVITY = 2.0
"""L1 change of one histogram when one row is replaced."""


def code_bits(size: int) -> int:
    """Bits of a column with ``size`` codes (at least one)."""
    return max(1, math.ceil(math.log2(size)))


def bits_of(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """The binary attributes of coded columns: each column's code in
    ``code_bits(size)`` bits, lowest bit first, columns side by side (uint8)."""
    blocks = []
    for values, size in zip(codes, sizes, strict=True):
        shifts = np.arange(code_bits(size), dtype=np.int64)
        blocks.append(
            ((np.asarray(values, dtype=np.int64)[:, None] >> shifts) & 1).astype(np.uint8)
        )
    return np.concatenate(blocks, axis=1)


def codes_of(bits: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Inverse of :func:`bits_of`. A bit pattern beyond a column's codes (its domain
    enlarged by the encoding, as paper 004 notes) loses its highest bits until it is a
    code: a decision, since neither paper says how such a value is decoded."""
    out, start = [], 0
    for size in sizes:
        width = code_bits(size)
        chunk = bits[:, start : start + width].astype(np.int64)
        codes = (chunk << np.arange(width, dtype=np.int64)).sum(axis=1)
        for bit in range(width - 1, -1, -1):
            codes = np.where(codes >= size, codes & ~(1 << bit), codes)
        out.append(codes)
        start += width
    return out


def group_sizes(n_bits: int, group_size: int) -> list[int]:
    """Sizes of a party's groups: ``group_size`` bits each, the last one the rest."""
    full, rest = divmod(n_bits, group_size)
    return [group_size] * full + ([rest] if rest else [])


def state_count(bits: int, settings: DPLTSettings) -> int:
    """States of the latent attribute of a group of ``bits`` bits."""
    return min(settings.latent_states, 2**bits)


def mi_sensitivity(n_rows: int) -> float:
    """Sensitivity of the mutual information (bits) of a binary attribute with any
    attribute when one of ``n_rows`` rows is replaced (PrivBayes, Lemma 4.1)."""
    n = float(n_rows)
    if n < 2:
        return 1.0
    return math.log2(n) / n + (n - 1) / n * math.log2(n / (n - 1))


def mutual_information(joint: np.ndarray) -> float:
    """Mutual information (bits) of a joint table of counts or probabilities; a
    negative entry (noise) counts as 0."""
    p = np.clip(np.asarray(joint, dtype=np.float64), 0.0, None)
    total = p.sum()
    if total <= 0:
        return 0.0
    p = p / total
    outer = p.sum(axis=1, keepdims=True) @ p.sum(axis=0, keepdims=True)
    nz = p > 0
    return float((p[nz] * np.log2(p[nz] / outer[nz])).sum())


def _cells(bits: np.ndarray, members: Sequence[int]) -> np.ndarray:
    """Each row's joint value of the bits ``members`` (member ``j`` is bit ``j``)."""
    cells = np.zeros(bits.shape[0], dtype=np.int64)
    for j, column in enumerate(members):
        cells |= bits[:, column].astype(np.int64) << j
    return cells


def _exponential_choice(
    scores: np.ndarray, epsilon: float, sensitivity: float, rng: np.random.Generator
) -> int:
    """The exponential mechanism: index ``i`` with probability proportional to
    ``exp(epsilon * scores[i] / (2 * sensitivity))`` (drawn by the Gumbel-max trick)."""
    logits = epsilon * np.asarray(scores, dtype=np.float64) / (2.0 * sensitivity)
    return int(np.argmax(logits + rng.gumbel(size=len(logits))))


def group_bits(
    bits: np.ndarray,
    group_size: int,
    epsilon: float,
    rng: np.random.Generator,
) -> list[list[int]]:
    """A party's bits cut into groups of correlated bits (step 1).

    Each group starts with the first bit not yet grouped (a public choice: bits are in
    column order) and grows, while it has fewer than ``group_size`` bits, by the bit the
    exponential mechanism picks with score the mutual information between a candidate
    and the group's joint value, each choice at ``epsilon``. The choices made are
    ``n_bits - len(groups)``, known from the sizes alone."""
    remaining = list(range(bits.shape[1]))
    sensitivity = mi_sensitivity(bits.shape[0])
    groups = []
    while remaining:
        group = [remaining.pop(0)]
        while len(group) < group_size and remaining:
            cells = _cells(bits, group)
            scores = np.array([_bit_information(bits[:, c], cells, len(group)) for c in remaining])
            group.append(remaining.pop(_exponential_choice(scores, epsilon, sensitivity, rng)))
        groups.append(group)
    return groups


def _bit_information(bit: np.ndarray, cells: np.ndarray, width: int) -> float:
    joint = np.bincount(cells * 2 + bit.astype(np.int64), minlength=2 ** (width + 1))
    return mutual_information(joint.reshape(2**width, 2))


def noisy_counts(
    values: np.ndarray, size: int, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """The histogram of ``values`` over ``size`` cells plus Laplace noise of ``scale``."""
    counts = np.bincount(values, minlength=size).astype(np.float64)
    return counts + rng.laplace(0.0, scale, size=size)


def _probabilities(counts: np.ndarray) -> np.ndarray:
    """Noisy counts as a distribution along the last axis: negatives cut to 0, an
    all-zero row uniform."""
    p = np.clip(counts, 0.0, None)
    total = p.sum(axis=-1, keepdims=True)
    uniform = np.full_like(p, 1.0 / p.shape[-1])
    return np.where(total > 0, p / np.where(total > 0, total, 1.0), uniform)


@dataclass
class LatentGroup:
    """One group of a party's bits and its latent attribute (steps 1 and 4).

    ``histogram`` is the noisy distribution of the group's joint values, ``assignment``
    each joint value's latent state and ``posterior`` the latent class model's
    ``P(state | value)`` (used only for a state no value is assigned to)."""

    members: list[int]
    histogram: np.ndarray
    assignment: np.ndarray
    posterior: np.ndarray

    @property
    def states(self) -> int:
        """States of the latent attribute."""
        return self.posterior.shape[1]

    @classmethod
    def fit(
        cls,
        bits: np.ndarray,
        members: list[int],
        settings: DPLTSettings,
        scale: float,
        rng: np.random.Generator,
    ) -> LatentGroup:
        """The group's noisy histogram (Laplace of ``scale``) and a latent class model
        fitted to it by EM (post-processing: the rows are read once, by the histogram).
        With no more joint values than latent states, each value is its own state."""
        cells = 2 ** len(members)
        histogram = _probabilities(noisy_counts(_cells(bits, members), cells, scale, rng))
        states = state_count(len(members), settings)
        if states == cells:
            return cls(members, histogram, np.arange(cells), np.eye(cells))
        posterior = _latent_class_posterior(histogram, len(members), states, settings, rng)
        return cls(members, histogram, posterior.argmax(axis=1), posterior)

    def latents(self, bits: np.ndarray) -> np.ndarray:
        """Each row's latent state: the state its joint value is assigned to."""
        return self.assignment[_cells(bits, self.members)]

    def sample(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Bits of the group for rows of the given latent states, ``(rows, len(members))``:
        a joint value drawn from the histogram restricted to the values of the state."""
        member = (self.assignment[:, None] == np.arange(self.states)).astype(np.float64)
        conditional = self.histogram[:, None] * member  # (cells, states)
        # A state whose values all lost their noisy mass draws among its values alike; a
        # state no value is assigned to, by the latent class model's posterior.
        for fallback in (member, self.histogram[:, None] * self.posterior):
            empty = conditional.sum(axis=0) <= 0
            conditional[:, empty] = fallback[:, empty]
        conditional = _probabilities(conditional.T)  # (states, cells)
        cumulative = np.cumsum(conditional[states], axis=1)
        draws = rng.random((len(states), 1))
        cells = np.minimum((draws > cumulative).sum(axis=1), conditional.shape[1] - 1)
        return ((cells[:, None] >> np.arange(len(self.members))) & 1).astype(np.uint8)


def _latent_class_posterior(
    histogram: np.ndarray, width: int, states: int, settings: DPLTSettings, rng: np.random.Generator
) -> np.ndarray:
    """``P(state | value)`` of a latent class model (bits independent given the state,
    Zhang 2004) fitted by EM to a distribution over the ``2**width`` joint values."""
    values = ((np.arange(2**width)[:, None] >> np.arange(width)) & 1).astype(np.float64)
    prior = np.full(states, 1.0 / states)
    theta = rng.uniform(0.25, 0.75, size=(states, width))
    for _ in range(settings.em_iterations):
        log_like = values @ np.log(theta).T + (1 - values) @ np.log(1 - theta).T + np.log(prior)
        log_like -= log_like.max(axis=1, keepdims=True)
        posterior = np.exp(log_like)
        posterior /= posterior.sum(axis=1, keepdims=True)
        weight = histogram[:, None] * posterior  # (values, states)
        mass = weight.sum(axis=0)
        prior = np.clip(mass, 1e-12, None) / max(mass.sum(), 1e-12)
        theta = np.clip((weight.T @ values + 1e-6) / (mass[:, None] + 2e-6), 1e-4, 1 - 1e-4)
    return posterior


def spanning_tree(weights: np.ndarray) -> list[tuple[int, int]]:
    """A maximum spanning tree of the complete graph with edge ``weights`` (Prim's
    algorithm from node 0; ties to the lower index), as ``(parent, child)`` edges in the
    order they were added, so every parent precedes its children."""
    n = weights.shape[0]
    if n == 0:
        return []
    inside = np.zeros(n, dtype=bool)
    inside[0] = True
    best = np.where(np.arange(n) == 0, -np.inf, weights[0])
    parent = np.zeros(n, dtype=np.int64)
    edges = []
    for _ in range(n - 1):
        child = int(np.argmax(np.where(inside, -np.inf, best)))
        edges.append((int(parent[child]), child))
        inside[child] = True
        closer = ~inside & (weights[child] > best)
        parent[closer] = child
        best = np.where(closer, weights[child], best)
    return edges


@dataclass(frozen=True)
class BudgetPlan:
    """How a budget ``epsilon`` is spent (pure epsilon-DP, sequential composition).

    Step 1 makes ``selections`` exponential-mechanism choices; step 2 releases one noisy
    joint table per pair of the ``latents`` latent attributes; step 4 releases one noisy
    histogram per group and one noisy joint table per tree edge plus the root's
    histogram: ``2 * latents`` histograms. Each step spends its share of
    ``settings.budget_split``."""

    epsilon: float
    selections: int
    latents: int
    split: tuple[float, float, float]

    @classmethod
    def of(cls, epsilon: float, party_bits: Sequence[int], settings: DPLTSettings) -> BudgetPlan:
        """The plan for parties holding ``party_bits`` bits each."""
        sizes = [group_sizes(b, settings.group_size) for b in party_bits]
        latents = sum(len(s) for s in sizes)
        selections = sum(b - len(s) for b, s in zip(party_bits, sizes, strict=True))
        return cls(float(epsilon), selections, latents, settings.budget_split)

    def share(self, step: int) -> float:
        """Epsilon of step ``step`` (0: grouping, 1: mutual information, 2: parameters)."""
        return self.epsilon * self.split[step] / sum(self.split)

    @property
    def pairs(self) -> int:
        """Pairs of latent attributes whose joint tables step 2 releases."""
        return self.latents * (self.latents - 1) // 2

    @property
    def selection_epsilon(self) -> float:
        """Epsilon of one grouping choice."""
        return self.share(0) / self.selections if self.selections else 0.0

    @property
    def pair_scale(self) -> float:
        """Laplace scale of every cell of step 2's tables."""
        return HISTOGRAM_SENSITIVITY * self.pairs / self.share(1) if self.pairs else 0.0

    @property
    def parameter_scale(self) -> float:
        """Laplace scale of every cell of step 4's histograms and tables."""
        return HISTOGRAM_SENSITIVITY * 2 * self.latents / self.share(2)

    def party_spent(self, n_bits: int, groups: int) -> dict[str, float]:
        """Epsilon of one party's own releases: its ``n_bits - groups`` grouping choices
        and its ``groups`` histograms."""
        grouping = (n_bits - groups) * self.selection_epsilon
        histograms = HISTOGRAM_SENSITIVITY * groups / self.parameter_scale
        return {"grouping": grouping, "histograms": histograms, "epsilon": grouping + histograms}

    def server_spent(self) -> dict[str, float]:
        """Epsilon of the server's releases: the pair tables, the root's and the edges'."""
        pairs = HISTOGRAM_SENSITIVITY * self.pairs / self.pair_scale if self.pairs else 0.0
        tree = HISTOGRAM_SENSITIVITY * self.latents / self.parameter_scale
        return {"mutual_information": pairs, "tree": tree, "epsilon": pairs + tree}

    def spent(self) -> dict[str, float]:
        """Epsilon each step spends, computed back from the noise scales, and the sum."""
        parts = {
            "grouping": self.selections * self.selection_epsilon,
            "mutual_information": self.server_spent()["mutual_information"],
            "parameters": HISTOGRAM_SENSITIVITY * 2 * self.latents / self.parameter_scale,
        }
        return {**parts, "total": sum(parts.values())}


@dataclass
class LatentTree:
    """The server's tree over every party's latent attributes (steps 2-4) and its
    sampler: the root's distribution and ``P(child | parent)`` along each edge."""

    states: list[int]
    edges: list[tuple[int, int]]
    root: np.ndarray
    conditionals: list[np.ndarray]

    @classmethod
    def fit(
        cls, latents: np.ndarray, states: Sequence[int], plan: BudgetPlan, rng: np.random.Generator
    ) -> LatentTree:
        """Noisy pairwise mutual information (step 2), its maximum spanning tree (step
        3) and the noisy tables of the root and the edges (step 4)."""
        n = latents.shape[1]
        weights = np.zeros((n, n))
        for a in range(n):
            for b in range(a + 1, n):
                joint = noisy_counts(
                    latents[:, a] * states[b] + latents[:, b],
                    states[a] * states[b],
                    plan.pair_scale,
                    rng,
                )
                weights[a, b] = weights[b, a] = mutual_information(joint.reshape(states[a], -1))
        edges = spanning_tree(weights)
        root = _probabilities(noisy_counts(latents[:, 0], states[0], plan.parameter_scale, rng))
        conditionals = []
        for parent, child in edges:
            joint = noisy_counts(
                latents[:, parent] * states[child] + latents[:, child],
                states[parent] * states[child],
                plan.parameter_scale,
                rng,
            )
            conditionals.append(_probabilities(joint.reshape(states[parent], states[child])))
        return cls(list(states), edges, root, conditionals)

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` draws of every latent attribute, root first, ``(rows, latents)``."""
        out = np.zeros((rows, len(self.states)), dtype=np.int64)
        out[:, 0] = _draw(np.broadcast_to(self.root, (rows, len(self.root))), rng)
        for (parent, child), table in zip(self.edges, self.conditionals, strict=True):
            out[:, child] = _draw(table[out[:, parent]], rng)
        return out


def _draw(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of a ``(rows, k)`` matrix of distributions."""
    cumulative = np.cumsum(probabilities, axis=1)
    draws = rng.random((probabilities.shape[0], 1)) * cumulative[:, -1:]
    return np.minimum((draws > cumulative).sum(axis=1), probabilities.shape[1] - 1)
