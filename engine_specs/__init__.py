"""Bundled inference-engine profiles (YAML), one file per engine; the file stem is the name."""
