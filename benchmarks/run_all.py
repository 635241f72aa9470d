"""``make bench``: every benchmark script at its small (--quick) size, in one run."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    scripts = sorted(p for p in HERE.glob("bench_*.py"))
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} --quick ===", flush=True)
        if subprocess.call([sys.executable, str(script), "--quick"], cwd=HERE) != 0:
            failed.append(script.name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")
