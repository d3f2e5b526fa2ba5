"""What Inspect AI's registry loads of sphyr_hpc: ``inspect eval sphyr_hpc/sphyr`` from any folder.

setup.cfg names this module in the ``inspect_ai`` entry-point group under the name ``sphyr_hpc``:
Inspect loads a package's entry point when a registry name begins with that package's name and a
slash (``inspect_ai/_util/entrypoints.py``, ``ensure_entry_points``), and names each ``@task`` of
an installed package ``<top-level package>/<function>`` (``inspect_ai/_util/registry.py``,
``registry_name``: installed means in site-packages, or editable by PEP 610's ``direct_url.json``).
Importing the task module is what registers it.
"""

from sphyr_hpc.inspect.task import sphyr  # noqa: F401  (registers sphyr_hpc/sphyr)
