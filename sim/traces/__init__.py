"""Real preemption traces (placeholder init, filled below)."""
