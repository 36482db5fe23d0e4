"""What ``tune`` and ``record`` share: the workload named on the command line."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._counts import MAX_COUNT
from .._crowding import hush_crowding
from .._errors import InvalidArgumentError
from .._fingerprint import allowed_cpus, current_quota, usable_cpus
from .._labels import MODEL_LABEL_NAMES, check_label
from .._shown import plural, shown_path, spelled
from ._common import warn

if TYPE_CHECKING:
    from .._mujoco import RolloutWorkload

__all__ = [
    "ENVS_PER_THREAD",
    "add_workload_options",
    "batch_words",
    "check_family",
    "default_envs",
    "family_words",
    "load_workload",
    "mujoco_warnings_told",
    "pool_threads",
    "positive_int",
    "seed_int",
    "warn_shared_cores",
]

ENVS_PER_THREAD = 128  # the default batch: 128 envs per worker, as trainers size theirs


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    """``MODEL``, ``--num-envs``, ``--nthread``, ``--nstep``, ``--n-variants`` and
    ``--model-label``, with the defaults :func:`load_workload` and :func:`pool_threads`
    give them."""
    parser.add_argument(
        "model",
        nargs="?",
        type=_model_name,
        metavar="MODEL.xml",
        help="MJCF (.xml) or compiled (.mjb) model file (default: the demo)",
    )
    parser.add_argument(
        "--num-envs",
        type=positive_int,
        metavar="N",
        help=f"rollouts per pool call (default: {ENVS_PER_THREAD} per thread)",
    )
    parser.add_argument(
        "--nthread",
        type=positive_int,
        metavar="T",
        help="pool worker threads (default: the CPUs this process may use)",
    )
    parser.add_argument(
        "--nstep",
        type=positive_int,
        metavar="K",
        help="steps per rollout (default: 20 for the demo, 10 for a model)",
    )
    # a trainer's domain-randomized entry (RolloutWorkload(..., model_label=...)) is keyed
    # by its label and its variant count: without these it cannot be named from here
    parser.add_argument(
        "--n-variants",
        type=positive_int,
        metavar="V",
        help="variants of MODEL (masses and frictions drawn +-10%%, as from_xml's "
        "n_variants) given to the envs in blocks (default: 1)",
    )
    parser.add_argument(
        "--model-label",
        type=_model_label,
        metavar="NAME",
        help="key MODEL's family of variants by NAME instead of their content, as "
        "RolloutWorkload(model_label=NAME) does",
    )


def _model_name(text: str) -> str:
    if not text:  # not the current folder, as pathlib would read it
        raise argparse.ArgumentTypeError(f"{spelled(text)} is not a model file's path")
    return text


def _model_label(text: str) -> str:
    try:
        check_label(text, what="model_label", names=MODEL_LABEL_NAMES)
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def check_family(args: argparse.Namespace) -> None:
    """Refuse ``--n-variants`` or ``--model-label`` without ``MODEL``.

    Raises:
        InvalidArgumentError: one of them was given for the demo, which has neither.
    """
    if args.model is not None:
        return
    for flag, value in (("--n-variants", args.n_variants), ("--model-label", args.model_label)):
        if value is not None:
            raise InvalidArgumentError(
                f"{flag} {spelled(str(value))}: the demo scene has no variants and no label; "
                "give the MODEL.xml whose variants it names"
            )


def family_words(args: argparse.Namespace) -> str:
    """``--n-variants`` and ``--model-label`` as a description's words (empty without them)."""
    words = ""
    if args.n_variants is not None:
        words += f", {plural(args.n_variants, 'variant')}"
    if args.model_label is not None:
        words += f", model_label {spelled(args.model_label)}"
    return words


def _int_from(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{spelled(text)} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_from(text, 1)


def seed_int(text: str) -> int:
    """An argparse type: a seed, an integer >= 0."""
    return _int_from(text, 0)


def pool_threads(asked: int | None) -> int:
    """``--nthread``, or the CPUs this process may use (its affinity's, no more than its CPU
    quota rounded up).

    Raises:
        InvalidArgumentError: more threads than a pool can count (a C ``int``).
    """
    if asked is not None and asked > MAX_COUNT:
        raise InvalidArgumentError(f"--nthread {asked}: expected at most {MAX_COUNT}")
    return asked or allowed_cpus(usable_cpus(), current_quota())


def default_envs(args: argparse.Namespace, nthread: int) -> int:
    """``--num-envs``, or :data:`ENVS_PER_THREAD` per thread (no more than a pool can count)."""
    return int(args.num_envs or min(ENVS_PER_THREAD * nthread, MAX_COUNT))


def warn_shared_cores(nthread: int, crowded: tuple[int, str] | None) -> None:
    """Say so when the pool, now built, has more threads than this process may use CPUs
    (``crowded``: :func:`hush_crowding`'s answer, taken before the pool was built so that
    building it warns in no words of its own)."""
    if crowded is not None:
        warn(
            f"--nthread {nthread} is more than {crowded[1]}; workers will share cores, so "
            f"the timings will not match a machine with {nthread} free cores"
        )


def batch_words(num_envs: int, nthread: int, nstep: int | None = None) -> str:
    """``32 envs, 2 threads, 1 step per rollout``: a header's batch, singular where it is one."""
    words = f"{plural(num_envs, 'env')}, {plural(nthread, 'thread')}"
    return words if nstep is None else f"{words}, {plural(nstep, 'step')} per rollout"


def load_workload(args: argparse.Namespace, nthread: int) -> tuple[RolloutWorkload, str]:
    """The workload named by ``MODEL`` (or the demo) and a one-line description of it."""
    from .._mujoco import DEMO_NSTEP, RolloutWorkload, demo_workload

    check_family(args)
    crowded = hush_crowding(nthread)
    num_envs = default_envs(args, nthread)
    if args.model is None:
        nstep = args.nstep or DEMO_NSTEP
        with _fits(num_envs, args.nstep):
            demo = demo_workload(num_envs=num_envs, nthread=nthread, nstep=nstep)
        warn_shared_cores(nthread, crowded)
        what = f"demo scene: {batch_words(num_envs, nthread, nstep)}"
        return demo, what
    kwargs: dict[str, Any] = {}
    if args.nstep is not None:
        kwargs["nstep"] = args.nstep
    if args.n_variants is not None:
        kwargs["n_variants"] = args.n_variants
    if args.model_label is not None:
        kwargs["model_label"] = args.model_label
    with _fits(num_envs, args.nstep):
        workload = RolloutWorkload.from_xml(
            args.model, num_envs=num_envs, nthread=nthread, **kwargs
        )
    warn_shared_cores(nthread, crowded)
    # a file's name may hold a newline or an escape sequence: shown escaped, one line
    model = shown_path(args.model)
    what = f"{model}: {batch_words(num_envs, nthread, workload.nstep)}{family_words(args)}"
    return workload, what


@contextlib.contextmanager
def _fits(num_envs: int, nstep: int | None) -> Iterator[None]:
    """A batch whose arrays cannot be allocated, told as a bad ``--num-envs``, not a traceback.

    The workload refuses a batch larger than the memory the machine has available; a
    smaller one can still fail where this process may allocate less (``ulimit -v``, a
    batch scheduler's address-space limit).

    Raises:
        InvalidArgumentError: allocating the batch's arrays raised MemoryError.
    """
    try:
        yield
    except MemoryError as exc:
        steps = "" if nstep is None else f" with --nstep {nstep}"
        raise InvalidArgumentError(
            f"--num-envs {num_envs}{steps}: the batch's arrays do not fit in the memory this "
            f"process may allocate ({str(exc) or 'out of memory'}); use fewer envs or steps"
        ) from None


@contextlib.contextmanager
def mujoco_warnings_told(doing: str, then: str) -> Iterator[None]:
    """MuJoCo's warnings in the block told as one line at its end, instead of printed each.

    An unstable model warns once per env per call: thousands of lines on stderr, and a
    ``MUJOCO_LOG.TXT`` grown in the current folder. ``doing`` says what the block did
    ("measuring"), ``then`` what the user should make of it.
    """
    from .._mujoco import warnings_counted

    with warnings_counted() as tally:
        try:
            yield
        finally:
            if tally is not None and tally.count:
                times = "once" if tally.count == 1 else f"{tally.count} times"
                warn(f"MuJoCo warned {times} while {doing} (first: {tally.first}); {then}")
