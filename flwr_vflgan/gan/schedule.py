"""The training schedule of Algorithm 1 (paper 000) as a pure function of the step number.

One *step* is one discriminator update or one generator update, and costs one exchange
in the federated protocol. An epoch holds ``S = n_rows // batch_size`` discriminator
steps; after every ``n_critic``-th discriminator step of an epoch come ``g``
(``generator_steps``, 1 in Algorithm 1) generator steps, so an epoch is
``S + g (S // n_critic)`` steps. Both the server and every party derive the kind of step
``t`` from ``t`` alone, which lets a party reject an out-of-order message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

log = logging.getLogger(__name__)


class StepKind(StrEnum):
    """What a step updates."""

    DISCRIMINATOR = "d"
    GENERATOR = "g"


class JobLength(Protocol):
    """What a schedule reads of a run's training settings (``TrainConfig``)."""

    @property
    def batch_size(self) -> int: ...
    @property
    def n_critic(self) -> int: ...
    @property
    def generator_steps(self) -> int: ...
    @property
    def epochs(self) -> int | None: ...
    @property
    def max_steps(self) -> int | None: ...
    @property
    def min_steps(self) -> int | None: ...


def epochs_for(train: JobLength, steps_per_epoch: int) -> int:
    """``train.epochs``; when it is ``None`` (automatic), the fewest whole epochs of
    ``steps_per_epoch`` steps that reach ``train.min_steps``."""
    if train.epochs is not None:
        return train.epochs
    if train.min_steps is None:
        raise ValueError("train.epochs=null (automatic) needs train.min_steps")
    return -(-train.min_steps // steps_per_epoch)


def describe_length(train: JobLength) -> str:
    """``epochs=30``, or ``epochs=auto (min_steps=27000)`` for an automatic length."""
    if train.epochs is None:
        return f"epochs=auto (min_steps={train.min_steps})"
    return f"epochs={train.epochs}"


def announce_length(schedule: Schedule, train: JobLength) -> None:
    """Say once, on the server's side, how many epochs an automatic length came to."""
    if train.epochs is None:
        log.info(
            "%d rows give %d steps an epoch: training %d epochs, the fewest that reach "
            "train.min_steps=%d (train.epochs=N trains exactly N)",
            schedule.n_rows,
            schedule.steps_per_epoch,
            schedule.epochs,
            train.min_steps,
        )


@dataclass(frozen=True)
class Schedule:
    """Maps global step numbers to (epoch, kind)."""

    n_rows: int
    batch_size: int
    n_critic: int
    epochs: int
    max_steps: int | None = None
    generator_steps: int = 1

    def __post_init__(self) -> None:
        if self.batch_size > self.n_rows:
            raise ValueError(
                f"batch_size={self.batch_size} is larger than the {self.n_rows} training rows"
            )
        if self.n_critic <= 0 or self.epochs <= 0:
            raise ValueError(
                f"n_critic and epochs must be positive, got {self.n_critic}, {self.epochs}"
            )
        if self.generator_steps <= 0:
            raise ValueError(f"generator_steps must be positive, got {self.generator_steps}")
        if self.d_steps_per_epoch < self.n_critic:
            # Otherwise an epoch would end before its first generator step and the
            # generator would never be trained.
            raise ValueError(
                f"an epoch has {self.d_steps_per_epoch} discriminator steps ({self.n_rows} rows // "
                f"batch_size {self.batch_size}), fewer than n_critic={self.n_critic}: lower "
                "train.batch_size or train.n_critic"
            )

    @classmethod
    def of(cls, n_rows: int, train: JobLength) -> Schedule:
        """The schedule of ``n_rows`` training rows under ``train``: its batch size,
        ``n_critic``, ``generator_steps``, ``max_steps`` and ``epochs`` (automatic ones
        resolved by :func:`epochs_for`)."""
        base = cls(
            n_rows, train.batch_size, train.n_critic, 1, train.max_steps, train.generator_steps
        )
        return replace(base, epochs=epochs_for(train, base.steps_per_epoch))

    @property
    def d_steps_per_epoch(self) -> int:
        """``S``: discriminator steps per epoch."""
        return self.n_rows // self.batch_size

    @property
    def steps_per_epoch(self) -> int:
        """Discriminator plus generator steps per epoch."""
        return self.d_steps_per_epoch + self.g_steps_per_epoch

    @property
    def g_steps_per_epoch(self) -> int:
        """Generator steps per epoch: ``generator_steps`` after each ``n_critic``
        discriminator steps."""
        return self._cycles * self.generator_steps

    @property
    def _cycles(self) -> int:
        """Groups of ``n_critic`` discriminator and ``generator_steps`` generator steps
        that open an epoch (its last ``S mod n_critic`` discriminator steps follow them)."""
        return self.d_steps_per_epoch // self.n_critic

    @property
    def _cycle(self) -> int:
        return self.n_critic + self.generator_steps

    @property
    def total_steps(self) -> int:
        """Steps of the whole run, honouring ``max_steps``."""
        full = self.epochs * self.steps_per_epoch
        return full if self.max_steps is None else min(full, self.max_steps)

    def kind(self, step: int) -> StepKind:
        """Whether step ``step`` (0-based) updates the discriminators or the generators."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        within = step % self.steps_per_epoch
        if within < self._cycles * self._cycle and within % self._cycle >= self.n_critic:
            return StepKind.GENERATOR
        return StepKind.DISCRIMINATOR

    def epoch_of(self, step: int) -> int:
        """1-based epoch that step ``step`` belongs to."""
        return step // self.steps_per_epoch + 1

    def ends_epoch(self, step: int) -> bool:
        """Whether step ``step`` is the last step of its epoch."""
        return (step + 1) % self.steps_per_epoch == 0

    def evaluation_due(self, step: int, eval_every: int) -> bool:
        """Whether the generators are evaluated after step ``step``: at the end of every
        ``eval_every``-th epoch and after the last step (never when ``eval_every`` is 0)."""
        if eval_every <= 0:
            return False
        if step + 1 == self.total_steps:
            return True
        return self.ends_epoch(step) and self.epoch_of(step) % eval_every == 0

    def block_end(self, start: int, steps_per_exchange: int) -> int:
        """One past the last step of the exchange that begins at step ``start``.

        An exchange carries up to ``steps_per_exchange`` consecutive steps and never
        crosses an epoch's end or the end of training, so every epoch starts a new
        exchange: evaluations, checkpoints and resumption fall on exchange boundaries,
        and the blocks of a resumed run are the blocks of an uninterrupted one.
        """
        if start < 0 or start >= self.total_steps:
            raise ValueError(f"start must be in [0, {self.total_steps}), got {start}")
        if steps_per_exchange < 1:
            raise ValueError(f"steps_per_exchange must be >= 1, got {steps_per_exchange}")
        epoch_end = (start // self.steps_per_epoch + 1) * self.steps_per_epoch
        within = start % self.steps_per_epoch
        # Blocks are counted from the epoch's first step, wherever ``start`` lies.
        block_end = start - within % steps_per_exchange + steps_per_exchange
        return min(block_end, epoch_end, self.total_steps)

    def d_steps_before(self, step: int) -> int:
        """Discriminator steps among steps ``0 .. step - 1`` (the accounted releases)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        epochs, within = divmod(step, self.steps_per_epoch)
        cycles, rest = divmod(min(within, self._cycles * self._cycle), self._cycle)
        g_steps = cycles * self.generator_steps + max(0, rest - self.n_critic)
        return epochs * self.d_steps_per_epoch + within - g_steps

    def discriminator_steps(self, count: int) -> Iterator[int]:
        """The first ``count`` discriminator steps' numbers, in order (fewer if the
        schedule holds fewer)."""
        found = 0
        for step in range(self.total_steps):
            if found >= count:
                return
            if self.kind(step) is StepKind.DISCRIMINATOR:
                found += 1
                yield step

    def steps_before(self, step: int, kind: StepKind) -> int:
        """Steps of ``kind`` among steps ``0 .. step - 1``."""
        d_steps = self.d_steps_before(step)
        return d_steps if kind is StepKind.DISCRIMINATOR else step - d_steps

    def last_step_within(self, d_steps: int, kind: StepKind = StepKind.DISCRIMINATOR) -> int:
        """The most steps (from 0, capped at ``total_steps``) that hold at most ``d_steps``
        steps of ``kind`` (discriminator steps unless told): where training must stop when
        only ``d_steps`` of them are allowed."""
        if d_steps < 0:
            raise ValueError(f"d_steps must be >= 0, got {d_steps}")
        low, high = 0, self.total_steps
        if self.steps_before(high, kind) <= d_steps:
            return high
        while high - low > 1:  # steps_before(low) <= d_steps < steps_before(high)
            middle = (low + high) // 2
            if self.steps_before(middle, kind) <= d_steps:
                low = middle
            else:
                high = middle
        return low


def budget_schedule(
    schedule: Schedule, allowed: Mapping[int, int], kind: StepKind = StepKind.DISCRIMINATOR
) -> tuple[Schedule, str | None]:
    """``schedule`` cut so that no party takes more steps of ``kind`` (the accounted ones:
    discriminator steps unless told) than it allows.

    Returns the schedule and, if it was cut, the reason (naming the tightest party).
    """
    if not allowed:
        return schedule, None
    party = min(allowed, key=lambda p: (allowed[p], p))
    planned = schedule.steps_before(schedule.total_steps, kind)
    if planned <= allowed[party]:
        return schedule, None
    stop = schedule.last_step_within(allowed[party], kind)
    name = "discriminator" if kind is StepKind.DISCRIMINATOR else "generator"
    reason = (
        f"party {party}'s privacy budget allows {allowed[party]} {name} steps of the "
        f"{planned} planned: training stops after step {stop} of {schedule.total_steps}"
    )
    if stop == 0:
        raise ValueError(reason)
    log.warning("%s", reason)
    return replace(schedule, max_steps=stop), reason


@dataclass
class Evaluations:
    """A run's evaluations and its best-model rule, written once for every loop that
    trains the VFLGAN family's generators (the strategy's and the centralized one).

    The generators of the evaluation with the lowest Frechet distance are the best (an
    earlier one wins a tie); they are published unless DP forbids choosing by a
    distance to the real table (:meth:`publishes_best`).
    """

    history: list[dict[str, float]] = field(default_factory=list)
    best_fd: float | None = None
    best_epoch: int | None = None

    def add(self, epoch: int, step: int, fd: float, elapsed: float) -> tuple[dict, bool]:
        """Record one evaluation; returns its record and whether it is the new best."""
        record = {"epoch": epoch, "step": step, "fd": fd, "elapsed": elapsed}
        self.history.append(record)
        improved = self.best_fd is None or fd < self.best_fd
        if improved:
            self.best_fd, self.best_epoch = fd, epoch
        return record, improved

    def publishes_best(self, dp_enabled: bool, select_by_fd: bool) -> bool:
        """Whether the best generators are published: there was an evaluation, and the
        run is not under DP unless ``dp.select_by_fd`` accepts that choosing an epoch by
        its distance to the real table reads the real data outside the mechanism."""
        return self.best_epoch is not None and (not dp_enabled or select_by_fd)
