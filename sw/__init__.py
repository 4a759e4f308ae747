"""Host side: golden models, drivers and RL programs."""
