"""Discretisation: bilinear plane-stress elements and the SIMP law (docs/scoring.md, "Finite elements").

Every grid cell is one unit-square Q4 element.  Local node order of element
(r, c) is (r, c), (r, c+1), (r+1, c+1), (r+1, c), i.e. local coordinates
(0,0), (1,0), (1,1), (0,1) with x = column and y = row; its 8 local DOFs are
``[x0, y0, x1, y1, x2, y2, x3, y3]``.  This is also the corner order of
PETSc's ``DMDAGetElements`` for a Q1 DMDA whose first axis is the column, so
the element matrix below can be assembled directly from it.

The element matrix is integrated with 2x2 Gauss quadrature for a unit
modulus; it equals the closed-form matrix of the classic 88-line code.
"""

import numpy as np

E0 = 1.0
EMIN = 1e-9
NU = 0.3
PENAL = 3.0
# A design whose compliance exceeds this multiple of the all-solid one's carries its
# load through the numerically negligible void (Emin) stiffness, not through material.
SINGULARITY_RATIO = 1e3

_CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])


def constitutive_matrix(nu=NU):
    """Plane-stress material matrix for unit Young's modulus (Voigt xx, yy, xy)."""
    return np.array([[1.0, nu, 0.0], [nu, 1.0, 0.0], [0.0, 0.0, (1.0 - nu) / 2.0]]) / (1.0 - nu**2)


def strain_displacement(xi, eta):
    """B (3x8) and det(J) of the unit square at the reference point (xi, eta)."""
    dn = 0.25 * np.array(
        [
            [-(1.0 - eta), 1.0 - eta, 1.0 + eta, -(1.0 + eta)],
            [-(1.0 - xi), -(1.0 + xi), 1.0 + xi, 1.0 - xi],
        ]
    )
    jac = dn @ _CORNERS
    dxy = np.linalg.solve(jac, dn)
    b = np.zeros((3, 8))
    b[0, 0::2] = dxy[0]
    b[1, 1::2] = dxy[1]
    b[2, 0::2] = dxy[1]
    b[2, 1::2] = dxy[0]
    return b, np.linalg.det(jac)


def grid_dimension(shape):
    """The spatial dimension of a grid of cells ``shape`` (cells along each axis, slowest first:
    (rows, columns) in 2D, (layers, rows, columns) in 3D): 2 or 3."""
    dim = len(shape)
    if dim not in (2, 3):
        raise ValueError(f"a grid of shape {tuple(shape)}: expected 2 axes (rows, columns) or 3")
    return dim


def not_in_3d(what):
    """The error of a piece that exists in 2D only, for a 3D grid."""
    return NotImplementedError(f"{what} exists for 2D grids only: the 3D (hexahedral) one is not built yet")


def element_stiffness(nu=NU, dim=2):
    """8x8 stiffness of a unit-square Q4 element with unit modulus, the same to the bit on every CPU.

    ``B^T D B`` is summed as explicit products (NumPy multiplies, then adds),
    not by BLAS: a BLAS kernel with fused multiply-add (OpenBLAS's Haswell,
    Zen, SkylakeX) rounds each product-sum once where the others round twice,
    so its matrix differs in the last bit and is not even symmetric (K's two
    triangles would differ; the block Cholesky reads only the upper one).
    The lower triangle is the upper one's mirror, so K is symmetric by
    construction whatever the arithmetic.
    """
    if dim != 2:
        raise not_in_3d("the element (unit-square Q4)") if dim == 3 else ValueError(f"dimension {dim}: expected 2 or 3")
    d = constitutive_matrix(nu)
    ke = np.zeros((8, 8))
    gauss = (-1.0 / np.sqrt(3.0), 1.0 / np.sqrt(3.0))
    for xi in gauss:
        for eta in gauss:
            b, det = strain_displacement(xi, eta)
            db = (d[:, :, None] * b[None, :, :]).sum(axis=1)  # D B, three products summed in order
            ke += (b.T[:, :, None] * db[None, :, :]).sum(axis=1) * det  # B^T (D B)
    return np.triu(ke) + np.triu(ke, 1).T


def centre_strain_displacement():
    """B at the element centre, for reporting strains and stresses."""
    return strain_displacement(0.0, 0.0)[0]


def simp_modulus(rho, penal=PENAL, e0=E0, emin=EMIN):
    """E(rho) = Emin + rho^p (E0 - Emin), rho clipped to [0, 1]."""
    rho = clip(np.asarray(rho, dtype=float), 0.0, 1.0)
    rho **= penal  # in place: the same values as rho**penal, one temporary fewer
    rho *= e0 - emin
    rho += emin
    return rho


def clip(values, low, high, out=None):
    """``min(max(values, low), high)`` elementwise: NumPy's clip without its Python wrapper.

    ``np.clip`` checks and converts its arguments on every call, which costs
    more than the clipping itself on SPhyR's grids; the two ufuncs select the
    same values.
    """
    out = np.maximum(values, low, out=out)
    return np.minimum(out, high, out=out)


def compliance_sensitivity(physical, unit_energies, penal):
    """d(compliance)/d(density) of SIMP elements: -p max(rho, 1e-9)^(p-1) u_e^T K0 u_e."""
    return -penal * np.maximum(physical, 1e-9) ** (penal - 1.0) * unit_energies


def element_nodes(nely, nelx):
    """Natural node numbers (n_elements x 4) in local node order, row-major elements."""
    r, c = np.divmod(np.arange(nely * nelx), nelx)
    tl = r * (nelx + 1) + c
    return np.stack([tl, tl + 1, tl + nelx + 2, tl + nelx + 1], axis=1)


def nodes_to_dofs(nodes):
    """Interleaved DOFs [2n0, 2n0+1, 2n1, ...] of an (n x 4) node table."""
    dofs = np.empty((nodes.shape[0], 2 * nodes.shape[1]), dtype=nodes.dtype)
    dofs[:, 0::2] = 2 * nodes
    dofs[:, 1::2] = 2 * nodes + 1
    return dofs
