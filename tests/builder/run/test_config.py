"""Every kind of bad input is a UserError whose text names the file or YAML path."""

import re
import subprocess
import sys

import pytest

from aiayn.builder.cli import main
from aiayn.builder.errors import UserError
from tests.conftest import EXPERIMENTS, load_experiment

BASE = (EXPERIMENTS / "base.yaml").as_posix()


def error_of(path, overrides=()) -> str:
    with pytest.raises(UserError) as info:
        load_experiment(path, overrides)
    return str(info.value)


def test_yaml_syntax_error_names_file_and_line(write):
    path = write("bad.yaml", "name: x\nmodel:\n  d_model: [512\n  dropout: 0.1\n")
    assert error_of(path) == f"{path}:4:10: YAML syntax error: did not find expected ',' or ']'"


def test_missing_file():
    assert error_of("nope/missing.yaml") == "nope/missing.yaml: does not exist"
    assert error_of("data.dir=/tmp/x") == (
        "data.dir=/tmp/x: does not exist; it reads as an override (KEY=VALUE): give the experiment's YAML first (EXP KEY=VALUE ...)"
    )


RELATIVE = "does not exist (extends is relative to the file that names it)"


def test_missing_parent_names_the_path_tried_and_what_is_there(write, tmp_path):
    path = write("child.yaml", "extends: gone.yaml\nname: x\n")
    assert (
        error_of(path)
        == f"{path}: extends: {tmp_path.resolve() / 'gone.yaml'} {RELATIVE}; {tmp_path.resolve()} has no other YAML file"
    )
    write("parent.yaml", "name: p\n")
    near = write("near.yaml", "extends: parnet.yaml\nname: x\n")
    assert (
        error_of(near)
        == f"{near}: extends: {tmp_path.resolve() / 'parnet.yaml'} {RELATIVE}; did you mean {tmp_path.resolve() / 'parent.yaml'}?"
    )
    far = write("far.yaml", "extends: zzz.yaml\nname: x\n")
    assert error_of(far) == (
        f"{far}: extends: {tmp_path.resolve() / 'zzz.yaml'} {RELATIVE}; YAML files in {tmp_path.resolve()}: child.yaml, near.yaml, parent.yaml"
    )


def test_a_copied_file_is_not_offered_as_its_own_parent(write, tmp_path):
    """`extends: base.yaml` copied out of experiments/ into demo.yaml: not "did you mean demo.yaml"."""
    copy = write("demo.yaml", "extends: base.yaml\nname: x\n")
    assert (
        error_of(copy)
        == f"{copy}: extends: {tmp_path.resolve() / 'base.yaml'} {RELATIVE}; {tmp_path.resolve()} has no other YAML file"
    )
    elsewhere = write("sub/x.yaml", "extends: ../nowhere/base.yaml\nname: x\n")
    assert error_of(elsewhere) == (
        f"{elsewhere}: extends: {tmp_path.resolve() / 'nowhere' / 'base.yaml'} {RELATIVE}; {tmp_path.resolve() / 'nowhere'} is not a folder"
    )


def test_inheritance_cycle(write):
    a = write("a.yaml", "extends: b.yaml\nname: a\n")
    b = write("b.yaml", "extends: a.yaml\nname: b\n")
    assert error_of(a) == f"{a}: inheritance cycle in 'extends': {a} -> {b} -> {a}"


def test_unknown_key_with_did_you_mean():
    message = error_of(BASE, ["model.encoder.layer[0].heads=8"])
    assert message == (
        f"{BASE} is not a valid experiment (1 error):\n  model.encoder.layer[0].heads: unknown key; did you mean 'h'? "
        "(set on the command line: model.encoder.layer[0].heads=8)"
    )


def test_misspelled_key_gets_the_closest_name():
    assert error_of(BASE, ["data.maxlen=10"]).endswith(
        "  data.maxlen: unknown key; did you mean 'max_len'? (set on the command line: data.maxlen=10)"
    )


def test_wrong_type_and_out_of_range_name_path_and_value():
    message = error_of(BASE, ["dims.d_ff=wide", "train.label_smoothing=1.5"])
    assert message == (
        f"{BASE} is not a valid experiment (2 errors):\n"
        "  dims.d_ff: input should be a valid integer, unable to parse string as an integer, got 'wide' "
        "(set on the command line: dims.d_ff=wide)\n"
        "  train.label_smoothing: input should be less than 1, got 1.5 (set on the command line: train.label_smoothing=1.5)"
    )  # the copies of dims.d_ff in the layers (${dims.d_ff}) are not reported again


def test_a_wrong_value_in_a_file_is_reported_once(write):
    path = write("h.yaml", f"extends: {BASE}\nname: h\ndims: {{h: 0}}\n")
    assert error_of(path) == f"{path} is not a valid experiment (1 error):\n  dims.h: input should be greater than 0, got 0"


def test_unknown_sublayer_type_suggests():
    message = error_of(BASE, ["model.encoder.layer[1].type=feed_forwad"])
    assert message.endswith(
        "  model.encoder.layer[1]: type 'feed_forwad' is not one of self_attention, "
        "causal_self_attention, cross_attention, feed_forward, gated_feed_forward, sliding_window_attention; did you mean 'feed_forward'? "
        "(set on the command line: model.encoder.layer[1].type=feed_forwad)"
    )


def test_sharing_all_needs_a_shared_vocabulary():
    assert error_of(BASE, ["model.embedding.shared_vocab=false"]).endswith(
        "  model.embedding.share: 'all' ties the source embedding to the target embedding, which "
        "needs a shared vocabulary, but shared_vocab is false; set shared_vocab: true, or "
        "share: target_output (or none)"
    )


def test_learned_positions_shorter_than_max_len():
    assert error_of(EXPERIMENTS / "table3/e_learned.yaml", ["model.positional.max_len=100"]).endswith(
        "  model.positional.max_len: the learned position table has 100 rows but data.max_len 256 "
        "needs 257 (the decoder input starts with <s>), so longer sentences would have no position; "
        "set model.positional.max_len >= 257 or data.max_len <= 99 (set on the command line: model.positional.max_len=100)"
    )


def test_decoder_self_attention_must_be_causal():
    assert error_of(BASE, ["model.decoder.layer[0].type=self_attention"]).endswith(
        "  model.decoder.layer[0].type: self_attention in the decoder lets a position see later "
        "target tokens, which are not known when translating; use causal_self_attention "
        "(set on the command line: model.decoder.layer[0].type=self_attention)"
    )


def test_override_index_out_of_range(write):
    path = write(
        "o.yaml", f"extends: {BASE}\nname: o\nmodel:\n  encoder:\n    overrides:\n      7: [{{type: feed_forward, d_ff: 8}}]\n"
    )
    assert error_of(path).endswith(
        "  model.encoder.overrides.7: layer index 7 is out of range for num_layers 6; use an index from 0 to 5"
    )


def test_ddp_spawn_says_to_use_ddp():
    assert (
        "trainer.strategy: ddp_spawn would send the run's model and data to processes it spawns; aiayn starts each "
        "process from the command instead, which trains the same: use trainer.strategy=ddp "
        "(set on the command line: trainer.strategy=ddp_spawn)"
    ) in error_of(BASE, ["trainer.strategy=ddp_spawn"])


def test_accumulation_is_derived():
    assert "trainer.accumulate_grad_batches: accumulate_grad_batches is derived from train.tokens_per_step" in error_of(
        BASE, ["trainer.accumulate_grad_batches=4"]
    )


def test_broken_interpolation_suggests_the_key(write):
    path = write("i.yaml", f"extends: {BASE}\nname: i\nmodel:\n  d_model: ${{dims.dmodel}}\n")
    assert (
        error_of(path)
        == f"{path}: model.d_model: ${{dims.dmodel}} refers to a key that does not exist; did you mean ${{dims.d_model}}?"
    )


def test_unparsable_interpolation(write):
    path = write("g.yaml", "name: ${oops\n")
    assert error_of(path).startswith(f"{path}: ")


def test_bad_override_syntax():
    assert error_of(BASE, ["dims.h"]) == (
        "override 'dims.h' is not KEY=VALUE with a dotted key, e.g. dims.h=16 or model.encoder.layer[0].h=4"
    )


def test_an_override_value_yaml_reads_otherwise_says_to_quote_it():
    assert error_of(BASE, ["train.freeze=[*]"]) == (
        "override 'train.freeze=[*]' (on the command line): while scanning an alias: the value is read as YAML, where a "
        "string that starts with * & ! % @ or ` needs quotes inside it, e.g. 'train.freeze=\"*.weight\"' (or "
        "'train.freeze=[\"*\"]' for a list)"
    )
    assert load_experiment(BASE, ['train.freeze=["*.bias"]']).train.freeze == ("*.bias",)


def test_a_retyped_node_does_not_keep_the_old_kinds_keys():
    spec = load_experiment(BASE, ["model.positional.type=learned", "model.positional.max_len=300"])
    assert spec.model.positional.type == "learned" and spec.model.positional.max_len == 300
    # the mapping form alike: the sinusoid's layout goes, as it does with .type=
    assert load_experiment(BASE, ["model.positional={type: learned, max_len: 300}"]).model.positional == spec.model.positional
    swapped = load_experiment(BASE, ["model.encoder.layer[1]={type: gated_feed_forward, d_ff: 1365, activation: silu}"])
    assert swapped.model.encoder.layers[0][1].type == "gated_feed_forward"
    # a mapping of the same kind still merges into the node (only a new kind starts afresh)
    assert load_experiment(BASE, ["model.positional={layout: concatenated}"]).model.positional.layout == "concatenated"


def test_overrides_reach_every_interpolating_layer():
    spec = load_experiment(BASE, ["dims.h=16", "dims.d_k=32"])
    heads = [
        (s.h, s.d_k) for stack in (spec.model.encoder, spec.model.decoder) for l in stack.layers for s in l if hasattr(s, "h")
    ]
    assert set(heads) == {(16, 32)} and len(heads) == 18


def test_cli_exit_code_2_and_every_error(capsys):
    assert main(["validate", BASE, "dims.h=-1", "model.encoder.num_layer=3"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"aiayn validate: error: {BASE} is not a valid experiment (2 errors):\n"
        "  dims.h: input should be greater than 0, got -1 (set on the command line: dims.h=-1)\n"
        "  model.encoder.num_layer: unknown key; did you mean 'num_layers'? (set on the command line: model.encoder.num_layer=3)\n"
    )


def test_console_script_prints_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [\n")
    run = subprocess.run([sys.executable, "-m", "aiayn", "show", str(bad)], capture_output=True, text=True)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert re.match(rf"aiayn show: error: {re.escape(str(bad))}:2:1: YAML syntax error: ", run.stderr)


def only_error(overrides: list[str]) -> str:
    """The one error line of BASE with `overrides`, without the note of where they were set."""
    message = error_of(BASE, overrides)
    header, line = message.split("\n")
    assert header == f"{BASE} is not a valid experiment (1 error):"
    return line.removeprefix("  ").split(" (set on the command line: ")[0]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["dims.d_model=511", "dims.d_k=1"],
         "model.d_model: sinusoidal positions pair a sine with a cosine, so d_model must be even, got 511"),
        (["model.encoder.layer[0].type=cross_attention"],
         "model.encoder.layer[0].type: cross_attention needs an encoder output to attend to and is only allowed "
         "in the decoder; use self_attention here"),
        (["model.decoder.layer[1].type=causal_self_attention"],
         "model.decoder.layer: the decoder has no cross_attention sub-layer, so it never sees the source "
         "sentence; add {type: cross_attention, h: ..., d_k: ..., d_v: ...}, or drop model.encoder for a decoder-only model"),
        (["data.min_len=300"],
         "data.min_len: min_len (300) is greater than max_len (256), which would drop every sentence"),
        (["train.checkpoint.every_n_train_steps=100"],
         "train.checkpoint.every_n_minutes: set one of every_n_train_steps, every_n_minutes and every_n_epochs, not "
         "every_n_train_steps (100) and every_n_minutes (10.0); set the others to null"),
        (["model.decoder.overrides={2: [{type: self_attention, h: 1, d_k: 4, d_v: 4}, {type: cross_attention, h: 1, d_k: 4, d_v: 4}]}"],
         "model.decoder.overrides.2[0].type: self_attention in the decoder lets a position see later target tokens, "
         "which are not known when translating; use causal_self_attention"),
    ],
)  # fmt: skip
def test_cross_field_messages(overrides, expected):
    assert only_error(overrides) == expected
