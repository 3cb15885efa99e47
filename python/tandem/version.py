"""The package's version: one number for the Python package and the JS package.

package.json's "version" is the source of truth. A built package (wheel, `pip install ./python`)
carries it in tandem/_version.py, written by python/setup.py at build time; run from a clone
(PYTHONPATH=python), it is read from the clone's package.json.
"""

from __future__ import annotations

import json
from pathlib import Path


def _version() -> str:
    try:
        from ._version import version  # written into the built package by python/setup.py

        return version
    except ImportError:
        pass
    package_json = Path(__file__).resolve().parents[2] / "package.json"
    try:
        return json.loads(package_json.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "0+unknown"


__version__: str = _version()
