"""aiayn validate / show / schema as a user sees them."""

import json

import torch

from aiayn.builder.cli import main
from tests.conftest import EXPERIMENTS

BASE = str(EXPERIMENTS / "base.yaml")
DEMO = str(EXPERIMENTS / "demo.yaml")


def test_validate_prints_one_line(capsys):
    assert main(["validate", BASE, "--schema-only"]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{BASE}: ok: base, 63,082,496 parameters (N=6, d_model=512, d_ff=2048, h=8, d_k=64, d_v=64, "
        "P_drop=0.1, eps_ls=0.1, positional=sinusoidal, train_steps=100000)\n"
    )


def test_show_prints_config_and_block_table(capsys):
    assert main(["show", BASE, "dims.N=2"]) == 0
    out = capsys.readouterr().out
    assert "\nmodel:\n  graph: {type: encoder_decoder}\n  d_model: 512\n" in out
    assert "encoder.layer[1] feed_forward" in out and "2,099,712    2     4,199,424" in out
    assert "embedding (source = target = output)         18,944,000    1    18,944,000" in out
    assert "33,656,832" in out  # 18,944,000 + 2 x (3,152,384 encoder + 4,204,032 decoder layer)
    assert "forward FLOPs per target token" in out and "training memory estimate" in out


def test_show_of_a_language_model_speaks_of_one_sequence(capsys):
    assert main(["show", str(EXPERIMENTS / "lm" / "demo.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "tokenizer: BPE, one model and one vocabulary of en text" in lines
    assert "forward FLOPs per token (a sequence of 64 tokens): 1.1 M" in lines


def test_show_of_the_encoder_alone_speaks_of_one_sequence(capsys):
    """What its FLOPs are per is the graph's answer (Graph.flops_basis): the encoder alone reads one sequence."""
    assert main(["show", str(EXPERIMENTS / "encoder" / "demo.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "forward FLOPs per token (a sequence of 64 tokens): 1.1 M" in lines
    assert not any("target token" in line for line in lines)


def test_a_path_that_is_no_file_is_named_so(capsys):
    assert main(["validate", "/dev/null"]) == 2
    assert capsys.readouterr().err == "aiayn validate: error: /dev/null: is not a file\n"


def test_show_json_contract(capsys):
    assert main(["show", BASE, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["params"] == 63_082_496
    assert sum(b["params"] for b in info["blocks"]) == info["params"]
    assert info["memory_bytes"]["weights"] == 4 * 63_082_496
    assert info["flops_per_token"]["forward"] > 2 * 63_082_496 - 2 * 18_944_000


def test_schema_is_json_schema_with_tagged_layers(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "aiayn experiment"
    stack = schema["$defs"]["StackSpec"]["properties"]["layer"]["items"]
    assert stack["discriminator"]["propertyName"] == "type"
    assert set(stack["discriminator"]["mapping"]) == {
        "self_attention",
        "causal_self_attention",
        "cross_attention",
        "feed_forward",
        "gated_feed_forward",
        "sliding_window_attention",
    }
    assert (
        schema["$defs"]["AttentionSpec" if "AttentionSpec" in schema["$defs"] else "SelfAttentionSpec"]["additionalProperties"]
        is False
    )


def test_validate_checks_what_train_would_refuse_unless_schema_only(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["validate", BASE, f"data.dir={missing}"]) == 2
    assert capsys.readouterr().err.startswith(f"aiayn validate: error: data.dir {missing} does not exist; set data.dir")
    assert main(["validate", BASE, f"data.dir={missing}", "--schema-only"]) == 0
    if torch.cuda.is_available():
        return
    assert main(["validate", DEMO, "trainer.accelerator=cuda"]) == 2
    assert capsys.readouterr().err.endswith("aiayn validate: error: trainer.accelerator (cuda): this machine has no CUDA device; "
                                            "use trainer.accelerator=cpu, or auto to take what is there\n")  # fmt: skip


def test_a_warmup_longer_than_the_run_is_one_warning_line(capsys):
    assert main(["validate", DEMO, "trainer.max_steps=100"]) == 0
    assert capsys.readouterr().err == (
        "warning: train.lr_schedule.warmup_steps (150) is longer than the run (trainer.max_steps 100): the learning rate "
        "rises all the way and never decays (eq. 3)\n"
    )
    assert main(["validate", DEMO]) == 0
    assert capsys.readouterr().err == ""


def test_rotary_beside_absolute_positions_is_one_warning_line(capsys):
    rotary = "model.decoder.layer[0].rotary={fraction: 0.5}"
    assert main(["validate", DEMO, rotary]) == 0
    assert capsys.readouterr().err == (
        "warning: model.decoder.layer[0].rotary rotates by position, and model.positional (sinusoidal) adds absolute "
        "positions as well; set model.positional=none for rotary alone (RoFormer's, LLaMA's)\n"
    )
    assert main(["validate", DEMO, rotary, "model.positional=none"]) == 0
    assert capsys.readouterr().err == ""


def test_show_reads_a_trained_model_as_every_verb_does(tmp_path, capsys):
    """A run directory and a .ckpt are shown as the model they hold, with their own tokenizer;
    overrides are refused (the model is what it is)."""
    from tests.builder.cli.test_bad_inputs import TINY

    assert (
        main(
            ["train", str(DEMO), *TINY, "trainer.max_steps=1", f"data.cache_dir={tmp_path / 'c'}", "--runs", str(tmp_path / "r")]
        )
        == 0
    )
    run = tmp_path / "r" / "demo" / "version_0"
    capsys.readouterr()
    for given in (run, run / "checkpoints" / "last.ckpt"):
        assert main(["show", str(given), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["params"] == json.loads((run / "results.json").read_text())["params"]
        assert info["tokenizer"].startswith("joint: one bpe tokenizer and one vocabulary for both sides; ")
    assert main(["show", str(run)]) == 0
    assert capsys.readouterr().out.startswith(f"# {run}, a trained model, its experiment as stored\nname: demo\n")
    assert main(["show", str(run), "dims.h=4"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn show: error: {run} is a trained model, shown as it is: overrides (dims.h=4, ...) apply to experiments\n"
    )


def test_score_offers_no_search_settings(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["score", "--help"])
    text = capsys.readouterr().out
    assert "--alpha" in text and "--beam" not in text and "--max-len-b" not in text
    assert "a Hugging Face folder" in " ".join(text.split())
