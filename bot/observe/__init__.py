"""Observability: metrics, tracing, log context and throttled log lines.

`LogThrottle` is named here for the front ends, which reach the core through few doors; it loads
nothing but the standard library.
"""

from bot.observe.log_throttle import LogThrottle as LogThrottle
