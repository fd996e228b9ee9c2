"""The score step in the experiment format: `softcap` on any attention and `score: {type: sigmoid}`
are in the schema, drawn, refused by export by name, and the demo trains and translates with a
softcap on every attention (incremental decoding: tests/builder/model/test_variants.py)."""

import json
import re
from dataclasses import replace

import pytest

from aiayn.builder.cli import main
from aiayn.builder.errors import UserError
from aiayn.builder.formats.limits import check_ctranslate2, check_marian
from aiayn.builder.model.build import build_model
from aiayn.schemas.slots import PluginError
from tests.builder.cli.test_bad_inputs import TINY, cli
from tests.conftest import EXPERIMENTS, load_experiment, registry

DEMO = EXPERIMENTS / "demo.yaml"
EVERY_ATTENTION = ["model.encoder.layer[0]", "model.decoder.layer[0]", "model.decoder.layer[1]"]


def test_the_schema_lists_softcap_and_the_score_steps(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    attention = schema["$defs"]["SelfAttentionSpec"]["properties"]
    assert attention["softcap"]["anyOf"][0] == {"exclusiveMinimum": 0.0, "type": "number"}
    assert {"softmax", "sigmoid"} <= set(attention["score"]["discriminator"]["mapping"])


@pytest.mark.parametrize(
    ("override", "field"),
    [("model.decoder.layer[1].softcap=30", "decoder.layer[1].softcap (30.0)"), ("model.encoder.layer[0].score={type: sigmoid}", "encoder.layer[0].score (sigmoid)")],
)  # fmt: skip
def test_export_refuses_a_score_step_no_target_has(override, field):
    model = load_experiment(DEMO, [override]).model
    for check, message in ((check_marian, f"cannot export to Hugging Face Marian: {field}; Marian has the paper's blocks only"),
                           (check_ctranslate2, f"cannot export to CTranslate2: {field}; CTranslate2 holds ffn, kv_heads, rotary only")):  # fmt: skip
        with pytest.raises(UserError) as e:
            check(model)
        assert str(e.value) == message


def test_a_score_step_by_name_alone():
    spec = load_experiment(DEMO, ["model.decoder.layer[0].score=sigmoid"]).model.decoder.layer[0]
    assert spec.score.type == "sigmoid" and spec.switches == {"score": "sigmoid"}


def test_a_bad_softcap_and_an_unknown_score_step_are_messages():
    with pytest.raises(UserError) as e:
        load_experiment(DEMO, ["model.encoder.layer[0].softcap=0"])
    assert "model.encoder.layer[0].softcap: input should be greater than 0, got 0" in str(e.value)
    with pytest.raises(UserError) as e:
        load_experiment(DEMO, ["model.encoder.layer[0].score={type: sigmoidd}"])
    assert str(e.value).endswith(
        "  model.encoder.layer[0].score: type 'sigmoidd' is not one of softmax, sigmoid; did you mean 'sigmoid'? "
        "(set on the command line: model.encoder.layer[0].score={type: sigmoidd})"
    )


def test_a_score_builder_must_return_a_score_step():
    from aiayn.builder.registry import Registry
    from aiayn.schemas.score import SigmoidSpec

    builtin = registry()
    broken = Registry(
        tuple(replace(e, build=lambda spec, ctx: object()) if e.spec is SigmoidSpec else e for e in builtin.entries)
    )
    message = "the builder of the score step 'sigmoid' returned a object; a score step must subclass aiayn.ScoreStep (normalize(scores, allowed))"
    with pytest.raises(PluginError, match=f"^{re.escape(message)}$"):
        build_model(load_experiment(DEMO, ["model.encoder.layer[0].score={type: sigmoid}"], registry=broken).model)


def test_the_demo_trains_and_translates_with_a_softcap_on_every_attention(tmp_path):
    softcap = [f"{layer}.softcap=50" for layer in EVERY_ATTENTION]
    code, _, err = cli(
        "train", DEMO, *TINY, *softcap, "trainer.max_steps=2", f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs"
    )
    assert code == 0, err
    run = tmp_path / "runs" / "demo" / "version_0"
    assert (run / "config.yaml").read_text().count("softcap: 50.0") == 3  # 3 attentions in the one layer of each stack
    (tmp_path / "in.txt").write_text("she bought three books\n")
    code, out, err = cli("translate", run, "-i", tmp_path / "in.txt")
    assert code == 0 and len(out.splitlines()) == 1, err


def test_a_score_steps_label_names_it_in_the_table3_columns_and_the_figure():
    """Two settings of one score step read apart: the results' columns and the figure take its
    registration's label (sigmoid's names its bias), not its type alone."""
    from aiayn.builder.model.figure import layout
    from aiayn.builder.model.summary import paper_columns

    fixed = load_experiment(DEMO, ["model.encoder.layer[0].score={type: sigmoid, bias: -3}"])
    assert paper_columns(fixed)["score"] == "sigmoid (b=-3)"
    assert paper_columns(load_experiment(DEMO, ["model.encoder.layer[0].score=sigmoid"]))["score"] == "sigmoid"
    texts = layout(fixed.model, title="t").texts()
    assert any("score=sigmoid (b=-3)" in text for text in texts), texts
