"""Decoder-only models against transformers at the same sizes, in one process: a training step
(forward, backward, Adam) of aiayn's DecoderOnly with GPT-2's and with Llama's settings against
GPT2LMHeadModel and LlamaForCausalLM on the same batch, and cached greedy generation in tokens/s
against `generate()`. Prints the medians of interleaved rounds and aiayn's speed-up (goal: a
training step at least 1.2x as fast on a CPU, generation at least as fast).

    python benchmarks/decoder_only.py [--d-model 256 --layers 4 --batch 16 --length 128 --rounds 5]
                                      [--threads N] [--compile]

With --compile the training steps run a second time with both models under torch.compile
(default mode, inductor's C++ kernels on a CPU): aiayn compiled against transformers compiled,
and against transformers as it runs by default (eager).
"""

import argparse

import torch
from common import interleaved_medians

from aiayn import load_registry
from aiayn.builder.decode.generate import generate_ids
from aiayn.builder.decode.strategy import Greedy
from aiayn.builder.model.build import build_model
from aiayn.builder.model.loss import smoothed_nll_chunked
from aiayn.schemas.experiment import ExperimentSpec


def experiments(d: int, layers: int, heads: int, vocab: int, positions: int) -> dict[str, dict]:
    """aiayn's experiments with GPT-2's and Llama's settings (tests/builder/model/test_decoder_only.py's)."""
    attention = {"type": "causal_self_attention", "h": heads, "d_k": d // heads, "d_v": d // heads}
    gpt2 = {
        "d_model": d, "dropout": 0.0, "embedding": {"vocab_size": vocab, "share": "target_output", "scale": False},
        "positional": {"type": "learned", "max_len": positions},
        "decoder": {"num_layers": layers, "add_norm": {"placement": "pre", "dropout": 0.0, "norm": {"type": "layer_norm", "eps": 1e-5}},
                    "layer": [attention, {"type": "feed_forward", "d_ff": 4 * d, "activation": "gelu_tanh"}]},
    }  # fmt: skip
    llama = {
        "d_model": d, "dropout": 0.0, "positional": "none", "embedding": {"vocab_size": vocab, "share": "none", "scale": False},
        "decoder": {"num_layers": layers, "add_norm": {"placement": "pre", "dropout": 0.0, "norm": {"type": "rms_norm", "eps": 1e-6}},
                    "layer": [{**attention, "kv_heads": 2, "bias": False, "rotary": {"base": 10000.0}},
                              {"type": "gated_feed_forward", "d_ff": 3 * d, "activation": "silu", "bias": False}]},
    }  # fmt: skip
    data = {"type": "demo", "side": "en", "max_len": positions - 1}
    return {name: {"name": name, "model": model, "data": data} for name, model in (("gpt2", gpt2), ("llama", llama))}


def references(d: int, layers: int, heads: int, vocab: int, positions: int) -> dict:
    import transformers

    gpt2 = transformers.GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=d, n_layer=layers, n_head=heads,
                                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    llama = transformers.LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=3 * d, num_hidden_layers=layers,
                                     num_attention_heads=heads, num_key_value_heads=2, max_position_embeddings=positions,
                                     tie_word_embeddings=False)  # fmt: skip
    return {"gpt2": transformers.GPT2LMHeadModel(gpt2), "llama": transformers.LlamaForCausalLM(llama)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    p.add_argument("--compile", action="store_true", help="also time both training steps under torch.compile")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    sizes = (a.d_model, a.layers, a.heads, a.vocab, 2 * a.length)
    context = load_registry().context
    ours = {k: build_model(ExperimentSpec.model_validate(e, context=context)).train() for k, e in experiments(*sizes).items()}
    theirs = {k: m.train() for k, m in references(*sizes).items()}
    x = torch.randint(3, a.vocab, (a.batch, a.length + 1))
    inputs, targets = x[:, :-1], x[:, 1:]
    adams = {
        (side, k): torch.optim.Adam(m.parameters(), lr=1e-4)
        for side, models in (("aiayn", ours), ("hf", theirs))
        for k, m in models.items()
    }

    def ours_step(k: str, model=None):
        def step() -> None:
            logits = (ours[k] if model is None else model)(inputs[:, :0], inputs)
            loss, _, n = smoothed_nll_chunked(logits, targets, eps=0.0, pad_id=0)
            (loss / n).backward()
            adams[("aiayn", k)].step()
            adams[("aiayn", k)].zero_grad(set_to_none=True)

        return step

    def hf_step(k: str, model=None):
        def step() -> None:
            # the labels are shifted inside: the same predictions
            (theirs[k] if model is None else model)(input_ids=inputs, labels=x[:, :-1]).loss.backward()
            adams[("hf", k)].step()
            adams[("hf", k)].zero_grad(set_to_none=True)

        return step

    calls = {
        f"{side} {k} train step": (ours_step if side == "aiayn" else hf_step)(k)
        for k in ("gpt2", "llama")
        for side in ("aiayn", "hf")
    }
    for m in (*ours.values(), *theirs.values()):
        m.eval()
    prompt = torch.randint(3, a.vocab, (1, 16))

    def ours_generate(k: str):
        return lambda: generate_ids(ours[k], [prompt[0, 1:].tolist()], max_new_tokens=a.new_tokens, eos_id=-1, strategy=Greedy())

    def hf_generate(k: str):
        return lambda: theirs[k].generate(input_ids=prompt, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False,
                                          eos_token_id=None, pad_token_id=0)  # fmt: skip

    calls.update(
        {
            f"{side} {k} generate": (ours_generate if side == "aiayn" else hf_generate)(k)
            for k in ("gpt2", "llama")
            for side in ("aiayn", "hf")
        }
    )
    for m in (*ours.values(), *theirs.values()):
        m.train()
    medians = interleaved_medians({n: c for n, c in calls.items() if "train" in n}, a.rounds)
    if a.compile:
        compiled = {f"{side} {k} compiled": (ours_step(k, torch.compile(ours[k])) if side == "aiayn" else
                                             hf_step(k, torch.compile(theirs[k])))
                    for k in ("gpt2", "llama") for side in ("aiayn", "hf")}  # fmt: skip
        for call in compiled.values():
            call()  # compiles: not timed
        medians.update(interleaved_medians(compiled, a.rounds))
    for m in (*ours.values(), *theirs.values()):
        m.eval()
    with torch.no_grad():
        medians.update(interleaved_medians({n: c for n, c in calls.items() if "generate" in n}, a.rounds))
    print(f"d_model {a.d_model}, {a.layers} layers, {a.heads} heads, vocab {a.vocab}; batch {a.batch} x {a.length}; "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    for k in ("gpt2", "llama"):
        mine, ref = medians[f"aiayn {k} train step"], medians[f"hf {k} train step"]
        print(f"{k:6s} train step  aiayn {mine * 1e3:8.1f} ms   transformers {ref * 1e3:8.1f} ms   speed-up {ref / mine:5.2f}x")
        mine, ref = medians[f"aiayn {k} generate"], medians[f"hf {k} generate"]
        print(
            f"{k:6s} generate    aiayn {a.new_tokens / mine:8.1f} tok/s transformers {a.new_tokens / ref:8.1f} tok/s speed-up {ref / mine:5.2f}x"
        )
        if a.compile:
            mine, ref, eager = medians[f"aiayn {k} compiled"], medians[f"hf {k} compiled"], medians[f"hf {k} train step"]
            print(f"{k:6s} compiled    aiayn {mine * 1e3:8.1f} ms   transformers {ref * 1e3:8.1f} ms   speed-up {ref / mine:5.2f}x"
                  f"   (against transformers eager {eager / mine:5.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
