"""Text in, text out: the search (loop.py, search.py, sampling.py, strategy.py, mbr.py, ensemble.py,
forced.py), the one translate path (validation, results.json, `translate` and `evaluate` all go
through translate_texts), the inference objects (translator.py, language_model.py), metrics, and
loading for inference (checkpoint.py, load.py; a released folder through builder/formats/)."""
