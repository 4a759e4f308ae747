"""RL programs that use the accelerators (through sw.driver)."""
