"""Schedules: prompts run later, once or on a recurrence, each slot exactly once.

`timing` says when a schedule's slots fall (pure: no clock, no I/O); the store's `ScheduleLedger`
claims each slot under a unique key, so one process, and only one, runs it.
"""
