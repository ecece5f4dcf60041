"""What traffic a run sends and what it must meet: workloads, suites, length distributions,
arrivals, multi-turn sessions and SLOs. Pure."""
