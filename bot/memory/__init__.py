"""What people asked nerve to remember: the built-in tools, whose memories a turn may see, and what
of them the model is sent."""
