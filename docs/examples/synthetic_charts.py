"""Validation and serving charts from synthetic inputs (until `roofline validate` and
`roofline serve` produce real ones). Run from the repository root:
`python docs/examples/synthetic_charts.py`."""

from pathlib import Path

import numpy as np

from roofline import plots

points = [plots.ValidationPoint("gemm 4096³", 0.139e-3, 0.171e-3, 0.25),
          plots.ValidationPoint("gemv 8192²", 45e-6, 52e-6, 0.25),
          plots.ValidationPoint("copy 1 GiB", 0.73e-3, 0.78e-3, 0.25),
          plots.ValidationPoint("attention decode", 0.21e-3, 0.31e-3, 0.25),
          plots.ValidationPoint("decode step 8B", 5.2e-3, 6.0e-3, 0.25)]
plots.save(plots.validation_chart(points), Path("docs/images/validate-synthetic.png"))

rng = np.random.default_rng(0)
latency = {"static batching": rng.lognormal(np.log(0.8), 0.5, 500),
           "continuous batching": rng.lognormal(np.log(0.25), 0.4, 500)}
sweeps = [plots.RateSweep("static batching", [1, 2, 4, 8, 16], [600, 1150, 2000, 2600, 2700]),
          plots.RateSweep("continuous batching", [1, 2, 4, 8, 16], [610, 1220, 2430, 4700, 6900])]
plots.save(plots.serve_chart(latency, sweeps, "TTFT"), Path("docs/images/serve-synthetic.png"))
