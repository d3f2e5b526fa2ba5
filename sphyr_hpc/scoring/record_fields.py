"""The fields of a scored record for ParaView: each design solved once more and written.

``score --fields DIR`` writes, for every record, its completion, ground truth
and yardstick optimum (:func:`write_record_fields`); the files and their
arrays are :mod:`sphyr_hpc.io.fields`'s.
"""

from pathlib import Path

import numpy as np

from ..core import discretisation as fe
from ..io.field_files import check_format
from ..io.fields import safe_name, write_fields
from ..runtime.petsc import petsc
from ..solvers.elasticity import elasticity_system


def write_record_fields(directory, model, subject, index, loadcase, designs, masked=None, penal=fe.PENAL,
                        fields_format="xdmf", nu=fe.NU):
    """Solve and write every design of one scored record; returns {design: index path}.

    ``designs``: ``{"completion": rho, "ground_truth": rho, "optimum": rho}``
    (any subset, other names allowed) of natural (nely, nelx) densities; L and
    S cells are forced solid as in the analysis.  Each design is solved on one
    COMM_SELF direct system (:class:`~sphyr_hpc.solvers.direct.DirectMethod`, options prefix
    ``sphyr_fields_``) and written as
    ``<directory>/<model>__<subject>__<index:04d>__<design>.<suffix>`` with
    unsafe characters replaced.  Not collective: call it on the rank that
    scored the record.
    """
    check_format(fields_format)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    base = f"{safe_name(model)}__{safe_name(subject)}__{int(index):04d}"
    structural = loadcase.structural_mask()
    paths = {}
    with elasticity_system(loadcase, comm=petsc().COMM_SELF, prefix="sphyr_fields_", solver="direct", nu=nu) as system:
        for name, rho in designs.items():
            rho = np.clip(np.asarray(rho, dtype=float).reshape(loadcase.shape), 0.0, 1.0).copy()
            rho[structural] = 1.0
            compliance = system.solve(system.slab_of(fe.simp_modulus(rho, penal)))
            paths[name] = write_fields(directory / f"{base}__{safe_name(name)}", system, rho, masked=masked,
                                       penal=penal, compliance=compliance, fields_format=fields_format, nu=nu)
    return paths
