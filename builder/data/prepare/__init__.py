"""`aiayn data`: the real corpora, written as the line-aligned files the experiments read.

corpora.py   Corpus, Split, Part            wmt14-en-de and multi30k: files, Hub names, sacreBLEU names
sources.py   locate, read_pairs             downloaded files: plain, .gz, .tgz members, SGM
hub.py       load_splits                    the Hugging Face Hub through `datasets` (optional)
clean.py     Cleaner, CleanRules            Moses' clean-corpus-n on training pairs
pipeline.py  prepare                        all of it, streamed, with a report, into builder/run/atomic.staged_folder
"""
