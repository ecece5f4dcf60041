"""What the measured numbers mean side by side: comparison tables, regression and significance
tests, change points, sweeps and knees, and the cost-interactivity frontier. Pure."""
