"""Who may run which tool, where: approval modes and scopes per place. Pure functions, no I/O."""
