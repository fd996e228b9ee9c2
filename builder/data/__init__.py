"""The data pipeline: plain Python over paths and ints (spec.py wires it to the experiment's data section).

    corpus.py      read_parallel, line_blocks,           line-aligned UTF-8 files (whole or streamed),
                   filter_by_length                      user errors
    demo.py        generate_demo, write_demo             the built-in generated EN-DE corpus
    tokenizer.py   Tokenizer, tokenizer_from_json        any kind: <pad>=0 <s>=1 </s>=2 <unk>=3, one JSON file each
    bpe.py         FastTokenizer, train_tokenizer        a Hugging Face `tokenizers` one (aiayn's BPE)
    spm.py         SentencePieceTokenizer                a SentencePiece model over a vocabulary (opus-mt's too)
    make_tokenizers.py  make_tokenizers                  data.tokenizer -> a run's (source, target) tokenizers
    cache.py       encode_cached                         token ids on disk (memory-mapped), keyed by content
    ragged.py      RaggedIds                             flat ids + offsets
    sampler.py     TokenBatchSampler                     token-budget batches, ranks, resume
    dataset.py     TranslationDataset, Example
    collate.py     TranslationCollator, Batch            src, tgt_in = bos+y, tgt_out = y+eos, their non-pad rows
    reading.py     Reading                               what a graph's model reads: datasets, collators, budgets
    datamodule.py  TranslationDataModule                 all of it for Lightning
    loaders.py     eval_loader                           every pair once, in length order
    spec.py        split_texts, make_datamodule          the experiment's data section -> files, texts, DataModule
    prepare/       `aiayn data`                          the real corpora, written as line-aligned files

Nothing is imported here, so `import aiayn.builder.data.corpus` does not pay for Lightning.
"""
