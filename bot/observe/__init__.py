"""Observability: metrics, tracing, log context and throttled log lines."""
