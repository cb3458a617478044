"""The turn loop: rounds of model and tool calls, their context, guards, deadline, gate and failures."""
