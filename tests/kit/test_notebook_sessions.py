"""Which notebook a cell's check grades, where the front end does not put it in the kernel: a real Jupyter server
that is asked (as servers before Jupyter Server 1.19 and the classic Notebook 6 server must be), Colab, and a
server that answers nothing useful.

The server test starts `jupyter server` (jupyter_server, the dev extra) and one kernel of its own, and grades
twice at once (the notebook from the kernel, the stubs beside it): about 2 s to start the server, 1 s the kernel,
6 s the notebook's grading on an idle 2-core machine.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import nbformat
import pytest

from grader.curriculum import BY_ID
from grader.student import jupyter, notebooks, sessions

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60
CHECK_TIMEOUT_S = 240


def _filled_notebook(folder: Path) -> Path:
    """01-attention.ipynb as a student who wrote the reference solution saved it, as the notebook tests make it."""
    exercise = BY_ID["attention"]
    notebook = notebooks.build(exercise, (REPO / "exercises" / exercise.file).read_text())
    stub_cell = next(c for c in notebook.cells if c.cell_type == "code" and "def attention" in c.source)
    stub_cell.source = (REPO / "solutions" / "attention.py").read_text()
    path = folder / notebooks.name_of(exercise)
    nbformat.write(notebook, path)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _api(url: str, token: str, method: str = "GET", body: object = None) -> object:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"token {token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


@contextmanager
def _jupyter_server(root: Path, runtime: Path, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """A `jupyter server` serving `root` on the loopback with a token, its runtime files in `runtime`: its URL and
    token; stopped (it stops its kernels) however the test ends."""
    token = secrets.token_hex(16)
    log = runtime.parent / "server.log"
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={_free_port()}", f"--ServerApp.root_dir={root}",
               f"--IdentityProvider.token={token}", "--ServerApp.terminals_enabled=False",
               "--allow-root"]  # CI containers run as root
    with log.open("w") as output:
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (files := list(runtime.glob("jpserver-*.json"))):
            assert server.poll() is None and time.monotonic() < deadline, f"no jupyter server: {log.read_text()}"
            time.sleep(0.05)
        url = json.loads(files[0].read_text())["url"]
        while True:  # its runtime file may come before it listens, on a busy machine
            try:
                _api(f"{url}api/status", token)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, f"no jupyter server: {log.read_text()}"
                time.sleep(0.1)
        yield url, token
    finally:
        server.terminate()  # it stops, shutting its kernels down
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.slow
def test_a_server_that_does_not_tell_the_kernel_is_asked_and_its_notebook_graded(tmp_path: Path):
    """A kernel whose environment and globals do not name its notebook (Jupyter Server before 1.19, Notebook 6)
    grades the notebook its server has it open as: full marks here, where `exercises/` (stubs) would score 0."""
    pytest.importorskip("jupyter_server", reason="jupyter_server (the dev extra) runs the server this test asks")
    root, runtime, state = tmp_path / "course", tmp_path / "runtime", tmp_path / "state"
    for folder in (root, runtime, state):
        folder.mkdir()
    path = _filled_notebook(root)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRADER_STATE_DIR": str(state), "PYTHONPATH": str(REPO),
           "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    env.pop("JPY_SESSION_NAME", None)
    outputs: list[str] = []
    with _jupyter_server(root, runtime, env) as (url, token):
        _check_in_a_kernel(url, token, path.name, runtime, outputs)
    text = "".join(outputs)
    assert f"grader check attention --suite public --submission {path}\n" in text, text
    # Full marks: the notebook was graded, not exercises/, whose stub scores 0 (test_reference_and_stubs).
    assert "10/10" in text and "Error" not in text and "cannot tell" not in text, text


def _check_in_a_kernel(url: str, token: str, notebook: str, runtime: Path, outputs: list[str]) -> None:
    """Open `notebook` in the server (a session and its kernel), leave the kernel as an older server does (no
    JPY_SESSION_NAME, hence no `__session__`), run `%grader check attention --suite public` there (the target,
    not the grading, is the point here), what it shows kept in `outputs`; then the kernel is killed (a shutdown
    through the server takes a second more)."""
    from jupyter_client import BlockingKernelClient

    session = _api(f"{url}api/sessions", token, "POST", {
        "path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": "python3"}})
    assert isinstance(session, dict)
    client = BlockingKernelClient(connection_file=str(runtime / f"kernel-{session['kernel']['id']}.json"))
    client.load_connection_file()
    client.start_channels()
    kernel_pid = None

    def keep(message: dict) -> None:
        content = message["content"]
        outputs.append(content.get("text", "") + str(content.get("data", {}).get("text/plain", ""))
                       + "\n".join(content.get("traceback", [])))

    try:
        client.wait_for_ready(timeout=START_TIMEOUT_S)
        forget = ("import os\nos.environ.pop('JPY_SESSION_NAME', None)\nglobals().pop('__session__', None)\n"
                  "print('kernel', os.getpid(), 'JPY_SESSION_NAME' in os.environ, '__session__' in globals())")
        client.execute_interactive(forget, output_hook=keep, timeout=START_TIMEOUT_S)
        said = re.search(r"kernel (\d+) False False", "".join(outputs))
        assert said, outputs
        kernel_pid = int(said.group(1))
        client.execute_interactive("%load_ext grader\n%grader check attention --suite public", output_hook=keep,
                                   timeout=CHECK_TIMEOUT_S)
    finally:
        client.stop_channels()
        if kernel_pid is not None:
            with suppress(ProcessLookupError):
                os.kill(kernel_pid, signal.SIGKILL)
        else:  # the server shuts it down
            with suppress(OSError):
                _api(f"{url}api/sessions/{session['id']}", token, "DELETE")


def test_colab_says_its_notebook_is_in_drive_and_how_to_name_it(monkeypatch):
    """Colab keeps the notebook in Google Drive and tells the kernel nothing: one line says where to find it."""
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py"])  # no connection file: no server to ask
    zmq_shell = type("ZMQInteractiveShell", (), {})
    colab_shell = type("Shell", (zmq_shell,), {})  # google.colab._shell.Shell, a kind of ipykernel's shell
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=colab_shell))
    assert jupyter._in_a_kernel()
    with pytest.raises(jupyter.CheckError) as raised:
        jupyter.grader_magic("check attention", {})
    line = str(raised.value)
    assert "\n" not in line and "Colab" in line and "Google Drive" in line and "drive.mount(" in line, line
    assert "%grader check attention --submission '/content/drive/MyDrive/Colab Notebooks/01-attention.ipynb'" in line


def test_a_submission_named_with_an_equals_sign_is_the_one_graded(monkeypatch, tmp_path: Path):
    """`%grader check attention --submission=lab.ipynb` grades lab.ipynb, as `--submission lab.ipynb` does: not
    "cannot tell which notebook", nor this notebook added after it (the last --submission wins)."""
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=type("ZMQInteractiveShell", (), {})))
    monkeypatch.setattr(jupyter, "this_notebook", lambda namespace: tmp_path / "this.ipynb")
    ran: list[list[str]] = []
    monkeypatch.setattr(jupyter, "_run", lambda arguments, show=True: (ran.append(arguments), (2, "stopped"))[1])
    lab = tmp_path / "lab.ipynb"
    with pytest.raises(jupyter.CheckError, match="stopped"):
        jupyter.grader_magic(f"check attention --submission={lab}", {})
    assert ran and ran[0][:4] == ["check", "attention", "--submission", str(lab)], ran
    assert ran[0].count("--submission") == 1, ran


class _Server(BaseHTTPRequestHandler):
    """A local server that answers `api/sessions` with `answer`: a sessions list, garbage, or nothing in time."""

    answer: ClassVar[bytes | None] = b""
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        if self.answer is None:
            time.sleep(3)  # longer than the client waits
            return
        if self.answer == b"redirect":
            self.send_response(302)
            self.send_header("Location", "/elsewhere/api/sessions")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args: object) -> None:
        pass


def test_a_server_that_answers_nothing_useful_means_cannot_tell(tmp_path: Path, monkeypatch):
    """Garbage, a refused connection, a server that hangs, a server elsewhere: never an exception, only None (the
    check then says how to name the notebook); a classic Notebook's answer is read; all in about a second."""
    kernel_id = "0123-abcd"
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / f"kernel-{kernel_id}.json").write_text("{}")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "lab.ipynb").write_text("{}")
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", str(runtime / f"kernel-{kernel_id}.json")])
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))  # no running kernel to ask
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"

    def only_server(name: str, **server: object) -> None:
        for old in runtime.glob("*server-*.json"):
            old.unlink()
        (runtime / name).write_text(json.dumps({"token": "t", "root_dir": str(tmp_path), **server}))

    try:
        started = time.monotonic()
        for answer in (b"not json", b'{"sessions": 1}', b'[{"kernel": 3}, 7, {"kernel": {"id": "0123-abcd"}}]',
                       b'[{"kernel": {"id": "0123-abcd"}, "path": ["a"]}]', b"redirect", None):
            _Server.answer = answer
            only_server("jpserver-1.json", url=url)
            assert sessions.asked_server(timeout=0.3) is None, answer
            if answer is not None:
                assert jupyter.this_notebook({}) is None, answer
        assert _Server.asked and "/elsewhere/api/sessions" not in _Server.asked  # the token is never sent on
        only_server("jpserver-2.json", url=f"http://127.0.0.1:{_free_port()}/")  # refused: nothing listens there
        assert sessions.asked_server(timeout=0.3) is None
        only_server("jpserver-3.json", url="http://10.1.2.3:1/", hostname="10.1.2.3")  # not this machine: not asked
        assert sessions.asked_server(timeout=0.3) is None
        (runtime / "jpserver-4.json").write_text("{not json")
        assert sessions.asked_server(timeout=0.3) is None

        # A classic Notebook's nbserver file (notebook_dir) and its sessions (the path under "notebook"), and a
        # server listening on every address (its url names the machine), asked on the loopback.
        listed = [{"kernel": {"id": "other"}, "notebook": {"path": "x.ipynb"}},
                  {"kernel": {"id": kernel_id}, "notebook": {"path": "notebooks/lab.ipynb"}}]
        _Server.answer = json.dumps(listed).encode()
        only_server("nbserver-5.json", url=f"http://a-machine-name:{httpd.server_address[1]}/", hostname="0.0.0.0",
                    port=httpd.server_address[1], notebook_dir=str(tmp_path), root_dir=None)
        assert jupyter.this_notebook({}) == tmp_path / "notebooks" / "lab.ipynb"
        monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", f"--f={runtime / f'kernel-{kernel_id}.json'}"])
        assert jupyter.this_notebook({}) == tmp_path / "notebooks" / "lab.ipynb"  # as VS Code starts a kernel
        assert time.monotonic() - started < 2
    finally:
        httpd.shutdown()
        httpd.server_close()
