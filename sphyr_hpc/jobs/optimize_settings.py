"""An optimisation's settings and problem from its arguments, checked before any work.

Light on purpose: the command checks its settings with these before MPI and
PETSc are imported.
"""

import os

import numpy as np

from ..optimiser import memory, problems
from ..optimiser.problems import ProblemError
from ..runtime.process import UsageError


def parse_continuation(text):
    if text is None or str(text).lower() in ("", "none", "off"):
        return None
    try:
        start, step, every = (float(v) for v in str(text).split(","))
    except ValueError:
        raise ProblemError(f"--continuation {text!r} is not p_start,p_step,every (e.g. 1,0.5,10) or none") from None
    if step <= 0 or every < 1 or every != int(every) or start < 1:
        raise ProblemError(f"--continuation {text!r}: need p_start >= 1, p_step > 0, every a positive integer")
    return (start, step, int(every))


def update_of(args, continuation):
    """The design update's name: ``--optimizer``'s, or ``"oc88"`` (the 88-line code's OC) for
    ``--preset mbb88`` with ``--continuation none`` or for ``--filter sensitivity`` (no other update
    filters the sensitivities; ProblemError with ``--optimizer mma``)."""
    if args.optimizer == "mma":
        if args.filter == "sensitivity":
            raise ProblemError("--filter sensitivity is the 88-line code's, which updates by OC: give "
                               "--optimizer oc, or --filter density for MMA")
        return "mma"
    if args.filter == "sensitivity" or (args.preset == "mbb88" and continuation is None):
        return "oc88"
    return args.optimizer


def load_problem(args):
    """The problem the arguments describe (ProblemError with a message otherwise)."""
    return problems.resolve(args.problem, args.preset, args.size, args.dataset, args.index, args.masked,
                            args.upscale, args.gravity, args.volfrac)


# The command-line option of each RunSettings field whose name is not the option's.
OPTION_OF = {"update": "--optimizer", "fields_dir": "--fields"}


def run_settings(args):
    """The run's :class:`~sphyr_hpc.optimiser.driver.RunSettings` from the command's arguments, every
    setting checked here once (ProblemError naming the option of one out of range)."""
    from ..optimiser.driver import RunSettings
    from ..optimiser.simp import SettingError

    if args.checkpoint_every < 1:
        raise ProblemError(f"--checkpoint-every {args.checkpoint_every} must be at least 1")
    if args.resume and not args.checkpoint:
        raise ProblemError("--resume needs --checkpoint DIR (the folder the run saved itself in)")
    if args.checkpoint and os.path.exists(args.checkpoint) and not os.path.isdir(args.checkpoint):
        raise ProblemError(f"--checkpoint {args.checkpoint} is a file; --checkpoint names a folder (new or existing)")
    if args.fields and os.path.exists(args.fields) and not os.path.isdir(args.fields):
        raise ProblemError(f"--fields {args.fields} is a file; --fields names a folder (new or existing)")
    for option, path in (("--json", args.json), ("--png", args.png), ("--save-density", args.save_density)):
        if path and os.path.isdir(path):
            raise ProblemError(f"{option} {path} is a folder; {option} names a file (e.g. {path.rstrip('/')}/run"
                               f"{'.json' if option == '--json' else '.png' if option == '--png' else '.npy'})")
    continuation = parse_continuation(args.continuation)
    try:
        return RunSettings(iterations=args.iterations, tolerance=args.tolerance, penal=args.penal,
                           continuation=continuation, move=args.move, update=update_of(args, continuation),
                           filter=args.filter, radius=args.radius, solver=args.solver, fields_dir=args.fields,
                           fields_every=args.fields_every, fields_format=args.fields_format)
    except SettingError as err:
        option = OPTION_OF.get(err.field, "--" + err.field.replace("_", "-"))
        value = args.continuation if err.field == "continuation" else err.value
        raise ProblemError(f"{option} {value} {err.requirement}") from None


def check_memory(args, comm):
    """Collective on the mpi4py ``comm``, before PETSc starts: :class:`UsageError` on every rank when the
    run's estimated peak memory per rank (:mod:`sphyr_hpc.optimiser.memory`) is over what the node has,
    unless ``--force``."""
    from ..optimiser.driver import BANDWIDTH_BYTES

    try:
        problem = load_problem(args)
    except ProblemError as err:
        raise UsageError(str(err)) from None
    extra = 2 * BANDWIDTH_BYTES if args.bandwidth else 0  # the copy's two arrays, with the system kept
    memory.check(f"{problem.name} {problem.nelx}x{problem.nely}", memory.grid_dofs(problem.nelx, problem.nely),
                 args.solver, comm, args.force, extra_bytes=extra)


# The settings a resumed run must share with the checkpoint's (``--iterations`` may grow; ``--initial``
# is what the checkpoint replaces; outputs other than the fields' history are the resumed run's own).
RESUME_SETTINGS = ("penal", "continuation", "radius", "filter", "move", "tolerance", "optimizer", "solver", "fields",
                   "fields_format", "fields_every")


def checkpoint_of(args, problem, say=print):
    """``--checkpoint DIR``'s :class:`CheckpointSettings` (its record with ``--resume``), None without
    it; ProblemError for a folder that holds another run's checkpoint or none to resume."""
    from ..io.checkpoint import CheckpointError, read_record
    from ..optimiser.checkpointing import CheckpointSettings

    if not args.checkpoint:
        return None
    settings = {"problem": problem.to_dict(), **{key: getattr(args, key, None) for key in RESUME_SETTINGS}}
    try:
        record = read_record(args.checkpoint)
    except CheckpointError as err:
        raise ProblemError(f"--checkpoint: {err}") from None
    if record is not None and not args.resume:
        raise ProblemError(f"--checkpoint {args.checkpoint} already holds a checkpoint (iteration "
                           f"{record['iteration']}): add --resume to continue that run, or choose another folder")
    if record is None:
        if args.resume:
            say(f"--resume: no checkpoint in {args.checkpoint} yet: the run starts at iteration 1")
        return CheckpointSettings(args.checkpoint, args.checkpoint_every, settings)
    from ..io.checkpoint import differences

    changed = differences(record.get("settings", {}), settings)
    if changed:
        raise ProblemError(f"--resume: the checkpoint in {args.checkpoint} is of a run with other settings "
                           f"({', '.join(changed)}); give the same ones, or drop --resume and choose another "
                           f"--checkpoint folder to start over")
    return CheckpointSettings(args.checkpoint, args.checkpoint_every, settings, record)


def ground_truth_of(args, problem):
    """Natural ground-truth densities for scoring, or None."""
    if args.ground_truth:
        truth_problem = problems.read_problem(args.ground_truth)
        rho = truth_problem.ground_truth()
        if rho is None:
            raise ProblemError(f"{args.ground_truth}: a ground truth must be a grid of densities (no V cells)")
        ny, nx = rho.shape
        if (problem.nely % ny or problem.nelx % nx or problem.nely // ny != problem.nelx // nx):
            raise ProblemError(f"{args.ground_truth}: a {nx}x{ny} ground truth does not upscale to the "
                               f"{problem.nelx}x{problem.nely} problem by an integer factor")
        k = problem.nely // ny
        return np.repeat(np.repeat(rho, k, axis=0), k, axis=1)
    return problem.ground_truth()


def density_path(path):
    """Where ``--save-density PATH`` writes: np.save adds .npy to a name without it."""
    return path if path.endswith(".npy") else path + ".npy"
