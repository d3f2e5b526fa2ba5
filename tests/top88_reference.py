"""The 88-line code's half-MBB beam in NumPy/SciPy, one process: the yardstick of ``--preset mbb88``.

Written from the published listing's algorithm (Andreassen, Clausen, Schevenels, Lazarov and
Sigmund, "Efficient topology optimization in MATLAB using 88 lines of code", Struct. Multidisc.
Optim. 43, 2011), independently of sphyr_hpc (nothing of the package is imported): its element
matrix KE, its column-major node and element numbering, its loads and supports (F(2) = -1; the x
DOFs of the left edge and the y DOF of the bottom-right node fixed), modified SIMP with E0 = 1,
Emin = 1e-9, nu = 0.3, the filter matrix H with weights max(0, rmin - distance), ``ft = 1`` (the
sensitivity filter with its max(1e-3, x) guard) and ``ft = 2`` (the density filter), the OC
update (bisection on [0, 1e9] to a relative 1e-3, move 0.2, the square root of the optimality
condition) and its loop ``while change > 0.01``.  The listing has no iteration limit;
``max_iterations`` is one for safety only.

``top88(nelx, nely, volfrac, penal, rmin, ft)`` returns a dict: ``iterations`` (the listing's
``loop``), ``compliance`` (its last printed ``c``: the compliance of the last design it analysed),
``history`` (every iteration's ``c`` and ``change``) and ``xPhys`` as a (nely, nelx) array.
"""

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def element_matrix(nu=0.3):
    """The listing's KE (unit modulus, plane stress, nodes anticlockwise from the bottom left)."""
    A11 = np.array([[12, 3, -6, -3], [3, 12, 3, 0], [-6, 3, 12, -3], [-3, 0, -3, 12]], dtype=float)
    A12 = np.array([[-6, -3, 0, 3], [-3, -6, -3, -6], [0, -3, -6, 3], [3, -6, 3, -6]], dtype=float)
    B11 = np.array([[-4, 3, -2, 9], [3, -4, -9, 4], [-2, -9, -4, -3], [9, 4, -3, -4]], dtype=float)
    B12 = np.array([[2, -3, 4, -9], [-3, 2, 9, -2], [4, 9, 2, 3], [-9, -2, 3, 2]], dtype=float)
    A = np.block([[A11, A12], [A12.T, A11]])
    B = np.block([[B11, B12], [B12.T, B11]])
    return 1.0 / (1.0 - nu**2) / 24.0 * (A + nu * B)


def top88(nelx, nely, volfrac, penal, rmin, ft, max_iterations=10_000, E0=1.0, Emin=1e-9, nu=0.3):
    KE = element_matrix(nu)
    n = nelx * nely
    # Nodes numbered down the columns (1-based in the listing; 0-based here).
    nodenrs = np.arange((1 + nelx) * (1 + nely)).reshape(1 + nely, 1 + nelx, order="F")
    # edofVec = 2*nodenrs(1:end-1,1:end-1)+1 (1-based): the x DOF of each element's bottom-left node.
    edofVec = (2 * nodenrs[:-1, :-1] + 2).reshape(n, order="F")
    edofMat = edofVec[:, None] + np.array([0, 1, 2 * nely + 2, 2 * nely + 3, 2 * nely, 2 * nely + 1, -2, -1])
    iK = np.kron(edofMat, np.ones((8, 1), dtype=int)).ravel()
    jK = np.kron(edofMat, np.ones((1, 8), dtype=int)).ravel()
    ndof = 2 * (nely + 1) * (nelx + 1)
    # Half MBB beam: F(2,1) = -1; fixeddofs = union(1:2:2*(nely+1), 2*(nelx+1)*(nely+1)).
    F = np.zeros(ndof)
    F[1] = -1.0
    fixeddofs = np.union1d(np.arange(0, 2 * (nely + 1), 2), [ndof - 1])
    freedofs = np.setdiff1d(np.arange(ndof), fixeddofs)
    U = np.zeros(ndof)
    # Filter: H(e1, e2) = max(0, rmin - dist) over the (2 (ceil(rmin) - 1) + 1)^2 box, Hs its row sums.
    # (The listing's four loops over i1, j1, i2, j2, one (i2 - i1, j2 - j1) offset at a time.)
    reach = int(np.ceil(rmin)) - 1
    i1, j1 = np.meshgrid(np.arange(nelx), np.arange(nely), indexing="ij")
    iH, jH, sH = [], [], []
    for di in range(-reach, reach + 1):
        for dj in range(-reach, reach + 1):
            i2, j2 = i1 + di, j1 + dj
            inside = (i2 >= 0) & (i2 < nelx) & (j2 >= 0) & (j2 < nely)
            iH.append((i1 * nely + j1)[inside])
            jH.append((i2 * nely + j2)[inside])
            sH.append(np.full(int(inside.sum()), max(0.0, rmin - np.sqrt(di ** 2 + dj ** 2))))
    H = sp.csr_matrix((np.concatenate(sH), (np.concatenate(iH), np.concatenate(jH))), shape=(n, n))
    Hs = np.asarray(H.sum(axis=1)).ravel()
    # Column-major vectors throughout (x(:) in the listing).
    x = np.full(n, float(volfrac))
    xPhys = x.copy()
    loop = 0
    change = 1.0
    history = []
    c = np.inf
    while change > 0.01 and loop < max_iterations:
        loop += 1
        sK = (KE.ravel()[:, None] * (Emin + xPhys ** penal * (E0 - Emin))[None, :]).ravel(order="F")
        K = sp.csc_matrix((sK, (iK, jK)), shape=(ndof, ndof))
        K = (K + K.T) / 2
        U[freedofs] = spla.spsolve(K[freedofs][:, freedofs].tocsc(), F[freedofs])
        Ue = U[edofMat]
        ce = np.sum((Ue @ KE) * Ue, axis=1)
        c = float(np.sum((Emin + xPhys ** penal * (E0 - Emin)) * ce))
        dc = -penal * (E0 - Emin) * xPhys ** (penal - 1) * ce
        dv = np.ones(n)
        if ft == 1:
            dc = H @ (x * dc) / Hs / np.maximum(1e-3, x)
        elif ft == 2:
            dc = H @ (dc / Hs)
            dv = H @ (dv / Hs)
        l1, l2, move = 0.0, 1e9, 0.2
        while (l2 - l1) / (l1 + l2) > 1e-3:
            lmid = 0.5 * (l2 + l1)
            xnew = np.maximum(0.0, np.maximum(x - move, np.minimum(1.0, np.minimum(x + move, x * np.sqrt(-dc / dv / lmid)))))
            if ft == 1:
                xPhys = xnew
            elif ft == 2:
                xPhys = (H @ xnew) / Hs
            if np.sum(xPhys) > volfrac * nelx * nely:
                l1 = lmid
            else:
                l2 = lmid
        change = float(np.max(np.abs(xnew - x)))
        x = xnew
        history.append((loop, c, change))
    return {"iterations": loop, "compliance": c, "history": history,
            "xPhys": xPhys.reshape(nely, nelx, order="F")}


if __name__ == "__main__":  # python tests/top88_reference.py NELX NELY FT [OUT.json]: rmin 1.5 nelx / 60
    import json
    import sys

    nelx, nely, ft = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    out = top88(nelx, nely, 0.5, 3.0, 1.5 * nelx / 60, ft)
    print(nelx, nely, ft, out["iterations"], repr(out["compliance"]))
    if len(sys.argv) > 4:
        with open(sys.argv[4], "w") as handle:
            json.dump({k: v for k, v in out.items() if k != "xPhys"}, handle)
