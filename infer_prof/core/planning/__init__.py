"""What a run will load and how: the memory planner, precisions and engine capabilities, weights,
run-time estimate, multi-node placement and the comparison matrix's cells. Pure."""
