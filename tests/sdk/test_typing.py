"""The SDK is typed: its sources pass `mypy --strict` with the settings of its own pyproject.toml, so a
merchant's type checker can rely on its signatures (the package ships py.typed)."""

import subprocess
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[2] / "sdk" / "python"


def test_sdk_sources_pass_mypy_strict(tmp_path):
    assert (SDK / "src" / "payments_merchant" / "py.typed").exists()
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(SDK / "pyproject.toml"), "--cache-dir", str(tmp_path),
         str(SDK / "src")],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Success: no issues found" in run.stdout
