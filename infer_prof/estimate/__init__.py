"""``infer-prof estimate``'s workflow: for each GPU on the market, the configurations the planner
says fit, their predicted frontiers (:mod:`infer_prof.core.estimate`), priced and ranked at a
target interactivity."""
