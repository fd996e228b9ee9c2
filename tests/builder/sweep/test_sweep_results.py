"""`aiayn results` on hand-written results.json files: Table 3's layout, seeds pooled as
mean ± sample std, the paper's numbers beside ours, CSV and plot. No training."""

import csv
import json

import pytest
import yaml

from aiayn.builder.cli import main
from aiayn.builder.errors import UserError
from aiayn.builder.sweep.formats import CSV_FIELDS
from aiayn.builder.sweep.results import write_results
from aiayn.builder.sweep.rows import collect

BASE = dict(N=6, d_model=512, d_ff=2048, h=8, d_k=64, d_v=64, P_drop=0.1, eps_ls=0.1, positional="sinusoidal", train_steps=100000)


def put(
    root,
    trial,
    name,
    *,
    ppl,
    bleu,
    version=0,
    params=63_082_496,
    group=None,
    reported=None,
    steps=100000,
    variant=None,
    current=None,
    seed=None,
    **paper,
):
    run_dir = root / trial / f"version_{version}"
    run_dir.mkdir(parents=True)
    results = {
        "name": name,
        "params": params,
        "paper": {**BASE, **paper},
        "reported": None
        if group is None
        else {
            "source": "Vaswani et al. 2017, Table 3",
            "group": group,
            "ppl": None,
            "bleu": None,
            "params_m": None,
            **(reported or {}),
        },
        "split": "valid",
        "bleu": bleu,
        "chrf": 50.0,
        "ppl": ppl,
        "sacrebleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "steps": steps,
        "wall_time_s": 1.0,
        "tokens_per_s": 1.0,
        **({} if seed is None else {"seed": seed}),
    }
    (run_dir / "results.json").write_text(json.dumps(results))
    if variant is not None:
        (root / trial / "trial.json").write_text(
            json.dumps({"trial": trial, "variant": variant, "run_dir": current or run_dir.name})
        )


@pytest.fixture
def sweep_dir(tmp_path):
    root = tmp_path / "runs" / "table3"
    paper_base = {"ppl": 4.92, "bleu": 25.8, "params_m": 65}
    put(root, "base-seed1", "base-seed1", ppl=4.9, bleu=25.5, group="base", reported=paper_base, variant="base")
    put(root, "base-seed2", "base-seed2", ppl=5.1, bleu=26.1, group="base", reported=paper_base, variant="base")
    # trial.json names version_1: version_0 ran an older config of this trial and is not counted
    put(
        root,
        "table3-a-h1-seed1",
        "table3-a-h1-seed1",
        ppl=99.0,
        bleu=1.0,
        group="A",
        variant="table3-a-h1",
        current="version_1",
        h=1,
        d_k=512,
        d_v=512,
    )
    put(
        root,
        "table3-a-h1-seed1",
        "table3-a-h1-seed1",
        version=1,
        ppl=5.3,
        bleu=24.8,
        group="A",
        reported={"ppl": 5.29, "bleu": 24.9},
        variant="table3-a-h1",
        h=1,
        d_k=512,
        d_v=512,
    )
    put(
        root,
        "table3-a-h4-seed1",
        "table3-a-h4-seed1",
        ppl=5.0,
        bleu=25.6,
        group="A",
        reported={"ppl": 5.0, "bleu": 25.5},
        variant="table3-a-h4",
        h=4,
        d_k=128,
        d_v=128,
    )
    put(
        root,
        "table3-c-n2-seed1",
        "table3-c-n2-seed1",
        ppl=6.1,
        bleu=23.5,
        params=33_656_832,
        group="C",
        reported={"ppl": 6.11, "bleu": 23.7, "params_m": 36},
        variant="table3-c-n2",
        N=2,
    )
    put(
        root,
        "table3-e-learned-seed3",
        "table3-e-learned-seed3",
        ppl=4.95,
        bleu=25.75,
        params=63_606_784,
        group="E",
        reported={"ppl": 4.92, "bleu": 25.7},
        positional="learned",
    )
    put(root, "mine-seed1", "mine-seed1", ppl=7.25, bleu=20.0, params=1_053_696, steps=300, variant="mine", P_drop=0.0)
    put(root, "mine-seed2", "mine-seed2", ppl=7.75, bleu=21.0, params=1_053_696, steps=310, variant="mine", P_drop=0.0)
    # a plain `aiayn train` run beside the trials: no trial.json, grouped by its name
    put(
        root / "extra",
        "big",
        "big",
        ppl=4.33,
        bleu=26.4,
        params=214_245_376,
        group="big",
        reported={"ppl": 4.33, "bleu": 26.4, "params_m": 213},
        steps=300000,
        d_model=1024,
        d_ff=4096,
        h=16,
        P_drop=0.3,
    )
    order = ["base", "table3-a-h4", "table3-a-h1", "table3-c-n2", "mine"]
    (root / "sweep.json").write_text(
        json.dumps({"name": "table3", "trials": [{"name": f"{v}-seed1", "variant": v} for v in order]})
    )
    return root


HEADER = (  # no ΔBLEU nor "vs paper": these runs saved no translations, and a column empty in every row is left out
    "| group | variant | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls | positional | steps | runs | PPL | BLEU | params ×10⁶ "
    "| paper PPL | paper BLEU | paper params ×10⁶ |"
)
ROWS = [
    "| base | base | 6 | 512 | 2048 | 8 | 64 | 64 | 0.1 | 0.1 | sinusoidal | 100000 | 2 | 5.00 ± 0.14 | 25.80 ± 0.42 | 63.08 | 4.92 | 25.8 | 65 |",
    "| (A) | table3-a-h4 | 6 | 512 | 2048 | 4 | 128 | 128 | 0.1 | 0.1 | sinusoidal | 100000 | 1 | 5.00 | 25.60 | 63.08 | 5.00 | 25.5 |  |",
    "|  | table3-a-h1 | 6 | 512 | 2048 | 1 | 512 | 512 | 0.1 | 0.1 | sinusoidal | 100000 | 1 | 5.30 | 24.80 | 63.08 | 5.29 | 24.9 |  |",
    "| (C) | table3-c-n2 | 2 | 512 | 2048 | 8 | 64 | 64 | 0.1 | 0.1 | sinusoidal | 100000 | 1 | 6.10 | 23.50 | 33.66 | 6.11 | 23.7 | 36 |",
    "| (E) | table3-e-learned | 6 | 512 | 2048 | 8 | 64 | 64 | 0.1 | 0.1 | learned | 100000 | 1 | 4.95 | 25.75 | 63.61 | 4.92 | 25.7 |  |",
    "|  | mine | 6 | 512 | 2048 | 8 | 64 | 64 | 0.0 | 0.1 | sinusoidal | 300-310 | 2 | 7.50 ± 0.35 | 20.50 ± 0.71 | 1.05 |  |  |  |",
    "| big | big | 6 | 1024 | 4096 | 16 | 64 | 64 | 0.3 | 0.1 | sinusoidal | 300000 | 1 | 4.33 | 26.40 | 214.25 | 4.33 | 26.4 | 213 |",
]


SIGNATURE = "BLEU: sacreBLEU on detokenized text, sacreBLEU nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0."


def test_markdown_rows(sweep_dir):
    text = write_results(sweep_dir)
    assert text.splitlines() == [HEADER, "|" + "|".join(["---"] * 19) + "|", *ROWS, "", SIGNATURE]
    assert (sweep_dir / "results.md").read_text() == text


def test_runs_scored_otherwise_never_share_the_bleu_column(sweep_dir, capsys):
    tokenized = sweep_dir / "tiny" / "version_0"
    put(sweep_dir, "tiny", "tiny", ppl=5.0, bleu=41.0)
    record = json.loads((tokenized / "results.json").read_text())
    record["sacrebleu_signature"] = "nrefs:1|case:lc|eff:no|tok:none|smooth:exp|version:2.6.0"
    (tokenized / "results.json").write_text(json.dumps(record))
    assert main(["results", str(sweep_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "aiayn results: error: the runs were scored in 2 ways, which one BLEU column cannot hold (sacreBLEU on detokenized text: "
    )
    assert err.endswith(
        f"; BLEU on the runs' tokenized text, lowercased: {tokenized}); give aiayn results a directory of runs scored alike "
        "(a sweep's, or one experiment's)"
    )
    assert main(["results", str(sweep_dir / "tiny")]) == 0
    assert capsys.readouterr().out.splitlines()[3:5] == [
        "",
        "BLEU: BLEU on the runs' tokenized text, lowercased, sacreBLEU nrefs:1|case:lc|eff:no|tok:none|smooth:exp|version:2.6.0.",
    ]


def test_csv(sweep_dir):
    write_results(sweep_dir)
    with open(sweep_dir / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == CSV_FIELDS == [
        "group", "variant", "runs", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "positional", "norm", "ffn", "kv_heads", "rotary", "position_bias", "uniform", "steps",
        "ppl", "ppl_std", "bpb", "bpb_std", "bleu", "bleu_std", "parse_f1", "parse_f1_std", "parse_f1_repaired", "parse_f1_repaired_std", "delta_bleu", "delta_low", "delta_high", "p_value", "seeds_agree", "interval_over", "vs_paper", "params", "paper_ppl", "paper_bleu", "paper_params_m", "trials",
    ]  # fmt: skip
    assert [r["variant"] for r in rows] == [
        "base",
        "table3-a-h4",
        "table3-a-h1",
        "table3-c-n2",
        "table3-e-learned",
        "mine",
        "big",
    ]
    base = rows[0]
    assert {k: base[k] for k in ("group", "runs", "N", "d_model", "h", "steps", "params", "paper_ppl", "paper_bleu", "paper_params_m", "trials")} == {
        "group": "base", "runs": "2", "N": "6", "d_model": "512", "h": "8", "steps": "100000", "params": "63082496",
        "paper_ppl": "4.92", "paper_bleu": "25.8", "paper_params_m": "65", "trials": "base-seed1 base-seed2",
    }  # fmt: skip
    assert float(base["ppl"]) == pytest.approx(5.0) and float(base["ppl_std"]) == pytest.approx(2**0.5 / 10)
    assert float(base["bleu"]) == pytest.approx(25.8) and float(base["bleu_std"]) == pytest.approx(0.3 * 2**0.5)
    h1 = rows[2]
    assert (h1["ppl"], h1["ppl_std"], h1["bleu_std"], h1["paper_params_m"], h1["group"]) == ("5.3", "", "", "", "A")
    assert (rows[5]["group"], rows[5]["steps"], rows[5]["P_drop"]) == ("", "300-310", "0.0")


def test_plot(sweep_dir):
    write_results(sweep_dir)
    png = (sweep_dir / "results.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_only_the_current_run_of_a_trial_counts(sweep_dir):
    names = sorted((r["name"], r["ppl"]) for r in collect(sweep_dir) if r["variant"] == "table3-a-h1")
    assert names == [("table3-a-h1-seed1", 5.3)]


def test_without_a_sweep_order_variants_sort_by_name(sweep_dir):
    (sweep_dir / "sweep.json").unlink()
    lines = write_results(sweep_dir).splitlines()
    assert [line.split(" | ")[1] for line in lines[2:4]] == ["base", "table3-a-h1"]


def test_cli(sweep_dir, capsys):
    assert main(["results", str(sweep_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == HEADER and out[2:9] == ROWS
    assert out[9:11] == ["", SIGNATURE]
    assert out[11] == f"wrote {sweep_dir / 'results.md'}, results.csv and results.png"


def test_no_finished_runs(tmp_path, capsys):
    (tmp_path / "runs" / "x" / "version_0").mkdir(parents=True)
    assert main(["results", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == (
        f"aiayn results: error: {tmp_path / 'runs'}: no finished runs (no results.json under it); a run writes "
        "results.json only when its training finished: train or sweep first, or resume unfinished runs\n"
    )
    with pytest.raises(UserError) as info:
        write_results(tmp_path / "nope")
    assert str(info.value) == f"{tmp_path / 'nope'}: not a directory; give a sweep's or a run root's directory, e.g. runs/table3"


def test_broken_results_file(tmp_path):
    (tmp_path / "r" / "version_0").mkdir(parents=True)
    (tmp_path / "r" / "version_0" / "results.json").write_text('{"name": "r"}')
    with pytest.raises(UserError) as info:
        write_results(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'r' / 'version_0' / 'results.json'}: not a results.json of `aiayn train`: params: required key is "
        "missing; paper: required key is missing; bleu: required key is missing; ppl: required key is missing; steps: "
        "required key is missing; delete it, or re-run that run"
    )


def test_a_results_file_any_depth_down_is_found_and_a_folder_in_an_outputs_place_is_one_line(sweep_dir, tmp_path, capsys):
    deep = tmp_path / "deep"
    folder = deep
    for _ in range(1100):  # Path.rglob recurses a frame or more a level: a RecursionError past 1,000
        folder = folder / "d"
        folder.mkdir(parents=folder.parent == deep)
    (folder / "results.json").write_text('{"name": "r"}')
    try:
        with pytest.raises(UserError) as info:
            write_results(deep)
    finally:  # bottom up: shutil.rmtree (pytest's clean-up of old temporary folders) recurses too
        (folder / "results.json").unlink()
        while folder != deep:
            folder.rmdir()
            folder = folder.parent
    assert str(info.value).startswith(f"{deep.joinpath(*['d'] * 1100) / 'results.json'}: not a results.json of `aiayn train`:")
    (sweep_dir / "results.md").mkdir()
    before = sorted(p.name for p in sweep_dir.iterdir())
    assert main(["results", str(sweep_dir)]) == 2
    assert capsys.readouterr().err == (
        f"aiayn results: error: {sweep_dir / 'results.md'}: a folder, where aiayn results writes the table's results.md; "
        "move it away\n"
    )
    assert sorted(p.name for p in sweep_dir.iterdir()) == before  # nothing written


def test_settings_the_rows_differ_in_get_a_column_and_uneven_layers_a_mark(tmp_path):
    root = tmp_path / "runs" / "norms"
    config = {"name": "x", "model": {"d_model": 512, "encoder": {"add_norm": {"placement": "post", "dropout": 0.1}, "num_layers": 6}},
              "train": {"seed": 1, "compile": False}}  # fmt: skip
    for trial, placement, seed, uniform in (
        ("post-seed1", "post", 1, True),
        ("post-seed2", "post", 2, True),
        ("pre-seed1", "pre", 1, False),
    ):
        put(root, trial, trial, ppl=5.0, bleu=25.0, **({} if uniform else {"uniform": False}))
        run = {**config, "name": trial, "train": {"seed": seed, "compile": False}}
        run["model"] = {**config["model"], "encoder": {"add_norm": {"placement": placement, "dropout": 0.1}, "num_layers": 6}}
        (root / trial / "version_0" / "config.yaml").write_text(yaml.safe_dump(run))
    text = write_results(root)
    head, _, post, pre, *rest = ([c.strip() for c in line.strip("|").split("|")] for line in text.splitlines())
    at = head.index("positional")
    assert head[at : at + 2] == ["positional", "model.encoder.add_norm.placement"]  # not the seeds', names' or dropouts'
    assert [post[0], *post[at : at + 2]] == ["post", "sinusoidal", "post"]
    assert [pre[0], *pre[at : at + 2]] == ["pre †", "sinusoidal", "pre"]
    assert text.splitlines()[-1] == "†: layers differ within a stack; Table 3's columns give the first layer's."
    with open(root / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["variant"], r["uniform"], r["model.encoder.add_norm.placement"]) for r in rows] == [
        ("post", "true", "post"),
        ("pre", "false", "pre"),
    ]


def put_variant(root, name, *, placement, norm="layer_norm", seed=1, bleu=25.0):
    """A run of `name` whose config has both stacks' add & norm as given (RMSNorm reports its switch)."""
    put(root, f"{name}-seed{seed}", f"{name}-seed{seed}", ppl=5.0, bleu=bleu, variant=name, seed=seed,
        **({"norm": norm} if norm != "layer_norm" else {}))  # fmt: skip
    stack = {"add_norm": {"placement": placement, "norm": {"type": norm, "eps": 1e-6}}, "num_layers": 6}
    config = {"name": name, "model": {"d_model": 512, "encoder": stack, "decoder": stack}, "train": {"seed": seed}}
    (root / f"{name}-seed{seed}" / "version_0" / "config.yaml").write_text(yaml.safe_dump(config))


@pytest.mark.parametrize("modern_norm", ["layer_norm", "rms_norm"], ids=["placement_alone", "placement_beside_norm"])
def test_the_table_names_every_setting_the_rows_differ_in(tmp_path, modern_norm):
    """Pre-norm is a column of its own: the norm column (two rows, so it splits them as the
    placement does) no longer stands for it, and both stacks' equal settings are one column."""
    root = tmp_path / "runs" / "modern"
    put_variant(root, "paper", placement="post")
    put_variant(root, "modern", placement="pre", norm=modern_norm)
    head, _, *rows = ([c.strip() for c in line.strip("|").split("|")] for line in write_results(root).splitlines()[:4])
    column = head.index("model.{encoder,decoder}.add_norm.placement")
    assert {row[head.index("variant")]: row[column] for row in rows} == {"paper": "post", "modern": "pre"}
    assert ("norm" in head) == (modern_norm == "rms_norm")
    assert not any(h.endswith("norm.type") for h in head)  # the norm column shows the norm's type
    with open(root / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["variant"]: r["model.{encoder,decoder}.add_norm.placement"] for r in rows} == {"paper": "post", "modern": "pre"}


def test_a_plugins_switch_is_a_column_and_breaks_no_reader(tmp_path):
    """results.json's paper columns are open: a switch a plugin's block reports (qk_norm) is read,
    shown and written to the CSV, as aiayn's own are."""
    root = tmp_path / "runs" / "plugin"
    put(root, "paper-seed1", "paper-seed1", ppl=5.0, bleu=25.0, variant="paper")
    put(root, "qk-seed1", "qk-seed1", ppl=4.9, bleu=25.4, variant="qk", qk_norm=True, norm="rms_norm")
    head, _, *rows = ([c.strip() for c in line.strip("|").split("|")] for line in write_results(root).splitlines()[:4])
    assert head[head.index("positional") + 1 : head.index("positional") + 3] == ["norm", "qk_norm"]  # aiayn's, then the plugin's
    cells = {row[head.index("variant")]: row[head.index("qk_norm")] for row in rows}
    assert cells == {"paper": "", "qk": "True"}
    with open(root / "results.csv", newline="") as f:
        assert {r["variant"]: r["qk_norm"] for r in csv.DictReader(f)} == {"paper": "", "qk": "True"}


def test_a_searched_value_prints_short_in_the_table_and_whole_in_the_csv(tmp_path):
    """A search draws dropouts such as 0.044026767245133915: the table shows 0.04403 (in Table 3's
    column and in a setting's column, as the search section does), the CSV every digit."""
    root = tmp_path / "runs" / "s"
    drawn = 0.044026767245133915
    put(root, "a-seed1", "a-seed1", ppl=5.0, bleu=25.0, variant="a", P_drop=drawn)
    put(root, "b-seed1", "b-seed1", ppl=5.0, bleu=25.0, variant="b", P_drop=0.1)
    for trial, factor in (("a-seed1", 0.123456789), ("b-seed1", 1.0)):
        (root / trial / "version_0" / "config.yaml").write_text(yaml.safe_dump({"train": {"lr_schedule": {"factor": factor}}}))
    text = write_results(root)
    head, _, a, b = text.splitlines()[:4]
    assert head.startswith(
        "| variant | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls | positional | train.lr_schedule.factor |"
    )
    assert a.startswith("| a | 6 | 512 | 2048 | 8 | 64 | 64 | 0.04403 | 0.1 | sinusoidal | 0.1235 |")
    assert b.startswith("| b | 6 | 512 | 2048 | 8 | 64 | 64 | 0.1 | 0.1 | sinusoidal | 1.0 |")
    with open(root / "results.csv", newline="") as f:
        rows = {row["variant"]: row for row in csv.DictReader(f)}
    assert (rows["a"]["P_drop"], rows["a"]["train.lr_schedule.factor"]) == (str(drawn), "0.123456789")


def test_no_column_repeats_what_another_says(tmp_path):
    """Runs with a plugin's score step, a text pipeline and another tokenizer type: the score column
    stands for its config paths, `data.pipeline: []` for the steps the other rows list, and a field
    only SentencePiece has for the tokenizer's type; each setting the rows differ in is one column."""
    root = tmp_path / "runs" / "plugins"
    layer = [{"type": "self_attention", "h": 8, "score": {"type": "relu", "scale": 2.0}}]
    settings = {
        "a": ({"score": "relu"}, layer, [{"type": "nfkc"}, {"type": "lowercase"}], {"type": "bpe", "vocab_size": 8000}),
        "b": (
            {},
            [{"type": "self_attention", "h": 8}],
            [],
            {"type": "sentencepiece", "vocab_size": 8000, "character_coverage": 1.0},
        ),
    }
    for name, (paper, layers, pipeline, tokenizer) in settings.items():
        put(root, f"{name}-seed1", f"{name}-seed1", ppl=5.0, bleu=25.0, variant=name, **paper)
        config = {"model": {"encoder": {"layer": layers}}, "data": {"pipeline": pipeline, "tokenizer": tokenizer}}
        (root / f"{name}-seed1" / "version_0" / "config.yaml").write_text(yaml.safe_dump(config))
    head = [c.strip() for c in write_results(root).splitlines()[0].strip("|").split("|")]
    extra = head[head.index("positional") + 1 : head.index("BLEU") if "BLEU" in head else None]
    assert [c for c in extra if c.startswith(("score", "model.", "data."))] == [
        "score", "data.pipeline[0].type", "data.pipeline[1].type", "data.tokenizer.type",
    ]  # fmt: skip


def test_a_graphs_table_names_the_graph_once_and_its_base_is_the_sweeps(tmp_path):
    """An encoder-decoder beside decoder-only variants (two of three on one experiment file): the
    graph column stands for the stacks' and the embedding's settings, and ΔBLEU's base is the
    sweep's base experiment, not the file most variants read."""
    from aiayn.builder.sweep.rows import sweep_base

    root = tmp_path / "runs" / "graphs"
    stacks = {"encoder": {"layer": [{"type": "self_attention"}]}, "decoder": {"layer": [{"type": "cross_attention"}]},
              "embedding": {"vocab_size": 100}}  # fmt: skip
    alone = {"encoder": None, "decoder": {"layer": [{"type": "feed_forward"}]}, "embedding": {"vocab_size": 101}}
    trials = []
    for name, model, experiment, paper in (("enc-dec", stacks, "tiny.yaml", {}), ("dec", alone, "dec.yaml", {"graph": "decoder-only"}),
                                           ("dec-prefix", alone, "dec.yaml", {"graph": "decoder-only", "source_mask": "prefix"})):  # fmt: skip
        put(root, f"{name}-seed1", f"{name}-seed1", ppl=5.0, bleu=20.0, variant=name, seed=1, **paper)
        (root / f"{name}-seed1" / "version_0" / "config.yaml").write_text(yaml.safe_dump({"model": model}))
        own = ["model.source_mask=prefix"] if name == "dec-prefix" else []
        trials.append({"variant": name, "experiment": experiment, "overrides": [*own, "train.seed=1", f"name={name}-seed1"]})
    (root / "sweep.json").write_text(json.dumps({"base": "tiny.yaml", "trials": trials}))
    assert sweep_base(root) == "enc-dec"
    head = [c.strip() for c in write_results(root).splitlines()[0].strip("|").split("|")]
    assert "graph" in head and "source_mask" in head and not [c for c in head if c.startswith("model.")], head


def test_paper_columns_from_another_source_say_which(tmp_path):
    """A row whose reported numbers are not Vaswani et al.'s (the literature's Multi30k BLEU)
    names their source under the table; the paper's own rows say nothing (test_markdown_rows)."""
    root = tmp_path / "runs" / "tiny"
    wu = {"bleu": 41.02, "source": "Wu et al. 2021, test2016"}
    put(root, "tiny-seed1", "tiny-seed1", ppl=5.0, bleu=40.0, group="base", reported=wu, variant="tiny")
    put(root, "other-seed1", "other-seed1", ppl=5.0, bleu=40.0, variant="other")
    text = write_results(root)
    assert "| 41.0 |" in text
    assert text.splitlines()[-1] == "paper columns not from Vaswani et al. 2017, Table 3: tiny: Wu et al. 2021, test2016."
