"""Skills and eval sets: reading SKILL.md and eval files, rewriting a description, and the
catalog that turns folders into test targets."""
