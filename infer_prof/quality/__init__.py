"""The quality check on an OpenAI-compatible endpoint: task accuracy and prompt log-likelihood
through the completions API (check.py, over completions_api.py), the check's inputs (spec.py)
and the comparison with a reference run (reference.py)."""
