"""A corpus of bad inputs, family by family: each is one message, exit code 2, no traceback, and
a command that fails on an existing run leaves every byte of that run as it was."""

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.builder.cli import main
from aiayn.builder.train.checks import machine_memory
from tests.conftest import EXPERIMENTS, ROOT

DEMO = str(EXPERIMENTS / "demo.yaml")
TINY = [
    "dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.N=1", "dims.vocab_size=300",
    "data.n_train=400", "data.n_valid=12", "data.n_test=12", "train.tokens_per_step=800",
    "trainer.enable_progress_bar=false", "trainer.val_check_interval=null", "decode.beam=2", "decode.max_len_b=5",
    "train.checkpoint.every_n_train_steps=1",
]  # fmt: skip


def cli(*argv: str, registry=None) -> tuple[int, str, str]:
    """`aiayn ARGV` in this process (with `registry`, default the one the command loads): exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv], registry=registry)
        except SystemExit as e:  # argparse's own usage errors
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """runs/demo/version_0 of a tiny demo trained for 2 steps (a checkpoint at each)."""
    root = tmp_path_factory.mktemp("bad")
    code, _, err = cli("train", DEMO, *TINY, "trainer.max_steps=2", f"data.cache_dir={root / 'cache'}", "--runs", root / "runs")
    assert code == 0, err
    return root / "runs" / "demo" / "version_0"


@pytest.fixture
def run(trained, tmp_path) -> Path:
    """A copy of the trained run that a test may break."""
    copy = tmp_path / "runs" / "demo" / "version_0"
    shutil.copytree(trained, copy)
    return copy


def fails(expected: str, *argv: str, untouched: Path | None = None) -> None:
    """`aiayn argv` exits 2 with exactly `expected` on stderr and leaves `untouched` as it was."""
    before = snapshot(untouched) if untouched else None
    code, _, err = cli(*argv)
    assert (code, err) == (2, expected)
    if untouched:
        assert snapshot(untouched) == before


# ---- the Trainer's settings: refused before anything is written --------------------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.accelerator=gpu", "trainer.accelerator (gpu): this machine has no GPU device; use trainer.accelerator=cpu, or auto to take what is there"),
        ("trainer.devices=[0,1]", "trainer.devices ([0, 1]): `devices` selected with `CPUAccelerator` should be an int > 0."),
    ],
)  # fmt: skip
def test_a_trainer_this_machine_cannot_run(tmp_path, override, message):
    fails(
        f"aiayn train: error: {message}\n",
        "train",
        DEMO,
        *TINY,
        override,
        "trainer.accelerator=cpu" if "devices" in override else "trainer.devices=1",
        "--runs",
        tmp_path / "runs",
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("trainer.accelerator=tpu", "trainer.accelerator: input should be 'auto', 'cpu', 'gpu', 'cuda' or 'mps', got 'tpu'"),
        ("trainer.devices=0", "trainer.devices: 0 names no device; give how many (devices: 2), which ones (devices: [0, 1]) or auto"),
        ("trainer.max_time=1h", "trainer.max_time: '1h' is not DD:HH:MM:SS; e.g. 00:12:00:00 for 12 hours"),
        ("trainer.limit_val_batches=-1", "trainer.limit_val_batches: -1 is neither a number of batches (an int >= 1) nor a fraction of them (a float in (0, 1])"),
        ("decode.alpha=inf", "decode.alpha: input should be a finite number, got 'inf'"),
    ],
)  # fmt: skip
def test_settings_the_schema_refuses(override, line):
    fails(
        f"aiayn validate: error: {DEMO} is not a valid experiment (1 error):\n  {line} (set on the command line: {override})\n",
        "validate",
        DEMO,
        override,
    )


# ---- shapes omegaconf cannot merge --------------------------------------------------------------


def test_an_index_past_the_end_names_the_list():
    fails(
        "aiayn validate: error: override 'model.encoder.layer[7].h=3' (on the command line): model.encoder.layer has 2 items "
        "(indices 0 to 1); set the whole list to grow it, e.g. model.encoder.layer=[...]\n",
        "validate", DEMO, "model.encoder.layer[7].h=3",
    )  # fmt: skip


def test_extends_is_no_override():
    fails(
        "aiayn validate: error: override 'extends=base.yaml' (on the command line): extends is read from the file before the "
        "overrides apply; write `extends:` in the YAML, or give the parent experiment itself\n",
        "validate", DEMO, "extends=base.yaml",
    )  # fmt: skip


def test_a_list_where_a_mapping_belongs(write):
    fails(
        "aiayn validate: error: override 'trainer=[1,2]' (on the command line): trainer is a mapping (key: value), not a list; set its keys, e.g. trainer.KEY=VALUE\n",
        "validate", DEMO, "trainer=[1,2]",
    )  # fmt: skip
    path = write("l.yaml", f"extends: {DEMO}\nname: l\ndims: [512, 8]\n")
    fails(
        f"aiayn validate: error: {path}: dims is a list, but the file it extends has a mapping (key: value) there; write dims as a mapping (key: value)\n",
        "validate", path,
    )  # fmt: skip


# ---- absurd sizes: instant to inspect, refused to train ----------------------------------------


def test_absurd_sizes_are_instant_to_refuse_and_refused_to_train(tmp_path):
    code, out, err = cli("show", DEMO, "dims.N=2000000000", "--json")  # counted in closed form: instant
    assert (code, out) == (2, "") and err.startswith("aiayn show: error: model: 9.26e+14 parameters need 13.2 PiB to train")
    assert err.endswith(
        "more than any machine holds (aiayn's bound: 1 PiB); the largest block is encoder.layer[1] feed_forward (2.63e+14): use smaller dims\n"
    )
    huge = ["dims.d_ff=2048000000", "trainer.accelerator=cpu"]
    code, out, _ = cli("show", DEMO, *huge, "--json")
    need = json.loads(out)["memory_bytes"]["total"]
    have = machine_memory(__import__("torch").device("cpu"))
    fails(
        f"aiayn train: error: the model needs about {need / 2**30:,.1f} GiB to train (fp32 weights, gradients and Adam, "
        f"and the activations of 4,000 tokens per batch: see `aiayn show`) but this machine has {have / 2**30:,.1f} GiB; "
        "use smaller dims, or lower train.max_tokens_per_batch\n",
        "train", DEMO, *huge, "--runs", tmp_path / "runs",
    )  # fmt: skip
    assert not (tmp_path / "runs").exists()
    fails(
        "aiayn validate: error: model: some weight would have more elements than PyTorch can count (2^63); use smaller dims\n",
        "validate", DEMO, "dims.h=2000000000", "dims.d_k=2000000000",  # W_Q's bytes beyond 2^63, each dim within int32
    )  # fmt: skip


# ---- paths of the wrong kind --------------------------------------------------------------------


def test_paths_of_the_wrong_kind(run, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x\n")
    how = "set data.dir (or $AIAYN_DATA, which the shipped experiments read) to the folder of the corpus"
    fails(
        f"aiayn train: error: data.dir {a_file} is a file, not a folder; {how}\n",
        "train",
        DEMO,
        "data.type=files",
        f"data.dir={a_file}",
    )
    fails(
        f"aiayn train: error: data.dir {tmp_path / 'none'} does not exist; {how}\n",
        "train",
        DEMO,
        "data.type=files",
        f"data.dir={tmp_path / 'none'}",
    )
    fails(
        f"aiayn train: error: --runs {a_file}: {a_file} is a file; give a folder for the run directories\n",
        "train",
        DEMO,
        "--runs",
        a_file,
    )
    for verb, flag in (("translate", "--output"), ("evaluate", "--hyps")):
        fails(
            f"aiayn {verb}: error: {flag} {tmp_path} is a folder; give the name of a file to write\n",
            verb,
            run,
            flag,
            tmp_path,
            untouched=run,
        )
    fails(
        f"aiayn average: error: --output {tmp_path} is a folder; give the name of a file to write\n",
        "average",
        run / "checkpoints" / "last.ckpt",
        "-o",
        tmp_path,
        untouched=run,
    )
    fails(
        f"aiayn average: error: --output {a_file / 'x.ckpt'}: {a_file} is a file, so nothing can be written under it\n",
        "average",
        run / "checkpoints" / "last.ckpt",
        "-o",
        a_file / "x.ckpt",
    )


def test_names_longer_than_a_filesystem_takes(run, tmp_path):
    """A name of 300 bytes, or a path of 6,000, given to any verb: one message naming the limit, the
    run untouched (an OSError "File name too long" from wherever it was opened, before)."""

    def short(path: object) -> str:
        text = str(path)
        return text if len(text) <= 80 else f"{text[:60]}...{text[-16:]}"

    name, nested = tmp_path / ("a" * 300), tmp_path / ("b/" * 2100) / "x.svg"
    figure, experiment = name.with_name(name.name + ".svg"), name.with_name(name.name + ".yaml")

    def too_long(n: int) -> str:
        return f"a name in it is {n} bytes long, and a file name may have 255; shorten it"

    cases = [
        (f"--figure {short(figure)}: {too_long(304)}", ["show", DEMO, "--figure", figure]),
        (f"--figure {short(nested)}: the path is {len(str(nested))} bytes long, and may have 4095; shorten it",
         ["show", DEMO, "--figure", nested]),
        (f"--output {short(name)}: {too_long(300)}", ["translate", run, "--output", name]),
        (f"--hyps {short(name)}: {too_long(300)}", ["evaluate", run, "--hyps", name]),
        (f"--output {short(name)}: {too_long(300)}", ["average", run / "checkpoints" / "last.ckpt", "-o", name]),
        (f"{short(name)}: {too_long(300)}", ["results", name]),
        (f"{short(name)}: {too_long(300)}", ["score", run, "--src", name, "--tgt", name]),
        (f"{short(name / 'config.json')}: {too_long(300)}", ["translate", name]),
        (f"{short(experiment)}: {too_long(305)}", ["validate", experiment]),
    ]  # fmt: skip
    for message, argv in cases:
        fails(f"aiayn {argv[0]}: error: {message}\n", *argv, untouched=run)


def test_average_never_overwrites_its_inputs_or_the_resume_point(run):
    steps = sorted((run / "checkpoints").glob("step*.ckpt"))
    fails(f"aiayn average: error: --output {steps[0]} is one of the files this command reads; write to another path\n",
          "average", *steps, "-o", steps[0], untouched=run)  # fmt: skip
    last = run / "checkpoints" / "last.ckpt"
    fails(f"aiayn average: error: --output {last} is part of the run {run.resolve()}, which only its training writes; write to a new path\n",
          "average", *steps, "-o", last, untouched=run)  # fmt: skip


# ---- resuming another model, or a damaged checkpoint --------------------------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xff\xfe garbage", "('utf-8' codec can't decode byte 0xff in position 0: invalid start byte); it is the run's tokenizer, which the model needs"),
        (b'{"a": 1', "(not JSON: Expecting ',' delimiter: line 1 column 8 (char 7))"),
    ],
)  # fmt: skip
def test_average_never_copies_a_damaged_tokenizer(run, tmp_path, content, why):
    (run / "tokenizer.json").write_bytes(content)
    steps = sorted((run / "checkpoints").glob("step*.ckpt"))
    fails(
        f"aiayn average: error: {run / 'tokenizer.json'} is not a valid tokenizer file {why}\n",
        "average",
        *steps,
        "-o",
        tmp_path / "avg.ckpt",
    )
    assert not (tmp_path / "avg.ckpt").exists()


def test_resume_into_another_model_is_refused_and_changes_nothing(run):
    runs = run.parent.parent
    message = (
        f"aiayn train: error: {run} trained another model (model.encoder.layer[1].d_ff: 64 -> 128; "
        "model.decoder.layer[2].d_ff: 64 -> 128); its checkpoints cannot continue as this one: train a new run "
        "(without --resume / --run-dir), or drop the changed settings\n"
    )
    fails(message, "train", DEMO, *TINY, "dims.d_ff=128", "trainer.max_steps=4", "--runs", runs, "--resume", untouched=run)
    fails(message, "train", DEMO, *TINY, "dims.d_ff=128", "trainer.max_steps=4", "--run-dir", run, untouched=run)


def test_resume_from_a_damaged_checkpoint_is_refused(run):
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    fails(
        f"aiayn train: error: {last} is not an aiayn checkpoint: torch.load cannot read it; give a .ckpt written by `aiayn train` or `aiayn average`\n",
        "train", DEMO, *TINY, "trainer.max_steps=4", "--runs", run.parent.parent, "--resume", untouched=run,
    )  # fmt: skip


@pytest.mark.parametrize(
    "name", ["status.json", "config.yaml", "tokenizer.json", "translations/valid.hyp", "hparams.yaml", "data/test.en"]
)
def test_resume_into_a_run_whose_file_is_a_folder_is_refused(run, name):
    (run / name).unlink()
    (run / name).mkdir()
    fails(
        f"aiayn train: error: {run / name} is a folder where the run keeps a file of its own; move it away, or train a new run\n",
        "train", DEMO, *TINY, "trainer.max_steps=4", "--run-dir", run, "--resume", untouched=run,
    )  # fmt: skip


# ---- failed trains leave nothing to mistake for a run -------------------------------------------


def test_a_failed_train_leaves_no_run_and_the_latest_run_is_the_last_with_a_checkpoint(run, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split, (en, de) in {"train": ("a b\nc d\n", "x y\n"), "valid": ("a\n", "x\n"), "test": ("a\n", "x\n")}.items():
        (data / f"{split}.en").write_text(en)
        (data / f"{split}.de").write_text(de)
    runs = run.parent.parent
    code, _, err = cli("train", DEMO, *TINY, "data.type=files", f"data.dir={data}", "--runs", runs)
    assert code == 2 and "is misaligned" in err
    assert sorted(p.name for p in run.parent.iterdir()) == ["version_0"]
    (run.parent / "version_7" / "checkpoints").mkdir(parents=True)  # an empty, newer run
    code, out, err = cli("evaluate", run.parent, "--json")
    assert code == 0, err
    assert json.loads(out)["checkpoint"] == str(run / "checkpoints" / "last.ckpt")


# ---- results files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"ppl": "low"}, "ppl: input should be a valid number, unable to parse string as a number, got 'low'"),
        ({"paper": None}, "paper: input should be a valid dictionary or instance of PaperColumnsSpec, got None"),
    ],
)  # fmt: skip
def test_results_files_are_checked(run, change, why):
    path = run / "results.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    fails(
        f"aiayn results: error: {path}: not a results.json of `aiayn train`: {why}; delete it, or re-run that run\n",
        "results",
        run.parent.parent,
    )


def test_results_of_runs_whose_files_are_damaged(run):
    """A config.yaml of bytes that are not UTF-8 (its settings are not shown); a results.json that is a folder."""
    (run / "config.yaml").write_bytes(b"\xff\xfe garbage \x00")
    code, out, err = cli("results", run.parent.parent)
    assert code == 0 and "| demo |" in out, err
    (run / "results.json").unlink()
    (run / "results.json").mkdir()
    fails(
        f"aiayn results: error: {run / 'results.json'}: not a results.json of `aiayn train`: it cannot be read (Is a directory); "
        "delete it, or re-run that run\n",
        "results", run.parent.parent,
    )  # fmt: skip


# ---- decoding limits ----------------------------------------------------------------------------


def test_decoding_limits(run, tmp_path):
    fails(
        "aiayn translate: error: --alpha (inf): input should be a finite number\n",
        "translate",
        run,
        "--alpha",
        "inf",
        untouched=run,
    )
    long = tmp_path / "long.en"
    long.write_text("one\n" + "seven " * 2000 + "\n")
    code, _, err = cli("translate", run, "--input", long)
    assert code == 2 and err.startswith("aiayn translate: error: input line 2 has ")
    assert err.endswith(" tokens, more than decode.max_input_len (1024); split that line, or raise the limit (--max-input-len)\n")


# ---- messages that used to mislead --------------------------------------------------------------


def test_messages_name_the_real_cause(run, write, tmp_path):
    child = write("c.yaml", "extends: demo.yml\nname: c\n")
    (tmp_path / "demo.yaml").write_text(f"extends: {DEMO}\nname: p\n")
    fails(f"aiayn validate: error: {child}: extends: {tmp_path.resolve() / 'demo.yml'} does not exist (extends is relative to the file "
          f"that names it); did you mean {tmp_path.resolve() / 'demo.yaml'}?\n", "validate", child)  # fmt: skip
    open_brace = write("o.yaml", f"extends: {DEMO}\nname: o\ndescription: '${{dims.d_model'\n")
    code, _, err = cli("validate", open_brace)
    assert code == 2 and err.startswith(f"aiayn validate: error: {open_brace}: description: ")
    blank = tmp_path / "blank"
    blank.mkdir()
    for split in ("train", "valid", "test"):
        (blank / f"{split}.en").write_text("a\n\n")
        (blank / f"{split}.de").write_text("\n\n")
    code, _, err = cli("train", DEMO, *TINY, "data.type=files", f"data.dir={blank}", "--runs", tmp_path / "runs")
    assert (code, err) == (2, f"aiayn train: error: {blank / 'train.de'}: all 2 lines are blank; it holds no sentences\n")
    (run / "checkpoints" / "last.ckpt").unlink()
    fails(
        f"aiayn translate: error: {run} has no checkpoint to load ({run / 'checkpoints' / 'last.ckpt'} does not exist); has it trained yet?\n",
        "translate",
        run,
    )
    code, _, err = cli("translate", run, "--beam")
    assert (
        code == 2
        and err.startswith("usage: aiayn translate ")
        and err.endswith("aiayn translate: error: argument --beam: expected one argument\n")
    )


def test_weights_that_do_not_fit_their_experiment_are_summed_up_in_one_line(run, tmp_path):
    import torch

    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    for layer in ckpt["hyper_parameters"]["experiment"]["model"]["encoder"]["layer"]:
        layer.update({"d_ff": 48} if layer["type"] == "feed_forward" else {})
    copy = shutil.copytree(run, tmp_path / "run")
    bad = copy / "checkpoints" / "bad.ckpt"
    torch.save(ckpt, bad)
    fails(
        f"aiayn translate: error: {bad}: the weights do not fit the model its experiment describes: shape "
        "encoder.layers.0.sublayers.1.sublayer.w_1.weight (64, 32) for (48, 32), "
        "encoder.layers.0.sublayers.1.sublayer.w_1.bias (64,) for (48,), "
        "encoder.layers.0.sublayers.1.sublayer.w_2.weight (32, 64) for (32, 48)\n",
        "translate", bad,
    )  # fmt: skip


def test_a_reader_that_leaves_early_gets_no_traceback():
    # `aiayn show experiments/demo.yaml | head -c 0`: the pipe is closed before aiayn writes (head
    # leaves at once, aiayn first imports for a second). With `head -1` it raced: on a loaded
    # machine aiayn could write its 3.4 kB into the pipe's buffer before head left, and exit 0.
    done = subprocess.run(
        f"{sys.executable} -m aiayn show {EXPERIMENTS / 'demo.yaml'} | head -c 0; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert (done.returncode, done.stderr, done.stdout) == (141, "", "")


# ---- no command writes over what it reads, nor into a run's files ------------------------------


def test_no_output_is_an_input_or_a_runs_file(run, tmp_path):
    other = tmp_path / "other" / "demo" / "version_0"  # a second run, read by the commands below
    shutil.copytree(run, other)
    last, text = run / "checkpoints" / "last.ckpt", tmp_path / "in.txt"
    text.write_text("three books\n")
    reads = "which this command reads"
    owned = f"part of the run {run.resolve()}, which only its training writes; write to a new path"
    fails(
        f"aiayn export: error: OUT {run / 'checkpoints'} lies inside {run}, {reads}; write outside it\n",
        "export",
        run,
        "--to",
        "ctranslate2",
        run / "checkpoints",
        "--force",
        untouched=run,
    )
    fails(
        f"aiayn export: error: OUT {run / 'translations'} is {owned}\n",
        "export",
        other,
        "--to",
        "ctranslate2",
        run / "translations",
        "--force",
        untouched=run,
    )
    fails(
        f"aiayn evaluate: error: --hyps {last} is one of the files this command reads; write to another path\n",
        "evaluate",
        last,
        "--hyps",
        last,
        untouched=run,
    )
    fails(
        f"aiayn evaluate: error: --hyps {run / 'translations' / 'valid.hyp'} is {owned}\n",
        "evaluate",
        other,
        "--hyps",
        run / "translations" / "valid.hyp",
        untouched=run,
    )
    fails(
        f"aiayn translate: error: --output {text} is one of the files this command reads; write to another path\n",
        "translate",
        other,
        "-i",
        text,
        "-o",
        text,
        untouched=tmp_path,
    )
    fails(
        f"aiayn translate: error: --output {run / 'config.yaml'} lies inside {run}, {reads}; write outside it\n",
        "translate",
        run,
        "-i",
        text,
        "-o",
        run / "config.yaml",
        untouched=run,
    )
    fails(f"aiayn average: error: --output {run / 'mean.ckpt'} lies inside {run}, {reads}; write outside it\n",
          "average", "--last", "1", run, "-o", run / "mean.ckpt", untouched=run)  # fmt: skip


def test_a_sweep_root_that_is_a_file_and_a_model_no_machine_holds(tmp_path):
    (a_file := tmp_path / "runs").write_text("")
    fails(f"aiayn sweep: error: --runs {a_file}: {a_file} is a file; give a folder for the sweep's runs\n",
          "sweep", EXPERIMENTS / "demo.sweep.yaml", "--runs", a_file, "--dry-run")  # fmt: skip
    fails("aiayn validate: error: model: some weight would have more elements than PyTorch can count (2^63); use smaller dims\n",
          "validate", DEMO, "dims.h=2000000000", "dims.d_k=2000000000", "--schema-only")  # fmt: skip
    fails("aiayn show: error: model: 4e+15 parameters need 56.8 PiB to train (weights, gradients and Adam), more than any machine "
          "holds (aiayn's bound: 1 PiB); the largest block is embedding (source = target = output) (4e+15): use smaller dims\n",
          "show", DEMO, "dims.vocab_size=2000000000", "dims.d_model=2000000")  # fmt: skip


def test_no_output_is_made_inside_a_run_even_where_nothing_is_yet(run, tmp_path):
    """A new file inside a run could pass for one of its own (a step checkpoint that resume and
    averaging would take): every verb that writes refuses it, for a path that does not exist yet too."""
    text, other = tmp_path / "in.txt", tmp_path / "other" / "demo" / "version_0"  # the model the commands read
    text.write_text("three books\n")
    shutil.copytree(run, other)
    new_ckpt = run / "checkpoints" / "step99999999.ckpt"
    owned = f"part of the run {run.resolve()}, which only its training writes; write to a new path\n"
    fails(
        f"aiayn average: error: --output {new_ckpt} is {owned}",
        "average",
        other / "checkpoints" / "last.ckpt",
        "-o",
        new_ckpt,
        untouched=run,
    )
    fails(
        f"aiayn show: error: --figure {run / 'checkpoints' / 'model.svg'} is {owned}",
        "show",
        DEMO,
        "--figure",
        run / "checkpoints" / "model.svg",
        untouched=run,
    )
    fails(
        f"aiayn translate: error: --output {run / 'translations' / 'new.de'} is {owned}",
        "translate",
        other,
        "-i",
        text,
        "-o",
        run / "translations" / "new.de",
        untouched=run,
    )
    fails(
        f"aiayn evaluate: error: --hyps {run / 'test.hyp'} is {owned}",
        "evaluate",
        other,
        "--hyps",
        run / "test.hyp",
        untouched=run,
    )
    fails(
        f"aiayn export: error: OUT {run / 'ct2' / 'model'} is {owned}",
        "export",
        other,
        "--to",
        "ctranslate2",
        run / "ct2" / "model",
        untouched=run,
    )
    fails(
        f"aiayn data: error: DIR {run / 'corpus'} is {owned}",
        "data",
        "multi30k",
        run / "corpus",
        "--from",
        tmp_path / "nowhere",
        untouched=run,
    )
    fails(f"aiayn results: error: {run} is a run directory, which only its training writes, and the table is written into DIR; "
          f"give the folder of its runs, {run.resolve().parent}\n", "results", run, untouched=run)  # fmt: skip


def test_run_dir_must_be_a_run_or_a_new_folder_and_resume_needs_a_run(run, tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("my own file\n")
    (mine / "data.csv").write_text("1,2\n")
    base = [DEMO, *TINY, "trainer.max_steps=1", f"data.cache_dir={tmp_path / 'cache'}"]
    not_a_run = (f"aiayn train: error: --run-dir {mine} holds files that are not a run's (data.csv, todo.txt); a run is trained "
                 "into a new or empty folder, or into its own run directory (runs/<name>/version_<n>): give another\n")  # fmt: skip
    fails(not_a_run, "train", *base, "--resume", "--run-dir", mine, untouched=mine)
    fails(not_a_run, "train", *base, "--run-dir", mine, untouched=mine)
    fails(f"aiayn train: error: --resume --run-dir {tmp_path / 'new'}: it does not exist, so there is nothing to resume; drop "
          "--resume to train a new run there\n", "train", *base, "--resume", "--run-dir", tmp_path / "new")  # fmt: skip
    (tmp_path / "empty").mkdir()
    fails(f"aiayn train: error: --resume --run-dir {tmp_path / 'empty'}: it is an empty folder, so there is nothing to resume; "
          "drop --resume to train a new run there\n", "train", *base, "--resume", "--run-dir", tmp_path / "empty")  # fmt: skip
    assert list((tmp_path / "empty").iterdir()) == [] and not (tmp_path / "new").exists()
    # a run with no checkpoint yet (status.json, as a run killed before its first save leaves)
    (run / "checkpoints").rename(tmp_path / "saved")
    fails(f"aiayn train: error: --resume --run-dir {run}: it is a run with no checkpoint yet, so there is nothing to resume; "
          "drop --resume to train a new run there\n", "train", *base, "--resume", "--run-dir", run, untouched=run)  # fmt: skip
    # a sweep's trial logs beside a new run are no obstacle, nor another node's half-written tokenizer (atomic_write's temp file)
    trial = tmp_path / "sweep" / "trial" / "version_0"
    trial.mkdir(parents=True)
    (trial / "stderr.log").write_text("")
    (trial / ".tokenizer.json.k3x_9f.tmp").write_text("")
    code, _, err = cli("train", *base, "--run-dir", trial)
    assert code == 0, err
    from aiayn.builder.run.rundir import RUN_FILE

    assert not RUN_FILE.fullmatch(".todo.txt.k3x_9f.tmp") and not RUN_FILE.fullmatch("tokenizer.json.tmp")


# ---- n-best lists, scores and alignments: refused before anything is read or written ----------


def test_translate_n_best_scores_and_alignments_refused(trained, tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("kept\n")
    source = tmp_path / "in.en"
    source.write_text("she sold eight apples\n")
    common = ("translate", trained, "--input", source, "--output", out)
    fails(
        "aiayn translate: error: --n-best (3) is more than the beam size (2): a search keeps 2 hypotheses a sentence; raise --beam to at least 3\n",
        *common, "--n-best", "3", untouched=tmp_path,
    )  # fmt: skip
    fails(
        "aiayn translate: error: --n-best: expected a whole number >= 1, got int 0\n",
        *common,
        "--n-best",
        "0",
        untouched=tmp_path,
    )
    fails(
        "aiayn translate: error: --alignments counts the words of the run's tokenized output; drop --detokenize\n",
        *common, "--alignments", "--detokenize", untouched=tmp_path,
    )  # fmt: skip
    fails(
        "aiayn translate: error: --alignment-layer: the decoder's layers are 0 to 0, got int 1\n",
        *common, "--alignments", "--alignment-layer", "1", untouched=tmp_path,
    )  # fmt: skip


def test_score_refusals(trained, tmp_path):
    src, tgt, short, blank = (tmp_path / name for name in ("s.txt", "t.txt", "short.txt", "blank.txt"))
    src.write_text("she sold eight apples\nthe dog\n")
    tgt.write_text("sie verkaufte acht Äpfel\nder Hund\n")
    short.write_text("der Hund\n")
    blank.write_text("she sold eight apples\n \n")
    out = tmp_path / "scores.txt"
    out.write_text("kept\n")
    fails(
        f"aiayn score: error: --tgt {tmp_path / 'none.txt'}: no such file\n",
        "score",
        trained,
        "--src",
        src,
        "--tgt",
        tmp_path / "none.txt",
        "-o",
        out,
        untouched=tmp_path,
    )
    fails(
        f"aiayn score: error: parallel corpus is misaligned: {src} has 2 lines but {short} has 1; line N of one file must translate line N of the other\n",
        "score", trained, "--src", src, "--tgt", short, "-o", out, untouched=tmp_path,
    )  # fmt: skip
    fails(
        f"aiayn score: error: --src {blank}, line 2 is blank: there is nothing to score its target against; drop that pair\n",
        "score", trained, "--src", blank, "--tgt", tgt, "-o", out, untouched=tmp_path,
    )  # fmt: skip
    fails(
        "aiayn score: error: --alpha (-1.0): input should be greater than or equal to 0\n",
        "score",
        trained,
        "--src",
        src,
        "--tgt",
        tgt,
        "--alpha",
        "-1",
        "-o",
        out,
        untouched=tmp_path,
    )
    code, written, err = cli("score", trained, "--src", src, "--tgt", tgt)
    assert code == 0, err
    assert [len(line.split("\t")) for line in written.splitlines()] == [3, 3]


@pytest.mark.parametrize(
    ("verb", "required"), [("train", "experiment"), ("show", "EXPERIMENT_OR_MODEL"), ("sweep", "SWEEP.yaml")]
)
def test_a_missing_argument_names_only_what_is_required(verb, required):
    """argparse counts a nargs="*" positional without a default as required in its message."""
    code, _, err = cli(verb)
    assert (code, err.splitlines()[-1]) == (2, f"aiayn {verb}: error: the following arguments are required: {required}")


@pytest.mark.parametrize(
    ("verb", "flag", "other"),
    [("translate", "--input", None), ("score", "--src", "--tgt"), ("score", "--tgt", "--src"), ("evaluate", "--src", "--ref"),
     ("evaluate", "--ref", "--src")],
)  # fmt: skip
def test_a_folder_given_for_a_text_file_is_named_by_its_flag(trained, tmp_path, verb, flag, other):
    text = tmp_path / "text.txt"
    text.write_text("the dog\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    fails(f"aiayn {verb}: error: {flag} {folder}: is a folder; give a text file\n",
          verb, trained, flag, folder, *([other, text] if other else []), untouched=tmp_path)  # fmt: skip
