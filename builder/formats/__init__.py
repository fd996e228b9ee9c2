"""The field's formats, in and out, side by side: what reads a released model's folder into an aiayn
model (from_marian.py with marian_config.py, marian_vocab.py and marian_generation.py: an opus-mt
folder; from_causal_lm.py: a GPT-2 or Llama folder) and what writes an aiayn model as one
(to_marian.py, to_ctranslate2.py, to_causal_lm.py), with what each format cannot hold (limits.py).

Below decoding: `aiayn.load_run` (builder/decode/checkpoint.py) reads a folder through here, and
`aiayn export` (builder/export/) writes one. Nothing here decodes or trains; Hugging Face's
transformers is imported only where a folder is read or written."""
