"""Numbers beyond reason: no boolean read as a count (pydantic's lax mode reads true as 1), counts
bounded where no tensor or loop can use them, seeds in the range Lightning seeds with, and more CPU
threads than cores refused before a run starts."""

import importlib
import os

import pytest
from pydantic import ValidationError

import aiayn.schemas.experiment  # noqa: F401  (every built-in spec defined)
from aiayn.builder.errors import UserError
from aiayn.schemas._base import Spec, _number_not_bool
from tests.builder.cli.test_bad_inputs import cli
from tests.conftest import EXPERIMENTS, ROOT, load_experiment

DEMO = EXPERIMENTS / "demo.yaml"


def every_spec_class() -> list[type[Spec]]:
    """Every subclass of Spec defined so far (aiayn's, and a test's own), each once."""
    found, todo = [], [Spec]
    while todo:
        for cls in todo.pop().__subclasses__():
            if cls not in found:
                found.append(cls)
                todo.append(cls)
    return found


def error_of(*overrides: str) -> str:
    with pytest.raises(UserError) as info:
        load_experiment(DEMO, overrides)
    return str(info.value).split("\n", 1)[1]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("dims.N=true", "dims.N: expected an integer, got the boolean true"),
        ("model.encoder.num_layers=false", "model.encoder.num_layers: expected an integer, got the boolean false"),
        ("model.decoder.layer[0]={type: sliding_window_attention, h: 4, d_k: 32, d_v: 32, window: true}",
         "model.decoder.layer[0].window: expected an integer, got the boolean true"),
        ("model.dropout=true", "model.dropout: expected a number, got the boolean true"),
        ("trainer.limit_val_batches=true", "trainer.limit_val_batches: expected a number, got the boolean true"),
        ("trainer.devices=[0,true]", "trainer.devices: expected an integer, got the boolean true"),
        ("train.cpu_threads=true", "train.cpu_threads: expected an integer, got the boolean true"),
        ("model.decoder.layer[0]={type: sliding_window_attention, h: 4, d_k: 32, d_v: 32, window: 99999999999999999999999}",
         "model.decoder.layer[0].window: input should be less than or equal to 2147483647, got 99999999999999999999999"),
        ("train.seed=-1", "train.seed: input should be greater than or equal to 0, got -1"),
        ("train.seed=4294967296", "train.seed: input should be less than or equal to 4294967295, got 4294967296"),
    ],
)  # fmt: skip
def test_a_number_beyond_reason_is_refused_by_name(override, message):
    key = override.partition("=")[0]
    where = (
        f" (set on the command line: {override})" if message.startswith(f"{key}:") else ""
    )  # a whole layer set: no key to name
    assert error_of(override) == f"  {message}{where}"


def test_a_boolean_where_it_is_meant_stays_one():
    spec = load_experiment(DEMO, ["train.compile=true", "model.decoder.layer[0].qk_norm=true"])
    assert spec.train.compile is True and spec.model.decoder.layer[0].qk_norm


def test_every_number_field_of_every_spec_refuses_a_boolean():
    """Each field of every spec class (built-in or registered) that takes an int or a float and no
    bool: `true` given there is that field's error, and the only one."""
    checked = 0
    for cls in every_spec_class():
        for name, field in cls.model_fields.items():
            if _number_not_bool(field.annotation, nested=False):
                with pytest.raises(ValidationError) as info:
                    cls.model_validate({name: True})
                errors = info.value.errors()
                assert len(errors) == 1 and "got the boolean true" in str(errors[0]["ctx"]["error"]), (cls.__name__, name)
                checked += 1
    assert checked > 60  # d_model, h, d_k, dropout, steps, seeds, ... across the schema


def test_more_threads_than_cores_are_refused_before_a_run_starts(tmp_path):
    cores = len(os.sched_getaffinity(0))
    message = f"train.cpu_threads ({cores + 1}) is more than the {cores} cores this process may use; set it to at most {cores}, or to auto"
    code, _, err = cli("train", DEMO, f"train.cpu_threads={cores + 1}", "--runs", tmp_path / "runs")
    assert (code, err) == (2, f"aiayn train: error: {message}\n")
    assert not (tmp_path / "runs").exists()
    code, _, err = cli("validate", DEMO, f"train.cpu_threads={cores + 1}")
    assert (code, err) == (2, f"aiayn validate: error: {message}\n")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.decoder.layer[0].softcap=1e-50", "model.decoder.layer[0].softcap: 1e-50 is too small for float32, which the model "
         "computes in (it becomes 0 or loses its precision); give a value between 1.2e-38 and 3.4e+38 in magnitude"),
        ("model.decoder.layer[0].score={type: sigmoid, bias: 1e39}", "model.decoder.layer[0].score.bias: 1e+39 is too large for "
         "float32, which the model computes in (it becomes infinite); give a value between 1.2e-38 and 3.4e+38 in magnitude"),
        ("train.optimizer.eps=1e-45", "train.optimizer.eps: 1e-45 is too small for float32, which the model computes in (it "
         "becomes 0 or loses its precision); give a value between 1.2e-38 and 3.4e+38 in magnitude"),
    ],
)  # fmt: skip
def test_a_float_that_float32_cannot_hold_is_refused_by_name(override, message):
    where = f" (set on the command line: {override})" if "score=" not in override else ""
    assert error_of(override) == f"  {message}{where}"
    edge = load_experiment(
        DEMO, ["model.decoder.layer[0].softcap=1.2e-38", "model.decoder.layer[0].score={type: sigmoid, bias: -3e38}"]
    )
    assert edge.model.decoder.layer[0].softcap == 1.2e-38  # float32's own edges are held


# float fields that never reach a tensor, or are bounded within float32 by their own constraints
NOT_COMPUTED = {
    "ReportedSpec": {"ppl", "bleu", "params_m"}, "FloatParam": {"type", "low", "high"}, "CheckpointSpec": {"every_n_minutes"},
    "EarlyStoppingSpec": {"min_delta"}, "CategoricalParam": {"choices"}, "TrainerSpec": {"gradient_clip_val", "limit_val_batches"},
    "SentencePieceTokenizerSpec": {"character_coverage"}, "RotarySpec": {"fraction"},
    "SlurmLauncherSpec": {"additional"}, "ResultsSpec": {"bleu", "ppl", "bpb", "parse_f1", "parse_f1_repaired"}, "PaperColumnsSpec": {"rotary"}, "SweepSpec": {"grid"},
}  # fmt: skip


def test_every_float_the_model_computes_with_holds_in_float32():
    """A float field of any spec is Float32 (or a probability, or named above as one that no
    tensor computes with): a new float setting cannot reach the model unbounded."""
    for module in sorted((ROOT / "schemas").glob("*.py")):  # every spec class defined, whatever ran before
        importlib.import_module(f"aiayn.schemas.{module.stem}")
    unbounded = []
    for cls in every_spec_class():
        if not cls.__module__.startswith("aiayn."):
            continue
        for name, field in cls.model_fields.items():
            hint = str(field.annotation)
            if "float" not in hint or name in NOT_COMPUTED.get(cls.__name__, ()):
                continue
            held = f"{field.annotation} {field.metadata}"
            if "_float32" not in held and "Lt(lt=1.0)" not in held:  # Float32, or a Probability: [0, 1)
                unbounded.append(f"{cls.__name__}.{name}")
    assert unbounded == []
