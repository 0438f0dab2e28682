"""`confine` locks a freshly forked worker down, and proves at sandbox start that the lock holds.

Runs inside the sandbox (standard library and libseccomp's own Python bindings, `pyseccomp`).
Every worker, right after the zygote forks it and before any submission code runs, loads a
seccomp filter that refuses what grading never needs and an attack always does: creating
processes (fork, exec), tracing or reading other processes (ptrace, process_vm_*), signalling
any process but itself, mounting and namespaces, sockets, io_uring (whose requests bypass
seccomp), memory no limit counts (memfd, System V shared memory, extended attributes), IPC
objects that would outlive it, kernel keyrings, BPF and perf events. Threads stay allowed: torch needs them.

`self_test` runs once per sandbox, before the zygote imports torch: a child confined exactly
like a worker tries each thing the sandbox must refuse, and the zygote reports what happened.
The trusted side uses the sandbox only when every attempt was refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib.util
import json
import os
import socket
from collections.abc import Callable

from .shared import libseccomp
from .shared.libseccomp import Unavailable

CLONE_THREAD = 0x00010000
F_SETOWN, F_SETOWN_EX = 8, 15  # fcntl: who gets SIGIO (or any signal, with F_SETSIG) when a file is ready
_MS_REMOUNT = 32
_MS_BIND = 4096
_PTRACE_ATTACH = 16

DENIED = (
    "fork", "vfork", "execve", "execveat",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "open_by_handle_at", "name_to_handle_at",
    "socket", "socketpair",
    # Memory no limit counts: a memfd's pages, and extended attributes on the scratch tmpfs (not in its size).
    "memfd_create", "memfd_secret", "setxattr", "lsetxattr", "fsetxattr",
    # System V IPC and POSIX message queues: memory attached nowhere, and objects that outlive the worker
    # in the sandbox's IPC namespace, where the next submission would find them.
    "shmget", "msgget", "semget", "mq_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl",
)


def confine_worker() -> None:
    """Load the worker's seccomp filter into this (single-threaded, freshly forked) process."""
    seccomp = libseccomp.load()
    me = os.getpid()
    deny = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED:
        with contextlib.suppress(RuntimeError, ValueError, OSError):  # a call this kernel's architecture lacks
            rules.add_rule(deny, name)
    # A process is a clone without CLONE_THREAD; clone3 hides its flags in memory seccomp cannot read,
    # so it answers "not implemented" and the C library falls back to clone.
    rules.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.add_rule(deny, "kill", seccomp.Arg(0, seccomp.NE, me))
    # A file's owner is signalled by the kernel when the file is ready (O_ASYNC): a kill by other means.
    for command in (F_SETOWN, F_SETOWN_EX):
        for call in ("fcntl", "fcntl64"):
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                rules.add_rule(deny, call, seccomp.Arg(1, seccomp.EQ, command))
    rules.add_rule(deny, "tgkill", seccomp.Arg(0, seccomp.NE, me))
    rules.load()


def fence(readable: list[str], writable: list[str]) -> str | None:
    """Landlock: from now on this process and its children open files only beneath `readable` (to read or
    run) and `writable` (for anything). None once it holds, else why it could not be set up."""
    try:
        import landlock
        from landlock import FSAccess

        ruleset = landlock.Ruleset()  # handles every access right this kernel's Landlock knows
        read = FSAccess.READ_FILE | FSAccess.EXECUTE
        for paths, rights in ((readable, read | FSAccess.READ_DIR), (writable, ruleset.restrict_rules)):
            for path in paths:
                if os.path.exists(path):
                    ruleset.allow(path, rules=rights if os.path.isdir(path) else rights & FSAccess.all_file())
        ruleset.apply()
    except Exception as error:  # ImportError, or the library's errors for each syscall
        return f"Landlock could not be set up: {type(error).__name__}: {error}"
    return None


def self_test(python_installation: str, *, secrets: list[str] = (), grader: int | None = None) -> dict[str, str]:
    """Fork a child confined like a worker; it tries what must be refused. Returns attempt -> outcome.

    An outcome is "refused (<errno name>)" or "ALLOWED". `secrets` are folders it must not read, `grader`
    the trusted process, whose environment it must not read. Run before torch is imported (a fork is cheap then).
    """
    read, write = os.pipe()
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        outcomes: dict[str, str] = {}
        try:
            os.close(read)
            confine_worker()
            outcomes = _attempts(zygote, python_installation, list(secrets), grader)
        except BaseException as error:  # whatever it is, the trusted side must hear of it
            outcomes = {"confine": f"ALLOWED (the self-test itself failed: {type(error).__name__}: {error})"}
        finally:
            os.write(write, json.dumps(outcomes).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    try:
        outcomes = json.loads(data)
    except ValueError:
        outcomes = {"self-test": "ALLOWED (the self-test child died without an answer)"}
    return outcomes


def _attempts(zygote: int, python_installation: str, secrets: list[str], grader: int | None) -> dict[str, str]:
    libc = ctypes.CDLL(None, use_errno=True)
    probe = os.path.join(python_installation, f".grader-self-test-{os.getpid()}")

    def remount() -> None:
        target = python_installation.encode()
        for flags in (_MS_REMOUNT | _MS_BIND, _MS_REMOUNT):
            if libc.mount(None, target, None, flags, None) == 0:
                return
        raise OSError(ctypes.get_errno(), "mount")

    def write_installation() -> None:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)

    def zygote_memory() -> None:
        os.close(os.open(f"/proc/{zygote}/mem", os.O_RDONLY))

    def trace_zygote() -> None:
        if libc.ptrace(_PTRACE_ATTACH, zygote, None, None) != 0:
            raise OSError(ctypes.get_errno(), "ptrace")

    def network_socket() -> None:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()

    def new_process() -> None:
        if os.fork() == 0:
            os._exit(0)
        os.wait()

    def signal_zygote() -> None:
        os.kill(zygote, 0)

    def signal_zygote_through_a_file() -> None:
        import fcntl

        read, write = os.pipe()
        try:
            fcntl.fcntl(read, F_SETOWN, zygote)
        finally:
            os.close(read)
            os.close(write)

    def read_grader_environment() -> None:
        """The grader's environment, or that of any process above it (a shell holds the same secrets)."""
        pid, refusal = grader, None
        while pid and pid > 1:
            try:
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    environ.read(1)
                return
            except OSError as error:
                refusal = refusal or error
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
                    pid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
        raise refusal or PermissionError(errno.EPERM, "no process above the grader")

    def read(path: str) -> Callable[[], None]:
        def attempt() -> None:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as file:
                    file.read(1)

        return attempt

    attempts = {
        "remount the Python installation read-write": remount,
        "write into the Python installation": write_installation,
        "open the zygote's /proc/PID/mem": zygote_memory,
        "ptrace the zygote": trace_zygote,
        "open a network socket": network_socket,
        "start a process": new_process,
        "signal the zygote": signal_zygote,
        "signal the zygote through a file (F_SETOWN)": signal_zygote_through_a_file,
        **({"read the grader's environment": read_grader_environment} if grader else {}),
        **{f"read {folder}": read(folder) for folder in secrets},
    }
    outcomes = {}
    for what, attempt in attempts.items():
        try:
            attempt()
            outcomes[what] = "ALLOWED"
        except OSError as error:
            outcomes[what] = f"refused ({errno.errorcode.get(error.errno or 0, error.errno)})"
    return outcomes


def installation_of(module: str) -> str:
    """The folder that holds `module` (site-packages, for torch): where planted code would be imported from."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise Unavailable(f"{module} is not installed")
    return os.path.dirname(os.path.dirname(os.path.realpath(spec.origin)))
