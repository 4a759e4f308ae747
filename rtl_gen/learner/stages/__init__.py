"""The stages of the learner pipeline, one block per module, and what they share."""
