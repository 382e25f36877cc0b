"""Specs: the model, the hardware, the engine, dtypes and precision, the operator vocabulary and
the walk over the model, the catalog that loads them. Imports the ground (errors, frozen,
units, files) only.
"""
