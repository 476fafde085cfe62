"""Support code with no knowledge of skills or pytest: atomic writes, interrupts, redaction,
and the errors that carry bad input to the user as one line."""
