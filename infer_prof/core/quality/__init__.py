"""The quality check's arithmetic: task files and their match rules, perplexity and KL
divergence from log-probabilities, and the intervals of an accuracy and of a difference."""
