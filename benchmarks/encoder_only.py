"""The encoder-only graph against transformers at BERT-base's sizes, in one process: a masked-LM
training step (forward, backward, Adam) of aiayn's EncoderOnly with BERT's settings against
BertForMaskedLM on the same batch and the same weights (copied: the two losses are printed, and
agree), 15% of the tokens predicted. aiayn projects the predicted positions alone to the
vocabulary (the loss's rows); BertForMaskedLM projects every position, as it runs by default.
Prints the medians of interleaved rounds and aiayn's speed-up (goal: at least as fast on a CPU).

    python benchmarks/encoder_only.py [--d-model 768 --layers 12 --heads 12 --d-ff 3072 --vocab 30522]
                                      [--batch 8 --length 128 --rounds 3 --threads 1]
"""

import argparse

import torch
from common import interleaved_medians

from aiayn import load_registry
from aiayn.builder.formats.from_masked_lm import copy_bert
from aiayn.builder.model.build import build_model
from aiayn.builder.model.loss import smoothed_nll_chunked
from aiayn.schemas.experiment import ExperimentSpec


def experiment(d: int, layers: int, heads: int, d_ff: int, vocab: int, positions: int) -> dict:
    """BERT's settings (tests/builder/model/test_encoder_only.py's) at these sizes."""
    norm = {"type": "layer_norm", "eps": 1e-12}
    model = {
        "graph": {"type": "encoder_only"}, "d_model": d, "dropout": 0.0,
        "embedding": {"vocab_size": vocab, "share": "target_output", "scale": False, "output_bias": True, "segments": 2,
                      "norm": norm},
        "positional": {"type": "learned", "max_len": positions},
        "encoder": {"num_layers": layers, "add_norm": {"placement": "post", "dropout": 0.0, "norm": norm},
                    "layer": [{"type": "self_attention", "h": heads, "d_k": d // heads, "d_v": d // heads},
                              {"type": "feed_forward", "d_ff": d_ff, "activation": "gelu"}]},
    }  # fmt: skip
    return {"name": "bert", "model": model, "data": {"type": "demo", "side": "en", "max_len": positions - 2}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--d-ff", type=int, default=3072)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: PyTorch's default)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    import transformers

    torch.manual_seed(0)
    spec = ExperimentSpec.model_validate(
        experiment(a.d_model, a.layers, a.heads, a.d_ff, a.vocab, 512), context=load_registry().context
    )
    ours = build_model(spec).train()
    config = transformers.BertConfig(vocab_size=a.vocab, hidden_size=a.d_model, num_hidden_layers=a.layers,
                                     num_attention_heads=a.heads, intermediate_size=a.d_ff, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, pad_token_id=0)  # fmt: skip
    theirs = transformers.BertForMaskedLM(config).train()
    copy_bert(ours, theirs)
    x = torch.randint(5, a.vocab, (a.batch, a.length))
    predicted = torch.rand(x.shape, generator=torch.Generator().manual_seed(1)) < 0.15
    src = x.masked_fill(predicted, 4)
    rows = predicted.flatten().nonzero().flatten()
    labels = x.masked_fill(~predicted, -100)
    adams = {side: torch.optim.Adam(m.parameters(), lr=1e-5) for side, m in (("aiayn", ours), ("hf", theirs))}
    losses: dict[str, list[float]] = {"aiayn": [], "hf": []}

    def ours_step() -> None:
        logits = ours(src, None, rows)  # (n, V): the predicted positions alone
        loss, _, n = smoothed_nll_chunked(logits, x.flatten()[rows], eps=0.0, pad_id=0)
        (loss / n).backward()
        losses["aiayn"].append(float((loss / n).detach()))
        adams["aiayn"].step()
        adams["aiayn"].zero_grad(set_to_none=True)

    def hf_step() -> None:
        loss = theirs(input_ids=src, attention_mask=torch.ones_like(src), labels=labels).loss
        loss.backward()
        losses["hf"].append(float(loss.detach()))
        adams["hf"].step()
        adams["hf"].zero_grad(set_to_none=True)

    n_ours, n_hf = sum(q.numel() for q in ours.parameters()), theirs.num_parameters()
    print(f"parameters: aiayn {n_ours:,}, BertForMaskedLM {n_hf:,}")
    times = interleaved_medians({"aiayn": ours_step, "hf": hf_step}, a.rounds)
    print(f"first step's loss: aiayn {losses['aiayn'][0]:.6f}, BertForMaskedLM {losses['hf'][0]:.6f}")
    print(f"d_model {a.d_model}, {a.layers} layers, batch {a.batch} x {a.length}, {int(predicted.sum())} tokens predicted, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}, transformers {transformers.__version__}")  # fmt: skip
    print("| training step (forward, backward, Adam) | median s |\n|---|---:|")
    print(f"| aiayn EncoderOnly | {times['aiayn']:.3f} |\n| transformers BertForMaskedLM | {times['hf']:.3f} |")
    print(f"aiayn's speed-up: {times['hf'] / times['aiayn']:.2f}x")


if __name__ == "__main__":
    main()
