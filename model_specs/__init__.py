"""Bundled model architecture specs (YAML), one file per model; the file stem is the spec name."""
