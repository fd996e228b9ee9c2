"""Beam-search decoding speed on CPU: our cached search, our no-cache reference, Hugging Face and CTranslate2.

    python benchmarks/decode.py [--d-model 512 --heads 8 --layers 6 --d-ff 2048 --vocab 8000]
                                [--sentences 8 --src-len 20 --out-len 50 --beam 4 --repeats 3]

Five decoders, one model size, randomly initialised (nothing is downloaded):
  (a) builder.decode.search.beam_search with the KV cache (DecoderState),
  (b) the same search with use_cache=False (the whole prefix rerun at every step),
  (c) transformers' MarianMTModel.generate(num_beams=beam) with a MarianConfig of identical
      d_model / heads / layers / d_ff / vocabulary (post-norm, ReLU, sinusoids, shared embeddings),
  (d) CTranslate2's Translator.translate_batch(beam_size=beam) on model (a) exported by
      `aiayn export --to ctranslate2` (float32), and (e) the same exported with --quantization int8.
Every hypothesis is forced to exactly --out-len tokens so that all do the same work: EOS is made
unreachable (our logits get EOS = -inf through a hook on the output projection; HF gets
min_new_tokens = max_new_tokens and CTranslate2 min_decoding_length = max_decoding_length, which
mask EOS the same way), and the length limit ends the search (ours: src_len + max_len_b = out_len).
Needs `pip install -e .[bench]` for (c) and `pip install -e .[export]` for (d) and (e).

Prints a table of wall and CPU seconds (medians of --repeats interleaved runs after a warm-up), and
the ratios of CPU time, which a busy machine disturbs less than wall time (use --threads 1 there).
"""

import argparse
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from common import BOS, EOS, PAD, experiment, save_slim_checkpoint
from torch import nn

from aiayn.blocks import EncoderDecoder
from aiayn.builder.decode.search import beam_search
from aiayn.builder.export import export
from aiayn.builder.model.build import build_model


def hf_model(*, d_model: int, heads: int, layers: int, d_ff: int, vocab: int) -> nn.Module | None:
    try:
        from transformers import MarianConfig, MarianMTModel
    except ImportError:
        print("transformers is not installed (pip install -e '.[bench]'): MarianMTModel left out")
        return None

    config = MarianConfig(
        vocab_size=vocab,
        decoder_vocab_size=vocab,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=d_ff,
        decoder_ffn_dim=d_ff,
        activation_function="relu",
        max_position_embeddings=1024,
        scale_embedding=True,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    return MarianMTModel(config).eval()


def ct2_translators(ours: EncoderDecoder, spec_json: dict, threads: int) -> dict[str, object]:
    """{row name: ctranslate2.Translator} of `ours` exported as float32 and int8, through a slim
    checkpoint and `aiayn export` (the word-level tokenizer names the token ids t4, t5, ...); a
    Translator holds its model in memory, so the files go once it is loaded."""
    if importlib.util.find_spec("ctranslate2") is None:
        print("ctranslate2 is not installed (pip install -e '.[export]'): CTranslate2 left out")
        return {}
    import ctranslate2

    translators = {}
    with tempfile.TemporaryDirectory(prefix="aiayn-decode-bench-") as work:
        save_slim_checkpoint(ours, spec_json, Path(work) / "model.ckpt")
        for name, quantization in (("CTranslate2 Translator (float32)", None), ("CTranslate2 Translator (int8)", "int8")):
            out = Path(work) / str(quantization)
            export(Path(work) / "model.ckpt", "ctranslate2", out, quantization=quantization)
            translators[name] = ctranslate2.Translator(str(out), device="cpu", inter_threads=1, intra_threads=threads)
    return translators


def timed(decoders: dict[str, Callable[[], object]], repeats: int) -> dict[str, tuple[float, float]]:
    """{name: (median wall seconds, median CPU seconds of this process)}. One warm-up each, then
    the decoders take turns, so that a change in the machine's load hits all of them alike."""
    for fn in decoders.values():
        fn()  # allocator, kernel selection, lazily built tables
    wall: dict[str, list[float]] = {name: [] for name in decoders}
    cpu: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(repeats):
        for name, fn in decoders.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in decoders}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--sentences", type=int, default=8)
    p.add_argument("--src-len", type=int, default=20)
    p.add_argument("--out-len", type=int, default=50)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--skip-hf", action="store_true", help="without transformers installed")
    args = p.parse_args()
    if args.out_len < args.src_len:
        p.error(f"--out-len ({args.out_len}) must be >= --src-len ({args.src_len}): ours ends at src_len + max_len_b")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sizes = dict(d_model=args.d_model, heads=args.heads, layers=args.layers, d_ff=args.d_ff, vocab=args.vocab)
    src = torch.randint(3, args.vocab, (args.sentences, args.src_len))
    spec = experiment(**sizes)
    ours = build_model(spec.model).eval()
    translators = ct2_translators(ours, spec.model_dump(mode="json"), args.threads)

    def no_eos(module: nn.Module, inputs: tuple, logits: torch.Tensor) -> torch.Tensor:
        logits[..., EOS] = -float("inf")
        return logits

    ours.generator.register_forward_hook(no_eos)
    max_len_b = args.out_len - args.src_len

    def run_ours(use_cache: bool) -> Callable[[], object]:
        def go() -> list[list[int]]:
            hyps = beam_search(ours, src, bos_id=BOS, eos_id=EOS, beam=args.beam, max_len_b=max_len_b, use_cache=use_cache)
            assert all(len(h) == args.out_len for h in hyps), [len(h) for h in hyps]
            return hyps

        return go

    decoders = {"aiayn beam_search, KV cache": run_ours(True), "aiayn beam_search, no cache": run_ours(False)}
    hf = None if args.skip_hf else hf_model(**sizes)
    if hf is not None:
        mask = torch.ones_like(src)

        def run_hf() -> torch.Tensor:
            with torch.inference_mode():
                out = hf.generate(
                    input_ids=src,
                    attention_mask=mask,
                    num_beams=args.beam,
                    do_sample=False,
                    max_new_tokens=args.out_len,
                    min_new_tokens=args.out_len,
                    early_stopping=False,
                )
            assert out.size(1) == args.out_len + 1, out.shape  # decoder start + out_len
            return out

        decoders["transformers MarianMTModel.generate"] = run_hf
        n_ours = sum(p.numel() for p in ours.parameters())
        n_hf = sum(p.numel() for p in hf.parameters())
        print(f"parameters: aiayn {n_ours:,}, transformers {n_hf:,} (its sinusoid tables are parameters)")
    source_tokens = [[f"t{int(i)}" for i in row] for row in src]
    for name, translator in translators.items():

        def run_ct2(translator=translator) -> list:
            out = translator.translate_batch(
                source_tokens, beam_size=args.beam, max_decoding_length=args.out_len, min_decoding_length=args.out_len
            )
            assert all(len(r.hypotheses[0]) == args.out_len for r in out), [len(r.hypotheses[0]) for r in out]
            return out

        decoders[name] = run_ct2
    results = timed(decoders, args.repeats)

    print(
        f"d_model {args.d_model}, h {args.heads}, N {args.layers}, d_ff {args.d_ff}, V {args.vocab}; "
        f"{args.sentences} sentences of {args.src_len} tokens -> {args.out_len} tokens, beam {args.beam}; "
        f"CPU, {args.threads} threads, torch {torch.__version__}; median of {args.repeats}"
    )
    _, cached = results["aiayn beam_search, KV cache"]
    print("| decoder | wall s | CPU s | sentences per CPU s | CPU time / ours (cached) |")
    print("|---|---:|---:|---:|---:|")
    for name, (wall, cpu) in results.items():
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {args.sentences / cpu:.2f} | {cpu / cached:.2f} |")


if __name__ == "__main__":
    main()
