"""Text for people and models: scrubbing, truncation and nesting limits."""
