"""The declarations of the command-line options: how an option is declared once on a field
(:mod:`.options`), and the groups of ``infer-prof run`` (:mod:`.run_groups`)."""
