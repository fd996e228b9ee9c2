"""The embedded demo, trained for real with its shipped config: the product's main path.

One test, so pytest-xdist cannot split it across workers and train the demo twice: it trains
(a few minutes on 2 CPU cores), then checks results.json, evaluate, translate and average.
"""

import json
import os
import subprocess
import sys

from builder.cli import main
from tests.conftest import EXPERIMENTS, ROOT


def test_demo_trains_to_bleu_90_then_evaluates_translates_and_averages(tmp_path, capsys):
    done = subprocess.run(
        [sys.executable, "-m", "builder.cli", "train", str(EXPERIMENTS / "demo.yaml"),
         "trainer.enable_progress_bar=false", f"data.cache_dir={tmp_path / 'cache'}"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "runs" / "demo" / "version_0"

    results = json.loads((run / "results.json").read_text())  # the validation split
    assert results["bleu"] >= 90, results
    assert results["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")

    assert main(["evaluate", str(run), "--split", "valid", "--json"]) == 0  # one pipeline: results.json's numbers
    valid = json.loads(capsys.readouterr().out)
    assert (valid["bleu"], valid["ppl"], valid["n_sentences"]) == (results["bleu"], results["ppl"], 300)

    assert main(["evaluate", str(run), "--json"]) == 0  # the held-out test split
    report = json.loads(capsys.readouterr().out)
    assert report["bleu"] >= 90 and report["chrf"] >= 90 and 1.0 < report["ppl"] < 2.0, report
    assert report["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")

    source = tmp_path / "in.en"
    source.write_text("she bought three hundred twenty-one books\n\ni know that he sold seven cars\n")
    assert main(["translate", str(run), "--input", str(source)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[1] == ""  # input order kept, the empty line stays empty
    subject, verb, number, noun = lines[0].split()  # 321 is one word: units before tens
    assert (subject, verb, noun) == ("sie", "kaufte", "Bücher") and number.startswith("dreihundert")
    assert lines[2].startswith("ich weiß, dass") and lines[2].endswith("verkaufte")  # verb-final clause

    averaged = tmp_path / "avg.ckpt"
    assert main(["average", "--last", "2", str(run), "-o", str(averaged)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(averaged), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] >= 85
