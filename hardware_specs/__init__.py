"""Bundled hardware specs (YAML), one file per device; the file stem is the spec name."""
