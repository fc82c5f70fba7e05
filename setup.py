"""Package discovery for the rooms of docs/design.md (section 1); everything else is in pyproject.toml.

Each top-level folder is one room of `kernelsearch.*` (`agent/` is `kernelsearch.agent`), mapped by `package-dir`
in pyproject.toml. pyproject's own `packages.find` names a package after its folder (`agent`, not
`kernelsearch.agent`), so the packages are found here instead: each room and every folder with an `__init__.py`
below it, named under the room. A new subpackage needs no edit. Folders without one (the families' `wrong/`
fixtures) are data, shipped by `package-data`.
"""
from pathlib import Path

from setuptools import find_packages, setup

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent
ROOMS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

setup(packages=[pkg for name, folder in ROOMS.items()
                for pkg in (name, *(f"{name}.{sub}" for sub in find_packages(str(ROOT / folder))))])
