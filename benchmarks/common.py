"""What the benchmarks share: aiayn's model at given sizes, built the way `aiayn train` builds it."""

import statistics
import time
from collections.abc import Callable
from pathlib import Path

from aiayn import load_experiment
from aiayn.blocks import EncoderDecoder
from aiayn.builder.model.build import build_model
from aiayn.schemas.experiment import ExperimentSpec

ROOT = Path(__file__).resolve().parent.parent
PAD, BOS, EOS = 0, 1, 2


def experiment(
    *, d_model: int, heads: int, layers: int, d_ff: int, vocab: int, overrides: tuple[str, ...] = ()
) -> ExperimentSpec:
    """The paper's base experiment resized: d_k = d_v = d_model / heads, shared embeddings."""
    d_k = d_model // heads
    dims = [f"dims.d_model={d_model}", f"dims.h={heads}", f"dims.d_k={d_k}", f"dims.d_v={d_k}",
            f"dims.N={layers}", f"dims.d_ff={d_ff}", f"dims.vocab_size={vocab}"]  # fmt: skip
    return load_experiment(ROOT / "experiments" / "base.yaml", [*dims, *overrides])


def save_slim_checkpoint(model: EncoderDecoder, spec_json: dict, path: Path) -> None:
    """`model` as a slim checkpoint `aiayn` reads anywhere it reads a model (translate, export,
    serve), with a word-level tokenizer that names the token ids t4, t5, ... (no training data)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers

    from aiayn.builder.data.tokenizer import SPECIALS
    from aiayn.builder.decode.checkpoint import save_checkpoint

    vocab = {**{t: i for i, t in enumerate(SPECIALS)}, **{f"t{i}": i for i in range(len(SPECIALS), model.generator.vocab_size)}}
    tokenizer = HFTokenizer(models.WordLevel(vocab, unk_token=SPECIALS[3]))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # a word a token (without it a line is one <unk>)
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    ckpt = {"state_dict": state, "hyper_parameters": {"experiment": spec_json},
            "aiayn": {"format": 1, "tokenizers": {"tokenizer.json": tokenizer.to_str()}}}  # fmt: skip
    save_checkpoint(ckpt, path)


def aiayn_model(**sizes: int) -> EncoderDecoder:
    return build_model(experiment(**sizes).model)


def interleaved_medians(
    calls: dict[str, Callable[[], object]], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Each call's median time (seconds of `clock`: wall time, or time.process_time for this process's
    CPU) over `rounds` rounds that run every call once in turn, after one warm-up call each: a
    machine's drift reaches every call alike."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = clock()
            call()
            times[name].append(clock() - start)
    return {name: statistics.median(measured) for name, measured in times.items()}
