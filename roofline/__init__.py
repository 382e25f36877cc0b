"""roofline: how fast can this LLM run on that hardware, why, and is my system near it?

The public API, used by the CLI, notebooks and other tools alike::

    from roofline import Stack, load_model, load_hardware, estimate, decode_step_s
    m, hw = load_model("llama-2-13b"), load_hardware("h100-sxm")
    stack = Stack.resolve(m, hw, ceiling="datasheet")  # resolved once, passed whole
    e = estimate(m, stack, batches=[1, 64], prompt=1024, gen=256)
    grid = decode_step_s(m, hw, B[:, None], S[None, :])  # a whole batch x context grid

One step's operators: `from roofline.spec.forward import operators`.
"""

from pathlib import Path

from .calc.cost import decode_step_s, prefill_s, step_cost
from .calc.memory import batch_fit, kv_cache_bytes, max_batch, weights_bytes
from .calc.phases import Estimate, estimate
from .calc.stack import Stack
from .errors import RooflineError
from .spec.catalog import hardware_catalog, load_hardware, load_model, model_catalog
from .spec.hardware import HardwareSpec
from .spec.model import ModelSpec
from .spec.operators import Step
from .spec.precision import Precision

__all__ = [
    "Estimate",
    "HardwareSpec",
    "ModelSpec",
    "Precision",
    "RooflineError",
    "Stack",
    "Step",
    "batch_fit",
    "decode_step_s",
    "estimate",
    "hardware_catalog",
    "kv_cache_bytes",
    "load_hardware",
    "load_model",
    "max_batch",
    "model_catalog",
    "prefill_s",
    "step_cost",
    "weights_bytes",
]
__version__ = "0.1.0"

# A wheel installs kernels/ and the spec folders as subpackages (pyproject.toml `package-dir`);
# a source checkout keeps them beside this package, so look there too.
_checkout = Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and (_checkout / "kernels" / "__init__.py").is_file():
    __path__.append(str(_checkout))
