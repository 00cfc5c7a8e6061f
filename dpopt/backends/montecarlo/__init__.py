"""Simulation-based answers (SampleSizeStudy)."""
