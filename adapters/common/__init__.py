"""What every chat surface shares: the tasks it owns, where its messages are, what an ask says, and
how an ask's message is settled. The platforms keep a renderer and their own rules."""
