"""What decoding beyond one beam buys, measured: BLEU and chrF of a split (test2016 for the
Multi30k recipes) and the wall time per 1,000 sentences, for

  beam          the first run's model as `aiayn evaluate` decodes it (averaged where it averages)
  last          the first run's last checkpoint, beam (what checkpoint averaging is compared with)
  seed k        each run alone, beam
  ensemble      all the runs as one ensemble, beam
  mbr-beam      MBR (chrF, uniform weights) over the first model's beam K-best (beam K)
  mbr-samples   MBR (chrF) over K samples of the first model, against themselves
  mbr-ensemble  MBR (chrF) over the ensemble's beam K-best

    python benchmarks/decoding_choices.py RUN1 RUN2 RUN3 [--split test] [--k 16] [--threads 1] [--limit N]

Each row's translations come from the Python API on the split's text as the model reads it (its
data.pipeline applied) and are scored as `aiayn evaluate` scores them (the run's scoring: the
literature's tokenized, lowercased BLEU for the Multi30k recipes). Times are of the decoding
call alone (models loaded before), one pass, with the ratio to `beam` in the same process.
"""

import argparse
import json
import time
from pathlib import Path

import torch

import aiayn
from aiayn.builder.data.spec import split_texts
from aiayn.builder.decode.mbr import MBRChoice, utility_spec
from aiayn.builder.decode.metrics import Scoring, score
from aiayn.builder.decode.sampling import Sampling
from aiayn.builder.decode.strategy import Decoding, Sampled
from aiayn.builder.registry import registry_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="trained run directories of one recipe (its seeds)")
    parser.add_argument("--split", default="test", choices=("valid", "test"))
    parser.add_argument("--k", type=int, default=16, help="MBR's candidates (default: 16)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=int, help="the first N sentences only (a quick look)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    first = aiayn.load_run(args.runs[0], device="cpu")
    sources, refs, data = split_texts(first.spec, args.split)
    if args.limit:
        sources, refs = sources[: args.limit], refs[: args.limit]
    scoring = Scoring.of(first.spec.data)
    settings = first.spec.decode
    chrf = MBRChoice(utility_spec("chrf", registry_of(first.spec)), "uniform", None)
    wide = settings.model_copy(update={"beam": max(settings.beam, args.k)})
    models = {"beam": first, "last": aiayn.load_run(Path(args.runs[0]) / "checkpoints" / "last.ckpt", device="cpu")}
    models.update({f"seed {i + 1}": aiayn.load_run(run, device="cpu") for i, run in enumerate(args.runs[1:], start=1)})
    ensemble = aiayn.load_run(list(args.runs), device="cpu") if len(args.runs) > 1 else None
    plans = [(name, model, settings, Decoding()) for name, model in models.items()]
    if ensemble is not None:
        plans.append(("ensemble", ensemble, settings, Decoding()))
    plans += [
        ("mbr-beam", first, wide, Decoding(n_best=args.k, mbr=chrf)),
        ("mbr-samples", first, settings, Decoding(Sampled(Sampling()), n_best=args.k, seed=1, mbr=chrf)),
    ]
    if ensemble is not None:
        plans.append(("mbr-ensemble", ensemble, wide, Decoding(n_best=args.k, mbr=chrf)))

    print(f"{data}: {len(sources)} sentences; {', '.join(str(r) for r in args.runs)}; {args.threads} thread(s)")
    print(f"{'':14} {'BLEU':>6} {'chrF':>6} {'s/1000 sent':>12} {'x beam':>7}")
    rows, base = [], None
    for name, model, decode, decoding in plans:
        start = time.perf_counter()
        _, _, texts, _ = model.decode_lines(sources, decode, decoding)
        wall = (time.perf_counter() - start) * 1000 / len(sources)
        base = base or wall
        scores = score([group[0] for group in texts], refs, scoring)
        rows.append(
            {
                "row": name,
                "bleu": scores["bleu"],
                "chrf": scores["chrf"],
                "s_per_1000": round(wall, 1),
                "signature": scores["signature"],
            }
        )
        print(f"{name:14} {scores['bleu']:6.2f} {scores['chrf']:6.2f} {wall:12.1f} {wall / base:7.2f}", flush=True)
    print(f"BLEU signature: {rows[0]['signature']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
