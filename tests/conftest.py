"""Shared test set-up: the `gpu` marker skips tests when no CUDA device is present."""

from __future__ import annotations

import importlib.util

import pytest


def _has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def refused(capsys: pytest.CaptureFixture[str]):
    """`refused(argv, needle)`: the CLI exits 1 with one `error:` line containing `needle`."""
    from roofline.cli import main

    def check(argv: list[str], needle: str) -> str:
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 1, err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert needle in err and "Traceback" not in err
        return err

    return check


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit status, stdout, stderr)."""
    from roofline.cli import main

    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def same_json(a: object, b: object, rel: float = 1e-9) -> bool:
    """Two JSON documents equal, floats to `rel`: a restructuring may reorder arithmetic,
    which moves the last bits of a float, but must not change a number."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        return abs(a - b) <= rel * max(abs(a), abs(b)) or a == b
    return a == b
