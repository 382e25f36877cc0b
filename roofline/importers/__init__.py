"""Model importers: Hugging Face config.json (hf) and GGUF headers (gguf). Import calc/ and
below.
"""
