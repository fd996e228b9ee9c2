"""An opus-mt folder made here as Helsinki-NLP's are laid out, with transformers' own classes and no
download: two SentencePiece models trained on the demo corpus (source.spm on English, target.spm on
German, SentencePiece's default ids), one vocab.json over both (</s> 0, <unk> 1, the pieces, <pad>
last), `MarianTokenizer(...).save_pretrained`, a random MarianMTModel with transformers' defaults, and a
published opus-mt generation config (its max_length given: 512 as published)."""

import io
import json
from pathlib import Path

import torch

from aiayn.builder.data.demo import generate_demo

SETTINGS = dict(
    d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=32,
    decoder_ffn_dim=24, activation_function="swish", scale_embedding=True, max_position_embeddings=128,
)  # fmt: skip  # transformers' defaults for the rest: forced_eos_token_id 0, </s>


def published_generation(V: int, *, max_length: int = 512) -> dict:
    """The fields and values of a published opus-mt generation_config.json (Helsinki-NLP/opus-mt-en-de's),
    with this folder's ids (</s> 0, <pad> V - 1, the decoder's start)."""
    return {
        "bad_words_ids": [[V - 1]], "bos_token_id": 0, "decoder_start_token_id": V - 1, "eos_token_id": 0,
        "forced_eos_token_id": 0, "max_length": max_length, "num_beams": 4, "pad_token_id": V - 1,
        "renormalize_logits": True, "transformers_version": "4.32.0.dev0",
    }  # fmt: skip


def spm_model(lines: list[str], vocab_size: int) -> bytes:
    import sentencepiece

    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=out, vocab_size=vocab_size, character_coverage=1.0, hard_vocab_limit=False,
        minloglevel=2, num_threads=1,
    )  # fmt: skip
    return out.getvalue()


def opus_mt_folder(folder: Path, *, seed: int = 0, max_length: int = 512) -> Path:
    import sentencepiece
    import transformers

    en, de = generate_demo(600, 1, 1, 3)["train"]
    folder.mkdir(parents=True, exist_ok=True)
    pieces: dict[str, int] = {"</s>": 0, "<unk>": 1}
    for name, lines in (("source.spm", en), ("target.spm", de)):
        model = spm_model(lines, 150)
        (folder / name).write_bytes(model)
        sp = sentencepiece.SentencePieceProcessor(model_proto=model)
        for i in range(sp.get_piece_size()):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                pieces.setdefault(sp.id_to_piece(i), len(pieces))
    pieces["<pad>"] = len(pieces)  # the last id, as in opus-mt
    (folder / "vocab.json").write_text(json.dumps(pieces, ensure_ascii=False), encoding="utf-8")
    files = {k: str(folder / f) for k, f in (("source_spm", "source.spm"), ("target_spm", "target.spm"), ("vocab", "vocab.json"))}
    transformers.MarianTokenizer(**files, source_lang="en", target_lang="de").save_pretrained(folder)
    V = len(pieces)
    config = transformers.MarianConfig(vocab_size=V, decoder_vocab_size=V, pad_token_id=V - 1, eos_token_id=0, decoder_start_token_id=V - 1,
                                       **SETTINGS)  # fmt: skip
    random_marian(transformers.MarianMTModel(config), seed).save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps(published_generation(V, max_length=max_length), indent=2))
    return folder


def random_marian(hf, seed: int = 0):
    """`hf` with every weight random: LayerNorm gains around 1, everything else N(0, 0.5^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "embed_positions" not in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1 if name.endswith("layer_norm.weight") else 0))
        hf.final_logits_bias.copy_(torch.randn(hf.final_logits_bias.shape, generator=g))
    return hf.eval()
