"""MST and AIM over a discretised table, with the ``mbi`` library's graphical models.

Both measure marginals (counts of each combination of codes) with Gaussian noise, pick
which marginals to measure with the exponential mechanism, fit a graphical model to the
noisy measurements by mirror descent and sample the synthetic table from it. Their
budget is zero-concentrated DP (:mod:`flwr_vflgan.privacy.zcdp`) under add/remove-one
neighbours, as in both papers: a marginal's counts change by 1 in one cell, so its L2
and L1 sensitivity are 1.

* **MST** (McKenna, Miklau and Sheldon 2021): a third of ``rho`` on every one-way
  marginal, a third on choosing ``d - 1`` pairs that form a maximum spanning tree (each
  pair scored by the L1 error of the one-way model on it), a third on those pairs.
  Codes whose noisy one-way count is below three noise deviations are merged first.
* **AIM** (McKenna, Mullins, Sheldon and Miklau 2022): the one-way marginals, then rounds
  that each select the workload marginal the current model gets most wrong (its L1 error
  less the noise it would bring, weighted by its overlap with the workload), among those
  that keep the model under ``max_model_size``, measure it and refit; the noise halves
  when a measurement barely moves the model, and the last round spends what is left.

Randomness comes from one :class:`numpy.random.Generator` (noise, selections) and, for
``mbi``'s own sampling, numpy's global generator seeded from it and restored afterwards,
so a seed gives the same table.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flwr_vflgan.marginals.config import MarginalSettings
from flwr_vflgan.privacy.zcdp import exponential_rho, gaussian_rho

__all__ = ["Measurement", "SynthesisResult", "aim", "exponential_choice", "mst", "require_mbi"]

Clique = tuple[str | int, ...]
Progress = Callable[[dict[str, Any]], None]


def require_mbi() -> Any:
    """The ``mbi`` module, or an error that says how to install it."""
    try:
        import jax

        # mbi's advice: float64 for its estimates, no persistent cache of its many small
        # compiled programs (it warns at import otherwise).
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_enable_compilation_cache", False)
        import mbi
    except ImportError as error:
        raise ImportError(
            "algorithm=aim and algorithm=mst need the optional 'mbi' package (private-pgm's "
            "graphical models): pip install 'flwr-vflgan[marginals]'"
        ) from error
    return mbi


@dataclass(frozen=True)
class Measurement:
    """One noisy marginal released: its columns, noise deviation and cells."""

    clique: Clique
    sigma: float
    cells: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"columns": list(self.clique), "sigma": self.sigma, "cells": self.cells}


@dataclass
class SynthesisResult:
    """The synthetic codes and what was released to make them: every noisy marginal and
    the parameter of every exponential-mechanism selection."""

    codes: dict[str, np.ndarray]
    measurements: list[Measurement] = field(default_factory=list)
    selection_epsilons: list[float] = field(default_factory=list)

    @property
    def selections(self) -> int:
        """Marginals chosen by the exponential mechanism."""
        return len(self.selection_epsilons)

    @property
    def rho_spent(self) -> float:
        """The zCDP of everything released, summed over the releases (composition)."""
        return sum(gaussian_rho(m.sigma) for m in self.measurements) + sum(
            exponential_rho(e) for e in self.selection_epsilons
        )


def exponential_choice(
    scores: np.ndarray, epsilon: float, sensitivity: float, rng: np.random.Generator
) -> int:
    """The exponential mechanism: index ``i`` with probability proportional to
    ``exp(epsilon scores_i / (2 sensitivity))`` (``epsilon^2 / 8``-zCDP)."""
    weights = np.exp(0.5 * epsilon / sensitivity * (scores - scores.max()))  # max is 1
    return int(rng.choice(len(scores), p=weights / weights.sum()))


@contextmanager
def _numpy_global_seed(rng: np.random.Generator) -> Iterator[None]:
    """``mbi`` samples with numpy's global generator: seed it from ``rng``, then restore."""
    saved = np.random.get_state()
    np.random.seed(int(rng.integers(2**32 - 1)))
    try:
        yield
    finally:
        np.random.set_state(saved)


class _Model:
    """The data, its domain and the measurements made so far (an ``mbi`` session)."""

    def __init__(self, codes: Mapping[Any, np.ndarray], sizes: Mapping[Any, int]) -> None:
        self.mbi = require_mbi()
        names = list(sizes)
        self.domain = self.mbi.Domain(names, [sizes[n] for n in names])
        self.data = self.mbi.Dataset({n: codes[n] for n in names}, self.domain)
        self.measured: list[Any] = []
        self.log: list[Measurement] = []
        self._answers: dict[Clique, np.ndarray] = {}

    def answer(self, clique: Clique) -> np.ndarray:
        """The true marginal's counts (read inside the mechanism only)."""
        if clique not in self._answers:
            counts = self.data.project(clique).datavector()
            self._answers[clique] = np.asarray(counts, dtype=np.float64)
        return self._answers[clique]

    def compress(self, mapping: Mapping[str, np.ndarray]) -> None:
        """Merge codes (``mapping[column][code]`` is the new code), the data and the
        measurements alike."""
        full = self.domain
        self.data = self.data.compress(dict(mapping))
        self.domain = self.data.domain
        self.measured = [m.compress(dict(mapping), full) for m in self.measured]
        self._answers.clear()

    def measure(self, clique: Clique, sigma: float, rng: np.random.Generator) -> None:
        """Release ``clique``'s counts with ``N(0, sigma^2)`` noise per cell."""
        counts = self.answer(clique)
        noisy = counts + rng.normal(0.0, sigma, counts.size)
        self.measured.append(self.mbi.LinearMeasurement(noisy, clique, stddev=sigma))
        self.log.append(Measurement(clique, float(sigma), int(counts.size)))

    def estimate(self, iterations: int, warm: Any = None) -> Any:
        """The graphical model that best fits the measurements.

        Every new set of measurements compiles new programs, which JAX keeps: each
        holds memory mappings, and a long AIM run (or several runs in one process)
        would reach the kernel's limit on them (``vm.max_map_count``) and fail with
        "LLVM compilation error: Cannot allocate memory". The caches are dropped after
        each estimate; the next one compiles afresh anyway."""
        import jax

        model = self.mbi.estimation.MirrorDescent().estimate(
            self.domain, list(self.measured), iters=iterations, warm_start=warm
        )
        jax.clear_caches()
        return model

    def sample(
        self,
        model: Any,
        rows: int,
        rng: np.random.Generator,
        merged: Mapping[str, np.ndarray] | None = None,
    ) -> dict[str, np.ndarray]:
        """``rows`` synthetic rows of ``model``, with the codes :meth:`compress` merged
        (``merged``) spread back uniformly over the codes they stand for."""
        with _numpy_global_seed(rng):
            synthetic = model.synthetic_data(rows)
            if merged:
                synthetic = synthetic.decompress(dict(merged))
        return {n: np.asarray(v, dtype=np.int64) for n, v in synthetic.to_dict().items()}


class _Marginals:
    """A fitted model's marginals, computed in numpy: the selection rounds ask for
    every candidate's, and ``mbi``'s own ``project`` compiles a program per clique.

    A clique inside one of the model's cliques is summed out of that clique's marginal;
    any other comes from variable elimination on the log-potentials (the smallest
    intermediate table first), normalised to the model's total.
    """

    def __init__(self, model: Any) -> None:
        self.total = float(model.total)
        self.marginals = [
            (tuple(f.domain.attributes), np.asarray(f.values, dtype=np.float64))
            for f in model.marginals.tables.values()
        ]
        self.potentials = [
            (tuple(f.domain.attributes), np.asarray(f.values, dtype=np.float64))
            for f in model.potentials.tables.values()
        ]
        self.sizes = dict(zip(model.domain.attributes, model.domain.shape, strict=True))

    def project(self, clique: Clique) -> np.ndarray:
        """The model's counts of ``clique``, flattened in its column order."""
        for attrs, table in self.marginals:
            if set(clique) <= set(attrs):
                return _sum_to(attrs, table, clique).ravel()
        factors = list(self.potentials)
        for z in _elimination_order(factors, clique, self.sizes):
            joined = [f for f in factors if z in f[0]]
            factors = [f for f in factors if z not in f[0]]
            attrs, table = _log_product(joined, self.sizes)
            axis = attrs.index(z)
            factors.append((attrs[:axis] + attrs[axis + 1 :], _logsumexp(table, axis)))
        uniform = [((c,), np.zeros(self.sizes[c])) for c in clique]  # every clique column
        attrs, table = _log_product([*factors, *uniform], self.sizes)
        table = np.exp(table - _logsumexp(table, None)) * self.total
        return _sum_to(attrs, table, clique).ravel()


def _sum_to(attrs: Clique, table: np.ndarray, clique: Clique) -> np.ndarray:
    """``table`` (axes ``attrs``) summed onto ``clique``, axes in its order."""
    out = table.sum(axis=tuple(i for i, a in enumerate(attrs) if a not in clique))
    kept = [a for a in attrs if a in clique]
    return np.transpose(out, [kept.index(c) for c in clique])


def _log_product(factors: Sequence[tuple[Clique, np.ndarray]], sizes: Mapping[Any, int]):
    """The sum of log-factors over the union of their columns."""
    attrs = tuple(dict.fromkeys(a for f in factors for a in f[0]))
    total = np.zeros([sizes[a] for a in attrs])
    for names, table in factors:
        order = sorted(range(len(names)), key=lambda i: attrs.index(names[i]))
        moved = np.transpose(table, order)
        shape = [sizes[a] if a in names else 1 for a in attrs]
        total = total + moved.reshape(shape)
    return attrs, total


def _logsumexp(table: np.ndarray, axis: int | None) -> np.ndarray:
    peak = np.max(table, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    summed = np.log(np.sum(np.exp(table - peak), axis=axis, keepdims=True)) + peak
    return np.squeeze(summed, axis=axis) if axis is not None else summed.reshape(())


def _elimination_order(
    factors: Sequence[tuple[Clique, np.ndarray]], keep: Clique, sizes: Mapping[Any, int]
) -> list[Any]:
    """Greedy order: each time the column whose elimination makes the smallest table."""
    scopes = [set(f[0]) for f in factors]
    left = set().union(*scopes) - set(keep)
    order = []
    while left:
        joined = {z: set().union(*(s for s in scopes if z in s)) for z in sorted(left)}
        z = min(joined, key=lambda z: math.prod(sizes[a] for a in joined[z]))
        merged = joined[z] - {z}
        scopes = [s for s in scopes if z not in s] + [merged]
        left.remove(z)
        order.append(z)
    return order


def _indexed(
    run: Callable[..., SynthesisResult],
    codes: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    *args: Any,
    progress: Progress | None = None,
) -> SynthesisResult:
    """``run`` with the columns named 0, 1, ... inside ``mbi``, the names restored after.

    ``mbi`` iterates over sets of column names (its elimination orders and message
    schedules), and a set of strings iterates in an order that Python's per-process hash
    seed decides: with string names the same seed gave different tables in different
    processes. Small integers hash to themselves, so their order is fixed."""
    names = list(sizes)

    def named(clique: Clique) -> Clique:
        return tuple(names[int(i)] for i in clique)

    def report(record: dict[str, Any]) -> None:
        if progress is not None:
            progress({**record, "clique": list(named(tuple(record["clique"])))})

    result = run(
        {i: codes[n] for i, n in enumerate(names)},
        {i: sizes[n] for i, n in enumerate(names)},
        *args,
        progress=report,
    )
    return SynthesisResult(
        {names[int(i)]: c for i, c in result.codes.items()},
        [Measurement(named(m.clique), m.sigma, m.cells) for m in result.measurements],
        result.selection_epsilons,
    )


def mst(
    codes: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    rho: float,
    settings: MarginalSettings,
    rng: np.random.Generator,
    rows: int,
) -> SynthesisResult:
    """MST at ``rho``-zCDP: ``rows`` synthetic rows (codes) of the table ``codes``."""
    return _indexed(_mst, codes, sizes, rho, settings, rng, rows)


def aim(
    codes: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    rho: float,
    settings: MarginalSettings,
    rng: np.random.Generator,
    rows: int,
    progress: Progress | None = None,
) -> SynthesisResult:
    """AIM at ``rho``-zCDP with the workload of every ``settings.degree``-way marginal
    of at most ``settings.max_cells`` cells."""
    return _indexed(_aim, codes, sizes, rho, settings, rng, rows, progress=progress)


def _mst(
    codes: Mapping[Any, np.ndarray],
    sizes: Mapping[Any, int],
    rho: float,
    settings: MarginalSettings,
    rng: np.random.Generator,
    rows: int,
    progress: Progress | None = None,
) -> SynthesisResult:
    """MST (:func:`mst`) on columns keyed by index (``progress`` is not called)."""
    session = _Model(codes, sizes)
    names = list(sizes)
    sigma = math.sqrt(3 / (2 * rho))
    # Every one-way marginal in one Gaussian release of L2 sensitivity sqrt(d): rho / 3.
    for name in names:
        session.measure((name,), sigma * math.sqrt(len(names)), rng)
    mapping = _rare_codes(session, names)
    if mapping:
        session.compress(mapping)
    tree = _spanning_tree(session, names, rho / 3, settings, rng)
    for pair in tree:
        session.measure(pair, sigma * math.sqrt(max(len(tree), 1)), rng)
    model = session.estimate(settings.final_iterations)
    chosen = [_tree_epsilon(rho / 3, len(tree))] * len(tree)
    return SynthesisResult(session.sample(model, rows, rng, mapping), session.log, chosen)


def _tree_epsilon(rho: float, edges: int) -> float:
    """Each of MST's ``edges`` selections gets ``epsilon`` with ``edges epsilon^2/8 = rho``."""
    return math.sqrt(8 * rho / edges)


def _rare_codes(session: _Model, names: Sequence[str]) -> dict[str, np.ndarray]:
    """MST's compression: codes whose noisy count is below 3 deviations merge into one
    (post-processing of the one-way release)."""
    mapping = {}
    for name, measured in zip(names, session.measured, strict=True):
        noisy = np.asarray(measured.noisy_measurement)
        kept = noisy >= 3 * float(measured.stddev)
        if kept.all():
            continue
        order = np.cumsum(kept) - 1
        mapping[name] = np.where(kept, order, int(kept.sum())).astype(np.int64)
    return mapping


def _spanning_tree(
    session: _Model,
    names: Sequence[str],
    rho: float,
    settings: MarginalSettings,
    rng: np.random.Generator,
) -> list[Clique]:
    """MST's selection: ``d - 1`` pairs by the exponential mechanism, each joining two
    components, scored by the one-way model's L1 error on the pair (sensitivity 1)."""
    if len(names) < 2:
        return []
    model = _Marginals(session.estimate(settings.iterations))
    pairs = list(itertools.combinations(names, 2))
    errors = {p: float(np.abs(session.answer(p) - model.project(p)).sum()) for p in pairs}
    component = {name: i for i, name in enumerate(names)}
    epsilon, tree = _tree_epsilon(rho, len(names) - 1), list[Clique]()
    for _ in range(len(names) - 1):
        open_pairs = [p for p in pairs if component[p[0]] != component[p[1]]]
        scores = np.array([errors[p] for p in open_pairs])
        chosen = open_pairs[exponential_choice(scores, epsilon, 1.0, rng)]
        merged, into = component[chosen[1]], component[chosen[0]]
        component = {n: into if c == merged else c for n, c in component.items()}
        tree.append(chosen)
    return tree


def _aim(
    codes: Mapping[Any, np.ndarray],
    sizes: Mapping[Any, int],
    rho: float,
    settings: MarginalSettings,
    rng: np.random.Generator,
    rows: int,
    progress: Progress | None = None,
) -> SynthesisResult:
    """AIM (:func:`aim`) on columns keyed by index."""
    session = _Model(codes, sizes)
    names = list(sizes)
    candidates = _workload_candidates(session, names, settings)
    rounds = settings.rounds or 16 * len(names)
    if rounds < len(names):
        raise ValueError(
            f"marginals.rounds={rounds} must be at least the number of columns "
            f"({len(names)}): AIM spends 0.9 columns/rounds of its budget on the one-way marginals"
        )
    sigma = math.sqrt(rounds / (2 * 0.9 * rho))
    epsilon = math.sqrt(8 * 0.1 * rho / rounds)
    for name in names:
        session.measure((name,), sigma, rng)
    used = len(names) * gaussian_rho(sigma)
    model = session.estimate(settings.iterations)
    chosen: list[float] = []
    last = False
    while not last:
        if rho - used < 2 * (gaussian_rho(sigma) + exponential_rho(epsilon)):
            remaining = rho - used
            sigma = math.sqrt(1 / (2 * 0.9 * remaining))
            epsilon = math.sqrt(8 * 0.1 * remaining)
            last = True
        used += gaussian_rho(sigma) + exponential_rho(epsilon)
        allowed = _within_size(session, model, candidates, settings.max_model_size * used / rho)
        fitted = _Marginals(model)
        clique = _worst_approximated(session, fitted, allowed, epsilon, sigma, rng)
        before = fitted.project(clique)
        session.measure(clique, sigma, rng)
        model = session.estimate(settings.iterations, warm=model)
        after = _Marginals(model).project(clique)
        chosen.append(epsilon)
        if progress is not None:
            progress({"round": len(chosen), "clique": list(clique), "rho_used": used / rho})
        if np.abs(after - before).sum() <= sigma * math.sqrt(2 / math.pi) * before.size:
            sigma, epsilon = sigma / 2, epsilon * 2
    model = session.estimate(settings.final_iterations, warm=model)
    return SynthesisResult(session.sample(model, rows, rng), session.log, chosen)


def _workload_candidates(
    session: _Model, names: Sequence[str], settings: MarginalSettings
) -> dict[Clique, float]:
    """The workload's downward closure, each marginal weighted by how many workload
    columns it shares (AIM's candidate set)."""
    degree = min(settings.degree, len(names))
    workload = [
        c
        for c in itertools.combinations(names, degree)
        if session.domain.size(c) <= settings.max_cells
    ]
    if not workload:
        raise ValueError(
            f"no {degree}-way marginal has at most marginals.max_cells={settings.max_cells} "
            "cells: raise marginals.max_cells or lower marginals.degree"
        )
    closure = _downward_closure(workload)
    return {c: float(sum(len(set(c) & set(w)) for w in workload)) for c in sorted(closure)}


def _downward_closure(cliques: Sequence[Clique]) -> set[Clique]:
    """Every non-empty subset of every clique, each in its clique's column order."""
    return {
        sub for c in cliques for k in range(1, len(c) + 1) for sub in itertools.combinations(c, k)
    }


def _within_size(
    session: _Model, model: Any, candidates: Mapping[Clique, float], limit: float
) -> dict[Clique, float]:
    """The candidates that keep the model within ``limit`` MB, or that it already holds."""
    size_of = session.mbi.junction_tree.hypothetical_model_size
    held = [tuple(c) for c in model.cliques]
    free = _downward_closure(held)
    return {
        c: w
        for c, w in candidates.items()
        if c in free or size_of(session.domain, [*held, c]) <= limit
    }


def _worst_approximated(
    session: _Model,
    fitted: _Marginals,
    candidates: Mapping[Clique, float],
    epsilon: float,
    sigma: float,
    rng: np.random.Generator,
) -> Clique:
    """AIM's selection: the exponential mechanism over the weighted L1 errors less the
    expected noise of measuring (sensitivity: the largest weight)."""
    cliques = list(candidates)
    scores = np.array(
        [
            candidates[c]
            * (
                np.abs(session.answer(c) - fitted.project(c)).sum()
                - math.sqrt(2 / math.pi) * sigma * session.domain.size(c)
            )
            for c in cliques
        ]
    )
    sensitivity = max(abs(w) for w in candidates.values())
    return cliques[exponential_choice(scores, epsilon, sensitivity, rng)]
