"""Re-run every row's first sight at the commit it names, and say which no longer reproduce.

    python benchmarks/verify_first_sight.py [CSV]

For each commit named in `first_sight_at` (its first word), a worktree of that commit predicts
the rows of CSV (default: roofline/data/published.csv, as it is now) that name it, with that
commit's code; a row's stored `first_sight` must equal that prediction (to 6e-5, the stored
four decimals). A row whose first sight came from another commit's code, or a model change made
before it was recorded, shows up here.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import sys
from roofline.serve.published import load_rows, predict
commit, path = sys.argv[1], sys.argv[2]
rows = [r for r in load_rows(path) if r.first_sight_at.split()[:1] == [commit]]
rows = [r for r in rows if r.first_sight is not None]
bad = []
for r in rows:
    p = predict(r)
    if p.error is None or abs(p.error - r.first_sight) > 6e-5:
        bad.append((r.id, r.first_sight, p.error))
print(f"{commit}: {len(rows)} rows, {len(bad)} not reproduced {bad[:8]}")
sys.exit(1 if bad else 0)
"""


def main() -> int:
    csv_path = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "roofline/data/published.csv")
    from roofline.serve.published import load_rows

    commits = sorted({r.first_sight_at.split()[0] for r in load_rows(csv_path) if r.first_sight_at})
    failed = 0
    for commit in commits:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(
                ["git", "worktree", "add", "-f", "-q", "--detach", str(tree), commit],
                cwd=REPO,
                check=True,
            )
            try:
                run = subprocess.run(
                    [sys.executable, "-c", CHILD, commit, str(csv_path.resolve())],
                    cwd=tree,  # the commit's own package, not the installed one
                    env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                    capture_output=True,
                    text=True,
                )
                print(run.stdout.strip() or run.stderr.strip().splitlines()[-1])
                failed += run.returncode != 0
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
