"""The embedded demo, trained for real with its shipped config: the product's main path.

One module-scoped training run (a few minutes on 2 CPU cores) feeds every test here.
"""

import json
import subprocess
import sys

import pytest

from builder.cli import main
from tests.conftest import EXPERIMENTS, ROOT


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("demo")
    done = subprocess.run(
        [sys.executable, "-m", "builder.cli", "train", str(EXPERIMENTS / "demo.yaml"),
         "trainer.enable_progress_bar=false", f"data.cache_dir={work / 'cache'}"],
        cwd=work, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "runs" / "demo" / "version_0"


def test_demo_reaches_bleu_90_on_its_validation_split(demo_run):
    results = json.loads((demo_run / "results.json").read_text())
    assert results["bleu"] >= 90, results
    assert results["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")


def test_evaluate_on_the_held_out_test_split(demo_run, capsys):
    assert main(["evaluate", str(demo_run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bleu"] >= 90 and report["chrf"] >= 90 and 1.0 < report["ppl"] < 2.0
    assert report["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_translate_numbers_and_word_order(demo_run, tmp_path, capsys):
    source = tmp_path / "in.en"
    source.write_text("she bought three hundred twenty-one books\n\ni know that he sold seven cars\n")
    assert main(["translate", str(demo_run), "--input", str(source)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[1] == ""  # input order kept, the empty line stays empty
    subject, verb, number, noun = lines[0].split()  # 321 is one word: units before tens
    assert (subject, verb, noun) == ("sie", "kaufte", "Bücher") and number.startswith("dreihundert")
    assert lines[2].startswith("ich weiß, dass") and lines[2].endswith("verkaufte")  # verb-final clause


def test_averaged_checkpoint_still_translates(demo_run, tmp_path, capsys):
    out = tmp_path / "avg.ckpt"
    assert main(["average", "--last", "2", str(demo_run), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] >= 85
