"""Models to export, and aiayn's, CTranslate2's and transformers' outputs on them, side by side."""

from pathlib import Path

import torch

from aiayn.builder.decode.checkpoint import ForInference, load_checkpoint, save_checkpoint
from aiayn.builder.decode.translate import translate_ids
from aiayn.schemas.decode import DecodeSpec
from tests.builder.decode.test_checkpoint import demo_tokenizer, save_task_checkpoint, small_experiment

LEARNED = {"type": "learned", "max_len": 128}  # a dotlist override cannot swap the positional type


def scrambled_run(root: Path, *overrides: str, positional: dict | None = None, seed: int = 0) -> Path:
    """runs/demo/version_0 of the small demo experiment whose every parameter is random (N(0, 0.5^2);
    LayerNorm gains around 1): biases and LayerNorms are not their zeros and ones, so a mis-mapped
    one shows."""
    run = root / "demo" / "version_0"
    demo_tokenizer().save(run / "tokenizer.json")
    experiment = small_experiment(*overrides)
    if positional is not None:
        experiment["model"]["positional"] = positional
    path = run / "checkpoints" / "last.ckpt"
    save_task_checkpoint(path, experiment, seed=seed)
    ckpt = load_checkpoint(path)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, value in ckpt["state_dict"].items():
            if value.is_floating_point():
                noise = torch.randn(value.shape, generator=g) * 0.5
                value.copy_(1 + noise / 5 if name.endswith("norm.weight") else noise)
    save_checkpoint(ckpt, path)
    return run


def aiayn_outputs(loaded: ForInference, sources: list[list[int]], *, beam: int, alpha: float, max_len_b: int) -> list[list[int]]:
    """aiayn's beam search (beam 1: greedy) with fairseq's |Y|^alpha, the form both runtimes use."""
    decode = DecodeSpec(beam=beam, alpha=alpha, length_penalty="fairseq", max_len_b=max_len_b)
    return translate_ids(loaded.model, sources, decode, bos_id=1, eos_id=2)


def ct2_outputs(translator, tokenizer, sources: list[list[int]], *, beam: int, alpha: float, max_len_b: int) -> list[list[int]]:
    """One sentence per call: aiayn's length limit (input + max_len_b, EOS included) is per sentence;
    min_decoding_length=0 lets an empty translation (EOS first) win, as in aiayn."""
    outputs = []
    for ids in sources:
        tokens = [tokenizer.hf.id_to_token(i) for i in ids]
        [result] = translator.translate_batch(
            [tokens], beam_size=beam, length_penalty=alpha, max_decoding_length=len(ids) + max_len_b, min_decoding_length=0
        )
        outputs.append([tokenizer.hf.token_to_id(t) for t in result.hypotheses[0]])
    return outputs


def hf_outputs(model, sources: list[list[int]], *, beam: int, alpha: float, max_len_b: int) -> list[list[int]]:
    """generate() per sentence; max_length counts the decoder start token, aiayn's limit counts EOS."""
    outputs = []
    for ids in sources:
        out = model.generate(
            input_ids=torch.tensor([ids]), num_beams=beam, length_penalty=alpha, do_sample=False,
            max_length=1 + len(ids) + max_len_b,
        )[0].tolist()  # fmt: skip
        hyp = out[1:]
        outputs.append(hyp[: hyp.index(2)] if 2 in hyp else hyp)
    return outputs
