"""The measuring half: results schema, device detection, calibration and validation.

Everything here is pure Python/numpy except `device.detect` and `device.detect_cuda`, which
import torch lazily; the timed kernels themselves are `roofline.kernels`.
"""
