#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image, with this bundle
# unpacked in /autograder/source. Written by `grader release --autograder`; see docs/gradescope.md.
# For a rehearsal on another machine: AUTOGRADER_ROOT moves /autograder, and GRADER_SETUP_SKIP_SYSTEM=1
# skips only the system's part (apt-get and the torch download), for a machine that has bubblewrap,
# and the pinned torch in the `python3` first on PATH (checked: without it this stops, saying how to
# install it). Everything else runs as it does on Gradescope.
set -euo pipefail

root="${AUTOGRADER_ROOT:-/autograder}"
source="$root/source"

# Images on Ubuntu 24.04 mark the system Python as externally managed; this image is the grader's
# alone. An older pip ignores the variable.
export PIP_BREAK_SYSTEM_PACKAGES=1 OMP_NUM_THREADS=1 NO_COLOR=1

# The torch the kit is graded with: the version of the install line below.
torch_pin=2.13.0

if [ "${GRADER_SETUP_SKIP_SYSTEM:-}" = 1 ]; then
    echo "GRADER_SETUP_SKIP_SYSTEM=1: bubblewrap and pip are taken as installed, torch $torch_pin is checked (a rehearsal)"
    python="$(command -v python3 || echo python3)"
    found="$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)" || found=""
    case "$found" in
        "$torch_pin" | "$torch_pin"+*) ;;
        *) echo "setup.sh: torch $torch_pin is needed in $python, which has ${found:+torch }${found:-no torch};" \
                "install it first: $(printf %q "$python") -m pip install torch==$torch_pin" \
                "--index-url https://download.pytorch.org/whl/cpu" >&2
           exit 1 ;;
    esac
else
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # bubblewrap isolates each submission. Some containers forbid the user namespaces it needs; a root
    # grader then runs the submission as uid 65534 instead (the `user` tier) and says so in its output.
    apt-get install -y --no-install-recommends bubblewrap python3-pip
    # The pinned CPU build of torch first: PyPI's torch would pull several GB of CUDA libraries.
    python3 -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
fi
# Editable: the grader finds its hidden tests and the solutions next to its own files. The pin again, so
# that pip keeps the torch above rather than resolving a newer one for the kit's `torch>=2.10`.
python3 -m pip install -e "$source" "torch==$torch_pin"

# The hidden tests and the solutions are secrets: only root may read them. The sandboxed worker
# needs nothing from this folder (the grader stages what it runs elsewhere, with modes of its own) ...
chmod -R go-rwx "$source"
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

# A first grading, here in the image's build log: the reference's `attention` must get full marks in a
# sandbox. Where nothing can isolate a submission the grader refuses (exit 2, the reason on stderr) and
# every student's submission would be refused too, so the image is not built.
cd "$source"
python3 -m grader check attention --submission "$source/solutions" --fail-under 100
