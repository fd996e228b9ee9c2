"""Text in, text out: beam search, the one translate path (validation, results.json, `translate`
and `evaluate` all go through translate_texts), metrics, and checkpoints for inference."""
