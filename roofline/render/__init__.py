"""Rendering: plots. Imports everything except cli/; only render/ and cli/ import it."""
