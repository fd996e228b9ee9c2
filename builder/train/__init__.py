"""Training: the Lightning task, the Trainer built from the experiment, the validation callback,
the learning-rate schedule and `fit`, the run from config to results.json."""
