"""The measuring half: results schema, device detection, calibration and validation.

Everything here is pure Python/numpy except `device.detect` and `run`, which import torch
lazily (only `roofline measure` and `roofline check` reach them).
"""
