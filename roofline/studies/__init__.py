"""Studies built on the calculator: speculative decoding, diffusion, economics, sweeps. Import
calc/ and below.
"""
