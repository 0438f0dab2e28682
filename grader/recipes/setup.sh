#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image, with this bundle
# unpacked in /autograder/source. Written by `grader release --autograder`; see docs/gradescope.md.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
apt-get update
# bubblewrap isolates each submission. Some containers forbid the user namespaces it needs; a root
# grader then runs the submission as uid 65534 instead (the `user` tier) and says so in its output.
apt-get install -y --no-install-recommends bubblewrap python3-pip

# Images on Ubuntu 24.04 mark the system Python as externally managed; this image is the grader's
# alone. An older pip ignores the variable.
export PIP_BREAK_SYSTEM_PACKAGES=1
# The pinned CPU build of torch first: PyPI's torch would pull several GB of CUDA libraries.
python3 -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
# Editable: the grader finds its hidden tests and the solutions next to its own files.
python3 -m pip install -e /autograder/source

# The hidden tests and the solutions are secrets: only root may read them. The sandboxed worker
# needs nothing from this folder (the grader stages what it runs elsewhere) ...
chmod -R go-rwx /autograder/source
# ... but it runs as uid 65534, which must be able to cross the folders above Python.
python3 - <<'PY'
import os, stat, sys
for path in {sys.base_prefix, sys.prefix}:
    folder = os.path.realpath(path)
    while folder != "/":
        folder = os.path.dirname(folder)
        mode = os.stat(folder).st_mode
        if not mode & stat.S_IXOTH:
            print(f"chmod o+x {folder} (so that uid 65534 can reach Python)")
            os.chmod(folder, stat.S_IMODE(mode) | stat.S_IXOTH)
PY
