"""Validation and (de)serialisation of the VFLGAN configuration."""

from __future__ import annotations

import json
import re
from dataclasses import fields

import pytest

from flwr_vflgan.config import ModelConfig, TrainConfig, Variant, VFLGANConfig, parse_variant

MODEL_FIELDS = sorted(f.name for f in fields(ModelConfig))
TRAIN_FIELDS = sorted(f.name for f in fields(TrainConfig))


def test_defaults_follow_the_documented_reference_settings():
    # Module docstring: latent 20, generator 20-32-64-128, BatchNorm eps 0.8, local
    # discriminator first part 256-128, shared 128-1, GP weight 30, Adam 5e-4 (0.5, 0.999),
    # batch 64, five critic steps, 75 epochs, hard Gumbel-softmax with temperature 1.
    config = VFLGANConfig()
    assert config.variant is Variant.VFLGAN and config.has_local_head
    m, t = config.model, config.train
    assert (m.latent_dim, m.generator_hidden, m.batchnorm_eps) == (20, (32, 64, 128), 0.8)
    assert (m.disc_hidden, m.feature_dim, m.shared_hidden) == ((256,), 128, (128,))
    assert m.local_head_hidden == ()  # the reference code's linear D_p; vflgan.yaml deepens it
    assert (m.gumbel_tau, m.gumbel_hard) == (1.0, True)
    assert (t.gp_weight, t.lr, t.betas, t.batch_size, t.n_critic, t.epochs) == (
        30.0, 5e-4, (0.5, 0.999), 64, 5, 75,
    )  # fmt: skip
    assert (t.shared_d_weight, t.shared_g_weight, t.max_steps) == (1.0, 1.0, None)


# -- ModelConfig -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"latent_dim": 0}, r"latent_dim must be a positive integer, got 0"),
        ({"latent_dim": -3}, r"latent_dim must be a positive integer, got -3"),
        ({"latent_dim": 2.0}, r"latent_dim must be a positive integer, got 2\.0"),
        ({"latent_dim": "4"}, r"latent_dim must be a positive integer, got '4'"),
        ({"feature_dim": 0}, r"feature_dim must be a positive integer, got 0"),
        ({"feature_dim": 1.5}, r"feature_dim must be a positive integer, got 1\.5"),
        (
            {"generator_hidden": ()},
            r"generator_hidden must list at least one layer width, got \(\)",
        ),
        (
            {"generator_hidden": (8, 0)},
            r"generator_hidden must contain positive integers, got \(8, 0\)",
        ),
        ({"generator_hidden": (8, -1)}, r"generator_hidden must contain positive integers"),
        ({"generator_hidden": (8.0,)}, r"generator_hidden must contain positive integers"),
        ({"generator_hidden": (True,)}, r"generator_hidden must contain positive integers"),
        ({"disc_hidden": (0,)}, r"disc_hidden must contain positive integers, got \(0,\)"),
        ({"disc_hidden": (False,)}, r"disc_hidden must contain positive integers"),
        (
            {"local_head_hidden": (16, 0)},
            r"local_head_hidden must contain positive integers, got \(16, 0\)",
        ),
        ({"shared_hidden": (4, "8")}, r"shared_hidden must contain positive integers"),
        ({"batchnorm_eps": 0.0}, r"batchnorm_eps must be > 0, got 0\.0"),
        ({"batchnorm_eps": float("nan")}, r"batchnorm_eps must be > 0, got nan"),
        ({"gumbel_tau": -1.0}, r"gumbel_tau must be > 0, got -1\.0"),
        ({"leaky_slope": -0.1}, r"leaky_slope must be in \[0, 1\), got -0\.1"),
        ({"leaky_slope": 1.0}, r"leaky_slope must be in \[0, 1\), got 1\.0"),
    ],
)
def test_model_config_rejects(overrides, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**overrides)


def test_model_config_accepts_empty_discriminator_hidden_layers_and_lists():
    config = ModelConfig(disc_hidden=[], shared_hidden=[], generator_hidden=[4], leaky_slope=0.0)  # type: ignore[arg-type]
    assert (config.disc_hidden, config.shared_hidden, config.generator_hidden) == ((), (), (4,))


# -- TrainConfig -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["epochs", "batch_size", "n_critic", "steps_per_exchange"])
@pytest.mark.parametrize("value", [0, -1, 2.0, True, None])
def test_train_config_rejects_non_positive_counts(name, value):
    if name == "epochs" and value is None:  # an automatic length, which needs min_steps
        assert TrainConfig(epochs=None, min_steps=10).epochs is None
        return
    with pytest.raises(ValueError, match=rf"{name} must be a positive integer, got {value!r}"):
        TrainConfig(**{name: value})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_steps": 0}, r"max_steps must be a positive integer or null, got 0"),
        ({"max_steps": -2}, r"max_steps must be a positive integer or null, got -2"),
        ({"max_steps": 10.0}, r"max_steps must be a positive integer or null, got 10\.0"),
        ({"eval_rows": 1}, r"eval_rows must be an integer > 1 or null, got 1"),
        ({"eval_rows": 0}, r"eval_rows must be an integer > 1 or null, got 0"),
        ({"eval_rows": 100.0}, r"eval_rows must be an integer > 1 or null, got 100\.0"),
        ({"eval_every": -1}, r"eval_every must be a non-negative integer, got -1"),
        ({"eval_every": 1.5}, r"eval_every must be a non-negative integer, got 1\.5"),
        ({"eval_every": None}, r"eval_every must be a non-negative integer, got None"),
        ({"lr": 0.0}, r"lr must be > 0, got 0\.0"),
        ({"lr": float("nan")}, r"lr must be > 0, got nan"),
        ({"gp_weight": -1.0}, r"gp_weight must be > 0, got -1\.0"),
        ({"shared_d_weight": 0}, r"shared_d_weight must be > 0, got 0"),
        ({"shared_g_weight": -0.5}, r"shared_g_weight must be > 0, got -0\.5"),
        ({"betas": (0.5,)}, r"betas must be two numbers in \[0, 1\), got \(0\.5,\)"),
        ({"betas": (0.5, 0.9, 0.99)}, r"betas must be two numbers in \[0, 1\)"),
        ({"betas": (0.5, 1.0)}, r"betas must be two numbers in \[0, 1\), got \(0\.5, 1\.0\)"),
        ({"betas": (-0.1, 0.9)}, r"betas must be two numbers in \[0, 1\)"),
        ({"generator_average": 0.0}, r"generator_average must be > 0, got 0\.0"),
        ({"generator_average": -1}, r"generator_average must be > 0, got -1"),
        ({"generator_lr": 0.0}, r"generator_lr must be > 0, got 0\.0"),
        ({"generator_lr": -1e-4}, r"generator_lr must be > 0, got -0\.0001"),
    ],
)
def test_train_config_rejects(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**overrides)


def test_train_config_accepts_limits():
    config = TrainConfig(max_steps=1, eval_rows=2, eval_every=0, betas=[0, 0.5])  # type: ignore[arg-type]
    assert config.betas == (0.0, 0.5)
    assert TrainConfig(max_steps=None, eval_rows=None).max_steps is None


@pytest.mark.parametrize(
    ("cls", "name"),
    [
        (ModelConfig, "latent_dim"),
        (ModelConfig, "feature_dim"),
        (TrainConfig, "epochs"),
        (TrainConfig, "batch_size"),
        (TrainConfig, "n_critic"),
        (TrainConfig, "max_steps"),
        (TrainConfig, "eval_rows"),
        (TrainConfig, "eval_every"),
    ],
)
def test_booleans_are_not_integers(cls, name):
    # bool is an int subclass; a YAML "true" must not become a width, a step cap or a
    # period of 1 (the width lists and epochs/batch_size/n_critic already reject it).
    with pytest.raises(ValueError, match=rf"{name} must be"):
        cls(**{name: True})


# -- VFLGANConfig ----------------------------------------------------------------------
def test_variant_is_parsed_and_controls_the_local_head():
    # Strings (from YAML or run_config) are parsed into the enum.
    parsed = VFLGANConfig(variant="vflgan_base")  # type: ignore[arg-type]
    assert parsed.variant is Variant.VFLGAN_BASE
    assert not parsed.has_local_head
    assert not VFLGANConfig(variant=Variant.WGAN_GP).has_local_head
    assert parse_variant(Variant.VFLGAN) is Variant.VFLGAN


def test_unknown_variant_lists_the_valid_ones():
    message = (
        r"unknown algorithm variant 'gan'; valid: \['vflgan', 'vflgan_base', 'wgan_gp', 'gs_wgan', "
        r"'vertigan', "
        r"'vdgan', 'vflgan_ts', 'vtgan', 'ctgan', 'gafm', 'splitnn', 'maxnorm', 'marvell', "
        r"'latent_diffusion', 'aim', 'mst', 'dplt'\]"
    )
    with pytest.raises(ValueError, match=message):
        VFLGANConfig(variant="gan")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        parse_variant("gan")
    with pytest.raises(ValueError, match=message):
        VFLGANConfig.from_dict({"variant": "gan"})


def test_from_dict_unknown_top_level_keys_list_the_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown VFLGAN config keys \['privacy', 'seed'\]; "
        r"valid: \['dp', 'dplt', 'gafm', 'gs_wgan', 'latent', 'marginals', 'model', 'series', 'train', "
        r"'variant', 'vtgan'\]",
    ):
        VFLGANConfig.from_dict({"seed": 1, "privacy": {}, "variant": "vflgan"})


@pytest.mark.parametrize(("section", "valid"), [("model", MODEL_FIELDS), ("train", TRAIN_FIELDS)])
def test_from_dict_unknown_section_keys_list_the_valid_ones(section, valid):
    expected = rf"unknown {section} config keys \['typo'\]; valid: " + re.escape(repr(valid))
    with pytest.raises(ValueError, match=expected):
        VFLGANConfig.from_dict({section: {"typo": 1}})


def test_from_dict_validates_values():
    with pytest.raises(ValueError, match=r"batch_size must be a positive integer, got 0"):
        VFLGANConfig.from_dict({"train": {"batch_size": 0}})


def test_from_dict_defaults_for_missing_or_null_sections():
    assert VFLGANConfig.from_dict({}) == VFLGANConfig()
    assert VFLGANConfig.from_dict({"model": None, "train": None}) == VFLGANConfig()


def test_to_dict_from_dict_round_trip_through_json():
    config = VFLGANConfig(
        variant=Variant.VFLGAN_BASE,
        model=ModelConfig(latent_dim=4, generator_hidden=(8, 16), disc_hidden=(), feature_dim=3),
        train=TrainConfig(epochs=2, max_steps=30, batch_size=8, betas=(0.0, 0.9), eval_rows=100),
    )
    plain = config.to_dict()
    assert plain["variant"] == "vflgan_base"
    assert plain["model"]["generator_hidden"] == (8, 16)
    assert VFLGANConfig.from_dict(plain) == config
    through_json = json.loads(json.dumps(plain))
    assert through_json["model"]["generator_hidden"] == [8, 16]
    assert VFLGANConfig.from_dict(through_json) == config
    assert VFLGANConfig.from_dict(VFLGANConfig().to_dict()) == VFLGANConfig()


def test_configs_are_frozen():
    with pytest.raises(AttributeError):
        VFLGANConfig().train.epochs = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("variant", "match"),
    [
        ("ctgan", "ctgan trains in one process and exchanges nothing"),
        ("gafm", "gafm takes its steps per exchange from gafm.steps_per_exchange"),
        ("splitnn", "splitnn takes its steps per exchange from gafm.steps_per_exchange"),
    ],
)
def test_train_steps_per_exchange_above_one_is_refused_where_it_means_nothing(variant, match):
    with pytest.raises(ValueError, match=rf"train.steps_per_exchange=4: {match}"):
        VFLGANConfig.from_dict({"variant": variant, "train": {"steps_per_exchange": 4}})


def test_vtgan_takes_steps_per_exchange():
    config = VFLGANConfig.from_dict({"variant": "vtgan", "train": {"steps_per_exchange": 5}})
    assert config.train.steps_per_exchange == 5


def test_steps_per_exchange_defaults_to_algorithm_1():
    assert TrainConfig().steps_per_exchange == 1
    config = VFLGANConfig.from_dict({"variant": "vflgan_base", "train": {"steps_per_exchange": 16}})
    assert config.train.steps_per_exchange == 16


@pytest.mark.parametrize("variant", ["vtgan", "ctgan", "gafm"])
def test_generator_average_is_the_vflgan_familys(variant):
    with pytest.raises(ValueError, match=rf"{variant} does not use it: remove it"):
        VFLGANConfig.from_dict({"variant": variant, "train": {"generator_average": 1.0}})
    config = VFLGANConfig.from_dict({"variant": "vflgan", "train": {"generator_average": 1.0}})
    assert config.train.generator_average == 1.0


@pytest.mark.parametrize(
    "variant", ["vtgan", "ctgan", "gafm", "vflgan_ts", "vdgan", "vertigan", "gs_wgan"]
)
def test_several_generator_steps_are_the_schedule_familys(variant):
    with pytest.raises(ValueError, match=rf"train.generator_steps=3: .*{variant} takes one"):
        VFLGANConfig.from_dict({"variant": variant, "train": {"generator_steps": 3}})


@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base", "wgan_gp"])
def test_several_generator_steps_are_accepted_where_the_schedule_runs_them(variant):
    config = VFLGANConfig.from_dict({"variant": variant, "train": {"generator_steps": 3}})
    assert config.train.generator_steps == 3 and TrainConfig().generator_steps == 1


@pytest.mark.parametrize("variant", ["vtgan", "ctgan", "gafm", "vflgan_ts"])
def test_generator_lr_is_the_gan_familys(variant):
    with pytest.raises(ValueError, match=rf"{variant} does not use it: remove it"):
        VFLGANConfig.from_dict({"variant": variant, "train": {"generator_lr": 1e-4}})


@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base", "wgan_gp", "vdgan", "vertigan"])
def test_generator_lr_sets_the_generators_rate_only(variant):
    config = VFLGANConfig.from_dict({"variant": variant, "train": {"generator_lr": 1e-4}})
    assert (config.train.lr, config.train.g_lr) == (5e-4, 1e-4)
    assert config.train.describe_lr() == "lr=0.0005 (generators 0.0001)"
    default = TrainConfig()
    assert (default.generator_lr, default.g_lr, default.describe_lr()) == (None, 5e-4, "lr=0.0005")
