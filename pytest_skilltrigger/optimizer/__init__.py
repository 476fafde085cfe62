"""Improvement rounds: split, propose, measure, confirm, and accept a better description."""
