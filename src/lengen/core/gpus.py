"""Each job its own GPUs on one machine with no scheduler of GPUs: a job that asks for N (its rule's
`gpu` resource) runs with CUDA_VISIBLE_DEVICES naming N devices that no other running job holds,
for its whole run, the processes it starts included (the DeepSpeed launcher's ranks).

    python -m lengen.core.gpus N [--share K] -- COMMAND [ARG ...]

Snakemake counts GPUs (`--resources gpu=G` bounds how many running jobs ask for at once) but
names none; this names them. Each device of the machine's pool is a lock file in LOCK_DIR, held
(fcntl.flock) by an open descriptor the command inherits through exec: it is free again the moment
the command and every process it started have ended, however they ended (kill -9 included), and a
lock file left on disk holds nothing. A job that finds fewer than N free devices waits, saying so
once. The pool, first that is set: LENGEN_GPUS (a comma list, e.g. `0,1,2,3`: the devices this
machine lends the workflow), the workflow's own CUDA_VISIBLE_DEVICES, `nvidia-smi`'s list.

`--share K` (the tier's `jobs_per_gpu`, for models small enough to share a GPU on purpose) gives
each device K slots: up to K jobs run on it at once, never more. Under SLURM (SLURM_JOB_ID set)
the allocation has named the job's devices already: the command runs as it is. N = 0 hides every
GPU (CUDA_VISIBLE_DEVICES=""), so a job that asked for none cannot start a CUDA context on a
device another job holds.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import subprocess
import sys
import time

from lengen.core.cli import KnownError, command_parser, one_line_errors

POOL = "LENGEN_GPUS"
LOCKS = "LENGEN_GPU_LOCKS"  # the lock folder (tests: one per test); default LOCK_DIR
LOCK_DIR = "/tmp/lengen-gpus"  # one per machine: two workflows on one machine share it
WAIT_S = 2.0


class NoGpus(KnownError):
    """A job asks for more GPUs than the machine's pool has."""


def pool(environ=os.environ) -> list[str]:
    """The devices jobs may take: LENGEN_GPUS, else the workflow's CUDA_VISIBLE_DEVICES, else
    nvidia-smi's indices ([] where none is found)."""
    for name in (POOL, "CUDA_VISIBLE_DEVICES"):
        if name in environ:
            return [d.strip() for d in environ[name].split(",") if d.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def _lock_path(folder: str, device: str, slot: int) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", device)
    return os.path.join(folder, f"gpu-{name}.lock" if slot == 0 else f"gpu-{name}.{slot}.lock")


def _lock(path: str) -> int | None:
    """An open descriptor holding `path`'s lock, or None where another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for the waiting line
    return fd


def try_claim(devices: list[str], n: int, folder: str,
              share: int = 1) -> tuple[list[str], list[int]] | None:  # fmt: skip
    """n distinct devices of `devices`, each with a free slot of its `share` (1: a device is one
    job's), each slot locked by an open descriptor (returned with them); None, holding nothing,
    when fewer than n devices have one free."""
    os.makedirs(folder, exist_ok=True)
    taken, fds = [], []
    for device in devices:
        slots = (_lock(_lock_path(folder, device, slot)) for slot in range(share))
        fd = next((f for f in slots if f is not None), None)
        if fd is None:
            continue
        taken.append(device)
        fds.append(fd)
        if len(taken) == n:
            return taken, fds
    for fd in fds:
        os.close(fd)
    return None


def claim(n: int, devices: list[str], folder: str, wait_s: float = WAIT_S,
          say=lambda line: print(line, file=sys.stderr, flush=True), share: int = 1):  # fmt: skip
    """n free devices of `devices` (a slot of each, of `share`), waiting until they are
    (NoGpus if the pool has fewer than n)."""
    if n > len(devices):
        raise NoGpus(
            f"a job asks for {n} GPU(s) but this machine lends {len(devices)} "
            f"({','.join(devices) or 'none found'}; set {POOL}, e.g. {POOL}=0,1,2,3, or lower the "
            "tier's runtime.gpus_per_job)"
        )
    said = False
    while (got := try_claim(devices, n, folder, share)) is None:
        if not said:
            say(f"lengen.core.gpus: waiting for {n} free GPU(s) of {','.join(devices)} (held by "
                f"other jobs; locks in {folder}): run Snakemake with --resources gpu=<your GPUs>")
            said = True
        time.sleep(wait_s)
    return got


def environment(n: int, environ=os.environ, share: int = 1) -> tuple[dict, list[int]]:
    """The command's environment and the lock descriptors it must inherit (`share`: how many
    jobs a device takes at once, the tier's jobs_per_gpu)."""
    env = dict(environ)
    if "SLURM_JOB_ID" in environ:  # the allocation's devices, named by SLURM
        return env, []
    if n == 0:
        env["CUDA_VISIBLE_DEVICES"] = ""
        return env, []
    devices, fds = claim(n, pool(environ), environ.get(LOCKS, LOCK_DIR), share=share)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    env.pop(POOL, None)  # the job's own processes see their devices only
    return env, fds


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: run COMMAND on N devices of its own (exec: the command takes this process's place)."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("n", type=int, help="GPUs the command gets (its rule's `gpu` resource)")
    parser.add_argument("--share", type=int, default=1,
                        help="jobs a device takes at once (the tier's jobs_per_gpu)")  # fmt: skip
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG ...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.n < 0 or args.share < 1 or not command:
        parser.error("give N >= 0 (and --share >= 1), then -- and the command")
    env, fds = environment(args.n, share=args.share)
    for fd in fds:
        os.set_inheritable(fd, True)  # held by the command (and what it starts) until it ends
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
