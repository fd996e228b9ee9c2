"""Tokenizer training time on the Multi30k training set (29,000 pairs, both sides: 58,000 lines):
aiayn's BPE (Hugging Face `tokenizers`) against SentencePiece unigram and BPE (`sentencepiece`), a
joint vocabulary of 10,000, as `aiayn train` trains them (builder/data/make_tokenizers.py); then
the time to encode both sides with each, and the tokens per sentence they give.

    python benchmarks/tokenizer_training.py [--vocab 10000] [--repeat 3]

Reads $AIAYN_DATA/multi30k (default ../shared/data). Prints the best of --repeat wall times and
each one's ratio to BPE's, measured in this process one after the other.
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    from aiayn import load_registry
    from aiayn.builder.data.make_tokenizers import make_tokenizers
    from aiayn.schemas.tokenizer import BpeTokenizerSpec, SentencePieceTokenizerSpec

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    data = Path(os.environ.get("AIAYN_DATA", ROOT.parent / "shared" / "data")) / "multi30k"
    en = (data / "train.en").read_text(encoding="utf-8").splitlines()
    de = (data / "train.de").read_text(encoding="utf-8").splitlines()
    kinds = {
        "BPE (tokenizers)": BpeTokenizerSpec(),
        "SentencePiece unigram": SentencePieceTokenizerSpec(),
        "SentencePiece BPE": SentencePieceTokenizerSpec(model_type="bpe"),
    }
    print(f"Multi30k train: {len(en)} pairs; joint vocabulary of {args.vocab}; best of {args.repeat}; {os.cpu_count()} cores")
    print(f"{'tokenizer':<24}{'train s':>9}{'x BPE':>8}{'encode s':>10}{'ids':>7}{'tokens/sentence':>17}")
    base, registry = None, load_registry()
    for name, spec in kinds.items():
        seconds, made = best(lambda: make_tokenizers(spec, registry, vocab_size=args.vocab, shared_vocab=True, src=lambda: en, tgt=lambda: de),
                             args.repeat)  # fmt: skip
        tokenizer = made[0]  # type: ignore[index]
        encode_s, ids = best(lambda: tokenizer.encode_batch(en) + tokenizer.encode_batch(de), args.repeat)
        base = base or seconds
        per = sum(map(len, ids)) / len(ids)  # type: ignore[arg-type]
        print(f"{name:<24}{seconds:>9.2f}{seconds / base:>8.2f}{encode_s:>10.2f}{tokenizer.vocab_size:>7}{per:>17.1f}")


if __name__ == "__main__":
    main()
