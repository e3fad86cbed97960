"""The one-run audit on series: real series as canaries, scored by their nearest
published series (simulations/series_audit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from flwr_vflgan.data.series import sine_table
from flwr_vflgan.privacy.audit import one_run_audit
from flwr_vflgan.simulations.series_audit import series_membership_scores


def _series() -> np.ndarray:
    return sine_table(2, n_parties=2, per_class=300, length=64).values


def test_a_generator_that_copies_its_series_is_caught_and_one_that_ignores_them_is_not():
    values = _series()
    kept, canaries = values[:200], values[200:]
    included = np.random.default_rng(6).random(len(canaries)) < 0.5
    training = np.concatenate([kept, canaries[included]])
    copied = series_membership_scores(canaries, training, kept)
    caught = one_run_audit(copied, included, [25, 50, 100], 1e-5)
    assert caught.correct == caught.guesses and caught.epsilon > 2
    fresh = sine_table(2, n_parties=2, per_class=300, length=64, seed=9).values
    ignored = series_membership_scores(canaries, fresh[: len(training)], kept)
    assert one_run_audit(ignored, included, [25, 50, 100], 1e-5).epsilon < 0.5


def test_channels_are_scaled_by_the_reference_so_a_wide_channel_does_not_drown_the_rest():
    """Channel 1 is 1,000 times wider than channel 0: a synthetic series off in channel 1
    by the same share of its range as another is off in channel 0 scores the same (raw
    distances would differ 1,000-fold)."""
    rng = np.random.default_rng(0)
    reference = rng.uniform(size=(50, 2, 8))
    reference[:, 1] *= 1000
    canary = reference[:1].copy()
    near_in_0 = canary.copy()
    near_in_0[:, 0] += 0.1
    near_in_1 = canary.copy()
    span = np.ptp(reference, axis=(0, 2))
    near_in_1[:, 1] += 0.1 * span[1] / span[0]  # as far as near_in_0 once scaled
    one = series_membership_scores(canary, near_in_0, reference)
    other = series_membership_scores(canary, near_in_1, reference)
    assert one[0] == pytest.approx(other[0], rel=1e-6)


def test_series_of_other_shapes_are_refused():
    values = _series()
    with pytest.raises(ValueError, match=r"differ in \(channels, length\)"):
        series_membership_scores(values[:5], values[:5, :, :32], values[5:])


SMALL = (
    "series.model.generator_hidden=8 series.model.attribute_hidden=[8,4] "
    "series.model.extractor_hidden=[4] series.model.shared_hidden=[8,4] model.feature_dim=4"
)


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "local-heads"])
def test_the_critic_scores_a_canary_by_the_newest_checkpoints_discriminators(tmp_path, shared):
    """By hand: each party scales the canaries' channels as it scaled its training
    series, and the score sums every attribute discriminator's logit and the shared
    discriminator's on the concatenated features (without it, each extractor head's),
    dropout off, with the models of the newest checkpoints (not freshly built ones)."""
    import torch

    from flwr_vflgan.data.series import series_long_frame
    from flwr_vflgan.runtime.checkpoint import save_party_checkpoint, save_server_checkpoint
    from flwr_vflgan.runtime.party_data import series_blocks
    from flwr_vflgan.series.training import SeriesParty, SeriesServer
    from flwr_vflgan.simulations.config import compose_run_config, to_run_spec
    from flwr_vflgan.simulations.series_audit import series_critic_scores

    values = sine_table(2, n_parties=2, per_class=20, length=16).values
    source = tmp_path / "train.csv"
    series_long_frame(values, ("a", "b")).to_csv(source, index=False)
    overrides = (
        f"algorithm=vflgan_ts dataset=series_csv dataset.source={source} {SMALL} "
        f"series.train.shared_discriminator={str(shared).lower()}"
    )
    spec = to_run_spec(compose_run_config(overrides), tmp_path / "run")
    root = spec.run_dir / "checkpoints"
    blocks = series_blocks(spec.data)
    parties = [SeriesParty(spec.algorithm, 1, 16, b.encoded, 5, i) for i, b in enumerate(blocks)]
    server = SeriesServer(spec.algorithm, 2, 7)
    for step in (2, 4):  # the newest is read: the older holds other parameters
        for i, party in enumerate(parties):
            flat = party.state.to_numpy() + (0 if step == 4 else 1)
            steps = party.state.optimizer_steps()
            save_party_checkpoint(root / f"party-{i}", step, flat, steps, {}, "{}")
        meta = {"optimizer_steps": server.state.optimizer_steps()}
        save_server_checkpoint(root, step, {"flat": server.state.to_numpy()}, meta)
    canaries = values[:6] * 1.1
    expected = torch.zeros(6)
    features = []
    for i, (party, block) in enumerate(zip(parties, blocks, strict=True)):
        x = torch.from_numpy(block.encoder.encode(canaries[:, [i]]))
        disc = party.discriminator.eval()
        with torch.no_grad():
            features.append(disc.extractor.features(x))
            expected += disc.attributes[0](x).reshape(-1)
            if not shared:
                expected += disc.extractor.head(features[-1]).reshape(-1)
    if shared:
        with torch.no_grad():
            expected += server.discriminator.eval()(torch.cat(features, 1)).reshape(-1)
    scores = series_critic_scores(spec, canaries)
    np.testing.assert_allclose(scores, expected.numpy(), rtol=1e-6, atol=1e-6)
    assert np.ptp(scores) > 0
