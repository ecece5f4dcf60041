"""Predicting a serving frontier before measuring it: the achieved shares of a GPU's peaks
(:mod:`.factors`), the time of one engine step (:mod:`.decode_step`), prefill
(:mod:`.prefill`), tensor parallelism's all-reduces (:mod:`.collectives`) and the closed-loop
steady state at each concurrency (:mod:`.frontier_model`). Pure arithmetic: no I/O."""
