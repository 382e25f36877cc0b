"""The calculator: a step's cost, footprint, placement, the resolved Stack, memory, parallel
terms, phases, intervals and power. Imports spec/ and the ground.
"""
