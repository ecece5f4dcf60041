"""One profiling run: configuration, load points, engine start, the runner by phase, calibration."""
