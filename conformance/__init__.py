"""nerve's MCP client against the official MCP conformance suite (`make conformance`).

`conformance.client` is the client command the suite runs for each scenario: nerve's own host,
argument checks and form answers, pointed at the scenario's test server. `conformance.run` runs
every scenario nerve supports through the suite and prints one line per scenario.
"""
