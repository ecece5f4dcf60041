"""What a run leaves behind: the result schema, its files, the run history, the regression gate."""
