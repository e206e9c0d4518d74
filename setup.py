"""A shim for Apache Beam's ``--setup_file``, which runs ``python setup.py sdist`` to ship
beamtok to remote workers. Everything about the package is in pyproject.toml."""

from setuptools import setup

setup()
