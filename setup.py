# Shim for pip's legacy editable install (setuptools < 64 has no PEP 660); all metadata is in setup.cfg.
from setuptools import setup

setup()
