"""init_from end to end on the demo: a run fine-tuned from another starts as it (it translates
exactly as the source before a step), takes its tokenizer, trains only what train.freeze leaves,
records where it came from, resumes like any run; a GQA variant uptrained from it; and bad input
refused in one line with nothing written."""

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import torch
import yaml

from aiayn.builder.cli import main
from aiayn.builder.decode.translate import translate_texts
from aiayn.builder.model.build import build_model
from aiayn.builder.run.config import config_hash
from aiayn.builder.train.init_from import load_source, start_from
from tests.builder.train.test_training import DEMO, checkpoint_params, tiny
from tests.conftest import EXPERIMENTS, load_experiment, validated_experiment

SOURCE_STEPS = 6


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("source")
    args = tiny(tmp, f"trainer.max_steps={SOURCE_STEPS}", "trainer.val_check_interval=null", "--runs", str(tmp / "runs"))
    assert main(["train", DEMO, *args]) == 0
    return tmp / "runs" / "demo" / "version_0"


def fine_tune(tmp_path: Path, source: Path, *extra: str, resume: bool = False) -> tuple[int, str]:
    """`aiayn train` of the demo on a second corpus (another seed) from `source`: (exit code, stderr)."""
    args = tiny(tmp_path, "name=demo-ft", "data.seed=99", f"init_from={source}", "trainer.val_check_interval=null", *extra)
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["train", DEMO, *args, "--runs", str(tmp_path / "runs"), *(["--resume"] if resume else [])])
    return code, err.getvalue()


def test_a_fine_tuned_run_starts_as_its_source_and_trains_what_is_not_frozen(source, tmp_path):
    code, err = fine_tune(tmp_path, source, "trainer.max_steps=2", "train.freeze=[encoder.*,src_embed.*]")
    assert code == 0, err
    run = tmp_path / "runs" / "demo-ft" / "version_0"
    assert (run / "tokenizer.json").read_text() == (source / "tokenizer.json").read_text()
    before, after = checkpoint_params(source / "checkpoints" / "last.ckpt"), checkpoint_params(run / "checkpoints" / "last.ckpt")
    frozen = [k for k in after if k.startswith(("model.encoder.", "model.src_embed."))]
    assert frozen and all(torch.equal(after[k], before[k]) for k in frozen)  # the demo shares its table: the decoder's too
    trained = [k for k in after if k.startswith("model.decoder.") and not torch.equal(after[k], before[k])]
    assert len(trained) == len([k for k in after if k.startswith("model.decoder.")])
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["optimizer_states"][0]["state"]
    spec = validated_experiment(yaml.safe_load((source / "config.yaml").read_text()))
    model = build_model(spec.model)
    assert len(state) == len([n for n, _ in model.named_parameters() if not n.startswith(("encoder.", "src_embed."))])

    record = json.loads((run / "results.json").read_text())["init_from"]
    assert record == {
        "path": str(source), "checkpoint": str((source / "checkpoints" / "last.ckpt").resolve()), "model": f"step {SOURCE_STEPS}",
        "name": "demo", "config_hash": config_hash(spec), "step": SOURCE_STEPS, "tokenizer": "source", "copied": len(model.state_dict()),
    }  # fmt: skip
    first = (run / "config.yaml").read_text().splitlines()[0]
    assert first == (f"# init_from: {record['checkpoint']} (step {SOURCE_STEPS}; demo, config_hash {record['config_hash']})")

    code, err = fine_tune(tmp_path, source, "trainer.max_steps=3", "train.freeze=[encoder.*,src_embed.*]", resume=True)
    assert code == 0, err
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 3 and results["init_from"] == record


def test_before_its_first_step_a_fine_tuned_model_translates_exactly_as_its_source(source, tmp_path):
    spec = load_experiment(DEMO, tiny(tmp_path, f"init_from={source}"))
    loaded = load_source(spec)
    model = build_model(spec.model)
    start_from(model, loaded)
    lines = ["the cat sees the dog .", "two people walk home", "a house"]
    src, tgt = loaded.loaded.src_tokenizer, loaded.loaded.tgt_tokenizer
    ours = translate_texts(model.eval(), src, tgt, lines, spec.decode)
    assert ours == translate_texts(loaded.loaded.model, src, tgt, lines, spec.decode)
    with torch.no_grad():
        batch = torch.tensor([[5, 6, 7, 2]])
        torch.testing.assert_close(model(batch, batch), loaded.loaded.model(batch, batch), rtol=0, atol=0)


def test_a_gqa_variant_is_uptrained_from_the_multi_head_run(source, tmp_path):
    gqa = [
        "model.decoder.layer[0].kv_heads=1",
        "model.decoder.layer[1].kv_heads=1",
        f"init_from={{path: {source}, convert: [kv_heads]}}",
    ]
    code, err = fine_tune(tmp_path, source, "trainer.max_steps=1", *gqa)
    assert code == 0, err
    record = json.loads((tmp_path / "runs" / "demo-ft" / "version_0" / "results.json").read_text())["init_from"]
    assert record["pooled"] == [
        "decoder.layers.0.sublayers.0.sublayer: 2 -> 1 K/V heads",
        "decoder.layers.0.sublayers.1.sublayer: 2 -> 1 K/V heads",
    ]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["init_from={missing}"],
            "init_from: {missing} does not exist; give a run directory (runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)",
        ),
        (
            ["init_from={tmp}"],
            "init_from: {tmp} is not a run directory: it has no checkpoints/ and no version_<n>/ runs; give a run directory "
            "(runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)",
        ),
        (
            ["init_from={source}", "dims.vocab_size=200"],
            "init_from {source}: its embeddings hold 300 tokens and this model's 200 (model.embedding.vocab_size); a run starts "
            "from them with the same vocabulary: set dims.vocab_size=300 and the tokenizer is the source's (init_from.tokenizer: source)",
        ),
        (
            ["init_from={{path: {source}, convert: [layers]}}"],
            "init_from.convert: layers is named, but both stacks have the source's numbers of layers; drop it",
        ),
        (
            ["init_from={source}", "train.freeze=[encoders.*]"],
            "train.freeze: 'encoders.*' matches no parameter of the model; parameter names are as its state_dict has them (e.g. "
            "src_embed.token.table.weight), and decoder.*, encoder.*, generator.*, src_embed.*, tgt_embed.* match whole parts",
        ),
        (
            ["init_from={source}", "data.pipeline=[lowercase]"],
            "data.pipeline [lowercase] differs from the pipeline of init_from's source [], whose tokenizer this run takes: drop "
            "data.pipeline to take the source's, or set init_from.tokenizer: own to train a tokenizer of this pipeline's text",
        ),
    ],
    ids=["missing", "not_a_run", "vocabulary", "needless_conversion", "freeze_nothing", "pipeline"],
)
def test_bad_input_is_one_line_and_writes_nothing(source, tmp_path, overrides, message):
    paths = {"missing": tmp_path / "nowhere", "tmp": tmp_path, "source": source}
    args = tiny(tmp_path, "name=demo-ft", "trainer.max_steps=1", *(o.format(**paths) for o in overrides))
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["train", DEMO, *args, "--runs", str(tmp_path / "runs")]) == 2
    assert err.getvalue().strip().splitlines()[-1] == "aiayn train: error: " + message.format(**paths)
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow  # four trainings: the default tier's longest test
def test_a_sweep_uptrains_its_variants_from_one_source(tmp_path, monkeypatch):
    """experiments/demo-gqa.sweep.yaml on a tiny source with 4 heads: one trial per K/V head
    count, each from the same run, in one table with a kv_heads column."""
    monkeypatch.chdir(tmp_path)
    dims = ["dims.h=4", "dims.d_k=8", "dims.d_v=8"]
    assert main(["train", DEMO, *tiny(tmp_path, *dims, "trainer.max_steps=2", "trainer.val_check_interval=null")]) == 0
    for name in ("base.yaml", "demo.yaml", "demo-gqa.yaml", "demo-gqa.sweep.yaml"):
        shutil.copy(EXPERIMENTS / name, tmp_path / name)
    short = [
        *tiny(tmp_path, *dims, "trainer.max_steps=1", "trainer.val_check_interval=null", "train.validation.bleu=false"),
        "decode.beam=1",
    ]
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main(["sweep", "demo-gqa.sweep.yaml", *short]) == 0, out.getvalue()
    pooled = {}
    for kv in (4, 2, 1):
        record = json.loads(
            (tmp_path / "runs" / "demo-uptrained" / f"demo-kv{kv}-seed1" / "version_0" / "results.json").read_text()
        )["init_from"]
        assert record["path"] == "runs/demo" and record["step"] == 2
        pooled[kv] = record.get("pooled", [])
    assert pooled[4] == [] and pooled[2][0] == "encoder.layers.0.sublayers.0.sublayer: 4 -> 2 K/V heads" and len(pooled[1]) == 3
    table = (tmp_path / "runs" / "demo-uptrained" / "results.md").read_text()
    header, _, *rows = table.splitlines()[:5]
    column = header.split(" | ").index("kv_heads")
    assert [(r.split(" | ")[0], r.split(" | ")[column]) for r in rows] == [
        ("| demo-kv4", ""),
        ("| demo-kv2", "2"),
        ("| demo-kv1", "1"),
    ]


def test_validate_checks_the_weights_go_in_as_train_would(source, tmp_path, capsys):
    args = tiny(tmp_path, f"init_from={source}")
    assert main(["validate", DEMO, *args]) == 0
    assert main(["validate", DEMO, *args, "dims.d_ff=32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == (
        f"aiayn validate: error: init_from {source}: 6 differences between the source's weights and this model's (they must "
        "match by name and shape, or differ as init_from.convert allows):"
    )
    assert err[1] == "  encoder.layers.0.sublayers.1.sublayer.w_1.weight: the source's (64, 32), this model's (32, 32)"
