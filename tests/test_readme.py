"""The README and the manual, run as written (the slow tier): every command of their ```bash
blocks, the README's first, then each page's in the site's order (mkdocs.yml's nav), in one fresh
folder, then the demo they trained is checked for quality (BLEU >= 90, real German). The pages
whose commands need no run of the others' (SEPARATE: the sweeps', the language models' and the
encoder-only models') run
as a second test in a folder of their own, so that the two halves run side by side (-n 2).

Commands that CI runs itself (the install, the test tiers, the site) are checked against
`.ci/run`; `tensorboard --logdir X` is checked by reading X's events with TensorBoard's reader;
blocks that start with "# on a GPU" or "# needs ..." (the network, the Multi30k data, a run this
folder has not) cannot run here, so their `aiayn train` experiments and overrides are validated
and their other `aiayn` commands parsed; other programs of such blocks are not run.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from aiayn.builder.cli import verb_parser
from tests.builder.formats.causal_lm import hf_folder
from tests.builder.formats.opus_mt import opus_mt_folder
from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.longest]

README = ROOT / "README.md"
CI_COMMANDS = (
    "pip install",
    "python -m pytest",
    "ruff check",
    "ruff format",
    ".ci/",
    "mkdocs build",
)  # checked to be in .ci/run, not run again here
NOT_HERE = ("# on a GPU", "# needs ")  # a block that starts so is validated and parsed, not run


# what the test itself puts in the folder (the links, the cache, the folders standing for a user's), and runs/
MADE_HERE = {"experiments", "benchmarks", "examples", "cache", "opus-mt-en-de", "hf-model", "runs"}
SEPARATE = ("sweeps.md", "language-models.md", "encoder-models.md")  # their commands use no run that another page's made


def manual(separate: bool = False) -> str:
    """The README, then the manual's pages in the site's order (the home page is the README; the
    API reference and the schema page are generated), but for the SEPARATE pages; or those alone."""

    def pages(nav: list) -> list[str]:
        return [p for item in nav for value in item.values() for p in (pages(value) if isinstance(value, list) else [value])]

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    shown = [page for page in pages(nav) if page not in ("index.md", "api.md", "schema.md")]
    texts = [(ROOT / "docs" / page).read_text() for page in shown if (page in SEPARATE) == separate]
    return "\n".join(texts if separate else [README.read_text(), *texts])


def readme_commands(text: str) -> list[tuple[str, bool]]:
    """(command, runs here) for every command of the bash blocks of `text`, in order; a line
    ending in a backslash continues on the next; comments are dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        here = not block.startswith(NOT_HERE)
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip() if not line.startswith("#") else ""
            if line:
                commands.append((" ".join(line.split()), here))
    return commands


def as_validation(command: str) -> list[str]:
    """`[srun|torchrun ... -m aiayn] aiayn train EXP k=v ... [--run-dir D]` -> the
    `aiayn validate EXP k=v ...` that checks what it would train."""
    words = shlex.split(command)
    words = words[words.index("train") + 1 :]
    kept, skip = [], False
    for word in words:
        if skip or word == "--resume":
            skip = False
            continue
        if word in ("--run-dir", "--runs"):
            skip = True
            continue
        kept.append(word)
    return ["aiayn", "validate", *kept, "--schema-only"]  # no GPU nor WMT data here


def test_the_readme_and_the_manual_run_as_written_and_the_demo_learns(tmp_path):
    text = manual()
    env, outputs = environment(tmp_path), run_commands(text, tmp_path)
    check_console(
        outputs['pip install torch==2.13.0 && pip install -e ".[test,export]" && aiayn train experiments/demo.yaml'],
        README.read_text(),
    )
    check_demo(tmp_path / "runs" / "demo" / "version_0", env)
    for block in python_examples(text):  # the Python API, as written, on the demo trained above
        done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        out = check(done, block)
        lines = out.splitlines()
        assert "parameters" in lines[0] and lines[1].startswith("['sie kaufte dreihundert"), out
        assert lines[3].startswith("sie hat drei Bücher gekauft ") and lines[3].endswith(" 0-0 1-1 3-2 4-3 2-4"), out
        agrees, forced, searched = lines[5].split()
        assert agrees == "True" and float(forced) == pytest.approx(float(searched), abs=1e-4), out


def test_the_sweeps_and_language_models_pages_run_as_written(tmp_path):
    text = manual(separate=True)
    assert "aiayn sweep experiments/demo.sweep.yaml" in text and "aiayn generate runs/lm-demo" in text
    assert not python_examples(text)  # the Python API's example is the other test's
    outputs = run_commands(text, tmp_path)
    assert outputs['aiayn generate runs/lm-demo --prompt "she bought" --greedy'].startswith("she bought ")


def environment(tmp_path: Path) -> dict[str, str]:
    # one thread, fixed: train.cpu_threads: auto would move the count with the machine's load, and the
    # count changes a run's last bits, so that each CI run of the demo would be another draw (docs/training.md,
    # "Sharing a machine"); fixed, it is the same run on every load (valid BLEU 99.71 on this VM type)
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "AIAYN_CACHE": str(tmp_path / "cache"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }


def run_commands(text: str, tmp_path: Path) -> dict[str, str]:
    """Every command of `text`'s bash blocks in `tmp_path`, as the module's docstring says: the
    output of each one run, by its text."""
    commands = readme_commands(text)
    ci = (ROOT / ".ci" / "run").read_text()
    for folder in ("experiments", "benchmarks", "examples"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    env, outputs = environment(tmp_path), {}
    folders = (
        {"OPUS_MT": str(opus_mt_folder(tmp_path / "opus-mt-en-de")), "FINETUNE_DATA": str(tmp_path)} if "OPUS_MT" in text else {}
    )
    if "HF_MODEL" in text:  # the user's GPT-2 or Llama folder: one made by transformers' classes stands for it
        folders["HF_MODEL"] = str(hf_folder(tmp_path / "hf-model", "gpt2-tied", n_positions=256))
    with_folders = {**env, **folders}
    for command, here in commands:
        words = shlex.split(command)
        while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value before the program
            words = words[1:]
        if not here and (not words or words[0] == "export"):  # the user's paths: the folders stand for them
            continue
        if not here and words[0] == "aiayn" and words[1] != "train":
            verb_parser(words[1]).parse_intermixed_args(words[2:])  # its options exist; no download here
            continue
        if not here and "train" not in words:  # another program (sacrebleu, ...): not aiayn's to run
            continue
        if not here and ("finetune-opus-mt" in command or "finetune-hf" in command):
            check(subprocess.run(as_validation(command), cwd=tmp_path, env=with_folders, capture_output=True, text=True), command)
            continue
        if not here:
            check(subprocess.run(as_validation(command), cwd=tmp_path, env=env, capture_output=True, text=True), command)
            continue
        if command.startswith("tensorboard --logdir "):
            runs = {p.parent for p in (tmp_path / command.split()[-1]).rglob("events.out.tfevents*")}
            assert runs and all("BLEU/valid" in EventAccumulator(str(r)).Reload().Tags()["scalars"] for r in runs), command
            continue
        parts = [p.strip() for p in command.split("&&")]
        for part in [p for p in parts if p.startswith(CI_COMMANDS)]:
            assert in_ci(part, ci), f"CI does not run: {part}"
        rest = " && ".join(p for p in parts if not p.startswith(CI_COMMANDS))
        if rest:
            # plugins.md's commands: the example plugin, which .ci/run installs, selected (the tests load none by default)
            uses = {**env, "AIAYN_PLUGINS": "aiayn-example-plugin"} if "examples/plugin" in rest or "min_p" in rest else env
            done = subprocess.run(["bash", "-c", rest], cwd=tmp_path, env=uses, capture_output=True, text=True, timeout=1200)
            outputs[command] = check(done, command)
    left = sorted(p.name for p in tmp_path.iterdir() if p.name not in MADE_HERE)
    assert left == [], f"the manual's commands left {left} beside runs/: write them under runs/ or a folder the command names"
    return outputs


def in_ci(command: str, ci: str) -> bool:
    """Whether .ci/run runs `command` (quietly), or installs the folder of `pip install -e FOLDER`."""
    folder = command.removeprefix("pip install -e ") if command.startswith("pip install -e ") else None
    return command in ci or command.replace("pip install", "pip install --quiet") in ci or bool(folder and f"-e {folder}\n" in ci)


def python_examples(text: str) -> list[str]:
    """The README's ```python blocks that use aiayn's Python API (the plugin's and the export's
    need a package or a runtime of their own, and are tested elsewhere)."""
    return [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if block.startswith("import aiayn\n")]


def check(done: subprocess.CompletedProcess, command: str) -> str:
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{command}\n{done.stderr[-3000:]}"
    return done.stdout


def check_console(out: str, readme: str) -> None:
    """At most ~15 lines, and the README's sample is the demo's real output, line for line in shape."""
    lines = out.splitlines()
    assert len(lines) <= 15, out
    sample = re.search(r"```text\n(.*?)```", readme, re.S).group(1).splitlines()
    assert sample[0] in lines, (sample[0], out)
    shape = lambda line: re.sub(r"#m#s", "#s", re.sub(r"\d+(\.\d+)?(e-\d+)?", "#", line))  # noqa: E731  ETA 2m22s or 50s
    assert shape(sample[1]) in {shape(x) for x in lines}, out
    assert shape(sample[-1]) == shape(lines[-1]), out


def check_demo(run: Path, env: dict) -> None:
    results = json.loads((run / "results.json").read_text())  # the validation split
    assert results["bleu"] >= 90, results
    assert results["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")

    def aiayn(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(["aiayn", *args], input=stdin, env=env, capture_output=True, text=True)
        return check(done, " ".join(args))

    valid = json.loads(aiayn("evaluate", str(run), "--split", "valid", "--json"))  # one pipeline: results.json's numbers
    assert (valid["bleu"], valid["ppl"], valid["n_sentences"]) == (results["bleu"], results["ppl"], 300)
    report = json.loads(aiayn("evaluate", str(run), "--json"))  # the held-out test split
    assert report["bleu"] >= 90 and report["chrf"] >= 90 and 1.0 < report["ppl"] < 2.0, report

    lines = aiayn(
        "translate", str(run), stdin="she bought three hundred twenty-one books\n\ni know that he sold seven cars\n"
    ).splitlines()
    assert len(lines) == 3 and lines[1] == ""  # input order kept, the empty line stays empty
    subject, verb, number, noun = lines[0].split()  # 321 is one word: units before tens
    assert (subject, verb, noun) == ("sie", "kaufte", "Bücher") and number.startswith("dreihundert")
    assert lines[2].startswith("ich weiß, dass") and lines[2].endswith("verkaufte")  # verb-final clause

    # n-best lists, scores and alignments: the demo's alignments are known by construction (the
    # perfect's participle goes to the end), and forced scoring of the best gives its score
    rows = [
        r.split("\t")
        for r in aiayn(
            "translate",
            str(run),
            "--n-best",
            "3",
            "--scores",
            "--alignments",
            stdin="she has bought three books\nshe bought three books\n",
        ).splitlines()
    ]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "1", "1"] and len({r[2] for r in rows[:3]}) == 3
    assert rows[0][2:] == ["sie hat drei Bücher gekauft", "0-0 1-1 3-2 4-3 2-4"], rows
    assert rows[3][2:] == ["sie kaufte drei Bücher", "0-0 1-1 2-2 3-3"], rows
    assert all(float(a[1]) >= float(b[1]) for a, b in zip(rows, rows[1:]) if a[0] == b[0])
    src, tgt = run.parent / "pair.en", run.parent / "pair.de"
    src.write_text("she has bought three books\nshe bought three books\n")
    tgt.write_text(f"{rows[0][2]}\n{rows[3][2]}\n")
    scored = [
        line.split("\t") for line in aiayn("score", str(run), "--src", str(src), "--tgt", str(tgt), "--alignments").splitlines()
    ]
    assert [float(s[-1]) for s in scored] == pytest.approx([float(rows[0][1]), float(rows[3][1])], abs=1e-4)
    assert [s[2] for s in scored] == [rows[0][3], rows[3][3]]
