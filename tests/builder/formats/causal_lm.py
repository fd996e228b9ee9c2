"""Random Hugging Face GPT-2 and Llama folders made with transformers' own classes (nothing is
fetched): a BPE tokenizer trained here on the demo's English with Llama's order of special tokens
(<unk> 0, <s> 1, </s> 2, <pad> 3, not aiayn's), and a vocabulary padded past the tokenizer's by
two rows, as released models pad theirs. Two have the special tokens of released models: GPT-2
small's (a byte-level BPE whose one special, <|endoftext|>, last, is bos and eos; no pad, no
unknown token) and Llama's (<unk> 0, <s> 1, </s> 2, no pad)."""

from pathlib import Path

import torch

from aiayn.builder.data.demo import generate_demo

SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]  # ids 0-3 in the folder: aiayn reads them as <pad> 0, <s> 1, </s> 2, <unk> 3
CASES = {  # name: (model_type, tie_word_embeddings, num_key_value_heads)
    "gpt2-tied": ("gpt2", True, None),
    "gpt2-untied": ("gpt2", False, None),
    "llama-mha-tied": ("llama", True, None),
    "llama-gqa-untied": ("llama", False, 2),
    "gpt2-released": ("gpt2", True, None),
    "llama-released": ("llama", False, 2),
}
RELEASED = {"gpt2-released", "llama-released"}  # special tokens as the released models have them


def english(n: int = 300) -> list[str]:
    return [en for en, _ in zip(*generate_demo(n, 5, 5, 1234)["train"])][:n]


def hf_tokenizer(case: str = ""):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if case == "gpt2-released":  # byte-level BPE, <|endoftext|> added last
        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        hf.train_from_iterator(english(), trainer)
        hf.add_special_tokens(["<|endoftext|>"])
        return PreTrainedTokenizerFast(tokenizer_object=hf, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    hf = Tokenizer(models.BPE(unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    specials = SPECIALS[:3] if case == "llama-released" else SPECIALS
    hf.train_from_iterator(english(), trainers.BpeTrainer(vocab_size=120, special_tokens=specials, show_progress=False))
    pad = {} if case == "llama-released" else {"pad_token": "<pad>"}
    return PreTrainedTokenizerFast(tokenizer_object=hf, unk_token="<unk>", bos_token="<s>", eos_token="</s>", **pad)


def hf_folder(folder: Path, case: str, *, seed: int = 0, **config_changes) -> Path:
    """`folder` holding a random model of `case` (CASES) and the tokenizer; `config_changes` set config fields."""
    import transformers

    kind, tied, kv_heads = CASES[case]
    tokenizer = hf_tokenizer(case)
    ids = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "vocab_size": len(tokenizer) + 2, "tie_word_embeddings": tied}
    if case == "gpt2-released":
        end = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        ids.update(bos_token_id=end, eos_token_id=end, pad_token_id=None, vocab_size=len(tokenizer))
    if case == "llama-released":
        ids["pad_token_id"] = None
    if kind == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, n_inner=48, **ids)
        config.update(config_changes)
        model_class = transformers.GPT2LMHeadModel
    else:
        config = transformers.LlamaConfig(hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=kv_heads or 4, max_position_embeddings=128, **ids)  # fmt: skip
        config.update(config_changes)
        model_class = transformers.LlamaForCausalLM
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():  # weights larger than the initialiser's 0.02, so that the logits are far from uniform
        for p in model.parameters():
            p.mul_(8.0) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def hf_greedy(folder: Path, prompts: list[str], max_new_tokens: int) -> list[str]:
    """transformers' greedy continuation of each prompt (<s> before it, as aiayn generates; <pad>
    never drawn, as aiayn's generation never draws it), decoded with the folder's own tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    texts = []
    for prompt in prompts:
        ids = [model.config.bos_token_id, *tokenizer(prompt, add_special_tokens=False)["input_ids"]]
        pad = model.config.pad_token_id
        out = model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False, min_new_tokens=0,
                             eos_token_id=model.config.eos_token_id, pad_token_id=model.config.eos_token_id if pad is None else pad,
                             suppress_tokens=None if pad is None else [pad])  # fmt: skip
        texts.append(tokenizer.decode(out[0, 1:], skip_special_tokens=True))
    return texts
