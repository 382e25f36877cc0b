"""PyTorch microbenchmarks timing exactly the shapes the calculator models.

Imported only by the measuring commands (`measure`, `check`, `collectives`): torch is not
needed anywhere else. Every kernel reports the FLOPs and bytes of the calculator's operator
for its shape (`roofline.measure.kernel_ops`).
"""
