"""Reports built from typed results: JSON, HTML, Markdown, terminal lines, the baseline
comparison, and the formatters they share. Results become dicts only here."""
