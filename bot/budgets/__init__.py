"""Usage and budgets: what each model request cost, and the limits a turn is checked against."""
