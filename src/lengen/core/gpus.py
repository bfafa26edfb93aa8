"""Each job its own GPUs, and a rendezvous port of its own, on one machine or inside one SLURM
allocation: a job that asks for N (its rule's `gpu` resource) runs with CUDA_VISIBLE_DEVICES naming
N devices that no other running job holds, for its whole run, the processes it starts included
(the DeepSpeed launcher's ranks).

    python -m lengen.core.gpus N [--share K] -- COMMAND [ARG ...]

Snakemake counts GPUs (`--resources gpu=G` bounds how many running jobs ask for at once) but
names none; this names them. Each device of the pool is a lock file, held (fcntl.flock) by an open
descriptor the command inherits through exec: it is free again the moment the command and every
process it started have ended, however they ended (kill -9 included), and a lock file left on disk
holds nothing. A job that finds fewer than N free devices waits, saying so once.

One rule for devices everywhere. The pool, first that is set: LENGEN_GPUS (a comma list, e.g.
`0,1,2,3`: the devices this machine lends the workflow), the workflow's own CUDA_VISIBLE_DEVICES,
`nvidia-smi`'s list. Under SLURM (SLURM_JOB_ID set) the pool is the allocation's devices (its
CUDA_VISIBLE_DEVICES, else nvidia-smi's; LENGEN_GPUS is not read) and the locks are the
allocation's own (a folder per job id): local jobs inside `salloc` get devices of their own, and two
allocations on one node never wait for each other. The lock folder is one per machine
(LENGEN_GPU_LOCKS, default /tmp/lengen-gpus), open to every user (mode 1777, lock files 0666), so
two users' workflows on one machine share it.

`--share K` (the tier's `jobs_per_gpu`, for models small enough to share a GPU on purpose) gives
each device K slots: up to K jobs run on it at once, never more. N = 0 hides every GPU
(CUDA_VISIBLE_DEVICES=""), so a job that asked for none cannot start a CUDA context on a device
another job holds.

A command that starts the DeepSpeed launcher (`deepspeed ...`) gets `--master_port P` for a port
no other job on the machine holds (a port lock, held like a device's, that no process is bound to
when the job starts), and every command gets MASTER_PORT=P: two multi-process jobs on one machine
never meet on the launcher's default port 29500.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import os
import re
import socket
import subprocess
import sys
import time

from lengen.core.cli import KnownError, command_parser, one_line_errors
from lengen.core.device import JOB_GPUS

POOL = "LENGEN_GPUS"
LOCKS = "LENGEN_GPU_LOCKS"  # the lock folder (tests: one per test); default LOCK_DIR
LOCK_DIR = "/tmp/lengen-gpus"  # one per machine: two workflows on one machine share it
WAIT_S = 2.0
PORTS = range(29500, 30500)  # the rendezvous ports jobs take (DeepSpeed's default is the first)
LAUNCHERS = ("deepspeed",)  # commands that take `--master_port P`


class NoGpus(KnownError):
    """A job asks for more GPUs than the machine's pool has."""


class LockFolderError(KnownError):
    """The lock folder or a lock file cannot be opened by this user."""


def in_allocation(environ=os.environ) -> str | None:
    """The SLURM job id whose allocation this process runs in, or None."""
    return environ.get("SLURM_JOB_ID") or None


def pool(environ=os.environ) -> list[str]:
    """The devices jobs may take: under SLURM the allocation's (CUDA_VISIBLE_DEVICES); else
    LENGEN_GPUS, else the workflow's CUDA_VISIBLE_DEVICES; else nvidia-smi's indices ([] where
    none is found)."""
    names = ("CUDA_VISIBLE_DEVICES",) if in_allocation(environ) else (POOL, "CUDA_VISIBLE_DEVICES")
    for name in names:
        if name in environ:
            return [d.strip() for d in environ[name].split(",") if d.strip()]
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def lock_folder(environ=os.environ) -> str:
    """The folder of this job's device locks: the machine's, or under SLURM its allocation's."""
    folder = environ.get(LOCKS, LOCK_DIR)
    job = in_allocation(environ)
    return os.path.join(folder, f"slurm-{re.sub(r'[^0-9A-Za-z_-]', '_', job)}") if job else folder


def _open_folder(folder: str) -> None:
    """`folder` (and the machine's lock folder above an allocation's) made, open to every user:
    mode 1777 like /tmp, so another user's job can add its lock files (and never remove ours)."""
    parent = os.path.dirname(folder.rstrip("/"))
    for path in (parent, folder) if os.path.basename(folder).startswith("slurm-") else (folder,):
        try:
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise LockFolderError(
                    f"{path}: a file where the GPU lock folder belongs; move it away, or set "
                    f"{LOCKS} to another folder"
                ) from None
            continue
        except OSError as err:
            raise LockFolderError(
                f"{path}: cannot make the GPU lock folder ({err.strerror}); "
                f"set {LOCKS} to a folder you can write"
            ) from None
        with contextlib.suppress(OSError):  # ours, just made: open it to every user
            os.chmod(path, 0o1777)


def _lock(path: str) -> int | None:
    """An open descriptor holding `path`'s lock, or None where another process holds it. The file
    is opened as it is where it exists (flock needs no write access, and /tmp-like folders refuse
    O_CREAT on another user's file: fs.protected_regular), made 0666 where it does not."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o666)  # past the umask: any user of the machine may take it
        except FileExistsError:  # another job made it just now
            return _lock(path)
        except OSError as err:
            raise LockFolderError(
                f"{path}: cannot make a GPU lock file ({err.strerror}): the folder belongs to "
                f"another user without write access for you; run `chmod 1777 "
                f"{os.path.dirname(path)}` as its owner, or set {LOCKS} to a folder of your own"
            ) from None
    except OSError as err:
        raise LockFolderError(
            f"{path}: cannot open a GPU lock file ({err.strerror}); run `chmod "
            f"666 {path}` as its owner, or set {LOCKS} to a folder of your "
            "own"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    with contextlib.suppress(OSError):  # who holds it, for a reader (where the file is writable)
        with open(f"/proc/self/fd/{fd}", "w") as f:
            f.write(f"{os.getpid()}\n")
    return fd


def _lock_path(folder: str, device: str, slot: int) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", device)
    return os.path.join(folder, f"gpu-{name}.lock" if slot == 0 else f"gpu-{name}.{slot}.lock")


def try_claim(
    devices: list[str], n: int, folder: str, share: int = 1
) -> tuple[list[str], list[int]] | None:
    """n distinct devices of `devices`, each with a free slot of its `share` (1: a device is one
    job's), each slot locked by an open descriptor (returned with them); None, holding nothing,
    when fewer than n devices have one free."""
    _open_folder(folder)
    taken, fds = [], []
    for device in devices:
        fd = None
        for slot in range(share):
            if (fd := _lock(_lock_path(folder, device, slot))) is not None:
                break
        if fd is None:
            continue
        taken.append(device)
        fds.append(fd)
        if len(taken) == n:
            return taken, fds
    for fd in fds:
        os.close(fd)
    return None


def claim(
    n: int,
    devices: list[str],
    folder: str,
    wait_s: float = WAIT_S,
    say=lambda line: print(line, file=sys.stderr, flush=True),
    share: int = 1,
):
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
            say(
                f"lengen.core.gpus: waiting for {n} free GPU(s) of {','.join(devices)} (held by "
                f"other jobs; locks in {folder}): run Snakemake with --resources gpu=<your GPUs>"
            )
            said = True
        time.sleep(wait_s)
    return got


def _bindable(port: int) -> bool:
    """Whether no process on this machine is bound to `port` (TCP, every address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def claim_port(folder: str, ports=PORTS) -> tuple[int, int]:
    """A rendezvous port no other job of the machine holds and no process is bound to, with the
    descriptor holding its lock (in `folder`/ports: machine-wide, under SLURM too)."""
    folder = os.path.join(folder, "ports")
    _open_folder(folder)
    for port in ports:
        fd = _lock(os.path.join(folder, f"port-{port}.lock"))
        if fd is None:
            continue
        if _bindable(port):
            return port, fd
        os.close(fd)
    raise NoGpus(
        f"no free rendezvous port in {ports.start}-{ports.stop - 1} (each held by a job, "
        f"or bound; locks in {folder})"
    )


def environment(n: int, environ=os.environ, share: int = 1) -> tuple[dict, list[int]]:
    """The command's environment and the lock descriptors it must inherit (`share`: how many
    jobs a device takes at once, the tier's jobs_per_gpu)."""
    env = dict(environ)
    env.pop(POOL, None)  # the job's own processes see their devices only
    env[JOB_GPUS] = str(n)  # what the job was given: it must use them (lengen.core.device)
    if n == 0:
        env["CUDA_VISIBLE_DEVICES"] = ""
        return env, []
    devices, fds = claim(n, pool(environ), lock_folder(environ), share=share)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    return env, fds


def with_port(command: list[str], env: dict, environ=os.environ) -> tuple[list[str], list[int]]:
    """The command with a rendezvous port of its own (MASTER_PORT; the DeepSpeed launcher's
    `--master_port`), and the descriptor holding it; as it is where it names its port itself."""
    if "--master_port" in command or any(a.startswith("--master_port=") for a in command):
        return command, []
    port, fd = claim_port(environ.get(LOCKS, LOCK_DIR))
    env["MASTER_PORT"] = str(port)
    if os.path.basename(command[0]) in LAUNCHERS:
        command = [command[0], "--master_port", str(port), *command[1:]]
    return command, [fd]


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """N and --share, wherever they stand before `--`, and the command after it."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument("n", type=int, help="GPUs the command gets (its rule's `gpu` resource)")
    share = "jobs a device takes at once (the tier's jobs_per_gpu; default 1)"
    parser.add_argument("--share", type=int, default=1, help=share)
    parser.usage = f"{parser.prog} N [--share K] -- COMMAND [ARG ...]"
    if "--" not in argv:
        parser.parse_known_args(argv)  # -h, or an error that names what is missing
        parser.error("give N (and --share K), then -- and the command")
    cut = argv.index("--")
    args, command = parser.parse_args(argv[:cut]), argv[cut + 1 :]
    if args.n < 0 or args.share < 1 or not command:
        parser.error("give N >= 0 (and --share >= 1), then -- and the command")
    return args, command


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: run COMMAND on N devices of its own (exec: the command takes this process's place)."""
    args, command = parse(sys.argv[1:] if argv is None else argv)
    env, fds = environment(args.n, share=args.share)
    if args.n > 1 or os.path.basename(command[0]) in LAUNCHERS:
        command, port_fds = with_port(command, env)
        fds += port_fds
    for fd in fds:
        os.set_inheritable(fd, True)  # held by the command (and what it starts) until it ends
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
