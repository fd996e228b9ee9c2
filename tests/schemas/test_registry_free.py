"""The schemas hold no registrations and load none: importing them imports no torch and none of
builder (where the entry points are loaded), and a slot validates against the registry it is
given, in the validation's context, or says that it needs one."""

import subprocess
import sys
from typing import Literal

import pytest
import torch

from aiayn.builder.errors import UserError
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.norm import NormSpec
from tests.conftest import EXPERIMENTS, load_experiment, registry

PROBE = """
import sys
import aiayn.schemas.experiment
from aiayn.schemas.experiment import ExperimentSpec
ExperimentSpec.model_json_schema  # the class, built
loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "aiayn.builder", "lightning")))
print(loaded)
"""


def test_importing_the_schemas_loads_no_entry_point_and_no_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


def test_a_slot_given_as_data_needs_the_registry_in_the_validations_context():
    data = load_experiment(EXPERIMENTS / "demo.yaml").model_dump(mode="json")
    with pytest.raises(TypeError) as e:
        ExperimentSpec.model_validate(data)
    assert str(e.value).endswith("validates against a registry: model_validate(data, context=registry.context)")
    spec = ExperimentSpec.model_validate(data, context=registry().context)
    assert spec == load_experiment(EXPERIMENTS / "demo.yaml")


class HalfNormSpec(NormSpec):
    """A norm of a test's own."""

    type: Literal["half_norm"] = "half_norm"


def test_two_registries_in_one_process_each_validate_their_own_types():

    builtin = registry()
    own = builtin.extended(lambda registry: registry.add(HalfNormSpec, slot="norm", build=lambda spec, ctx: torch.nn.Identity()))
    half = ["model.encoder.add_norm.norm={type: half_norm}"]
    spec = load_experiment(EXPERIMENTS / "demo.yaml", half, registry=own)
    assert type(spec.model.encoder.add_norm.norm) is HalfNormSpec
    assert "half_norm" not in builtin.classes("norm")  # extended made another registry; this one is as it was
    with pytest.raises(UserError) as e:
        load_experiment(EXPERIMENTS / "demo.yaml", half, registry=builtin)
    assert "model.encoder.add_norm.norm: type 'half_norm' is not one of layer_norm, rms_norm" in str(e.value)
