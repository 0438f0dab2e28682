"""`sessions` asks the Jupyter server that started this kernel which notebook it runs (see `jupyter`).

Jupyter Server from 1.19 tells its kernels (JPY_SESSION_NAME); older servers (earlier Jupyter Server, the
classic Notebook 6) say nothing but know: each wrote its URL, token and root folder in Jupyter's runtime folder
(`jpserver-*.json`, `nbserver-*.json`), and its `api/sessions` names the notebook of every kernel it started,
known here by the id in the kernel's connection file name. Only servers on this machine are asked, briefly,
never through a proxy or a redirect (the token goes to that server only); whatever goes wrong means "cannot tell".
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import ssl
import sys
import urllib.parse
import urllib.request
from pathlib import Path

# Where they say nothing, the Jupyter server that started the kernel is asked, on this machine, for so long.
SERVER_TIMEOUT_S = 1.0
SERVER_FILES = ("jpserver-*.json", "nbserver-*.json")  # Jupyter Server; classic Notebook (6 and before)
EVERY_ADDRESS = ("0.0.0.0", "::", "")  # a server listening on every address answers on the loopback too


def asked_server(timeout: float = SERVER_TIMEOUT_S) -> Path | None:
    """The notebook that holds this kernel, as the Jupyter server that started it says (`api/sessions`), for the
    servers that do not put it in the kernel's environment (before Jupyter Server 1.19, classic Notebook): None
    where it cannot tell, whatever went wrong. Only servers on this machine are asked, for `timeout` s each."""
    try:
        connection_file = Path(_connection_file())
        kernel = re.fullmatch(r"kernel-(.+)\.json", connection_file.name)
        if kernel is None:
            return None
        for server in _servers(connection_file.parent):
            found = _session_path(server, kernel.group(1), timeout)
            if found is not None:
                return found
    except Exception:  # whatever it is, the answer is "cannot tell", and the caller says how to name the notebook
        return None
    return None


def _connection_file() -> str:
    """ipykernel's connection file (`.../kernel-<id>.json`), from the running kernel or its command line
    (`-f FILE`, as Jupyter starts it; `--f=FILE`, as VS Code does)."""
    try:
        import ipykernel

        return str(ipykernel.get_connection_file())
    except Exception:
        pass
    for index, argument in enumerate(sys.argv):
        if argument in ("-f", "--f") and index + 1 < len(sys.argv):
            return sys.argv[index + 1]
        for prefix in ("-f=", "--f="):
            if argument.startswith(prefix):
                return argument.removeprefix(prefix)
    return ""


def _servers(connection_folder: Path) -> list[dict[str, object]]:
    """What the running Jupyter servers wrote of themselves (url, token, root folder) in the runtime folder, the
    one holding the kernel's connection file first; the server that started this process first among them."""
    folders = [connection_folder]
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        folders.append(Path(jupyter_runtime_dir()))
    except Exception:
        pass
    files: dict[Path, None] = {}
    for folder in folders:
        for pattern in SERVER_FILES:
            files.update(dict.fromkeys(path.resolve() for path in sorted(folder.glob(pattern))))
    servers = []
    for path in files:
        try:
            server = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(server, dict):
            servers.append(server)
    parent = os.getppid()
    return sorted(servers, key=lambda server: server.get("pid") != parent)


def _loopback(host: str | None) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _server_url(server: dict[str, object]) -> str | None:
    """The server's URL on the loopback (`http://localhost:8888/base/`), or None for a server this machine
    cannot reach there (another address, a Unix socket)."""
    url = urllib.parse.urlsplit(str(server.get("url") or ""))
    if server.get("sock") or url.scheme not in ("http", "https"):
        return None
    if not _loopback(url.hostname):
        listens_on = str(server.get("hostname", "?"))
        port = server.get("port") or url.port
        if not (_loopback(listens_on) or listens_on in EVERY_ADDRESS) or not isinstance(port, int):
            return None
        url = url._replace(netloc=f"127.0.0.1:{port}")
    return url._replace(query="", fragment="", path=url.path.rstrip("/") + "/").geturl()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:  # the token goes to this server only
        return None


def _session_path(server: dict[str, object], kernel_id: str, timeout: float) -> Path | None:
    """The notebook of the server's session that holds kernel `kernel_id`, under the server's root folder."""
    try:
        url = _server_url(server)
        root = server.get("root_dir") or server.get("notebook_dir")
        if url is None or not isinstance(root, str):
            return None
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({}), _NoRedirect()]
        if url.startswith("https:"):
            tls = ssl.create_default_context()
            tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # the loopback, with the server's own cert
            handlers.append(urllib.request.HTTPSHandler(context=tls))
        opener = urllib.request.build_opener(*handlers)
        token = {"Authorization": f"token {server.get('token', '')}"}
        request = urllib.request.Request(url + "api/sessions", headers=token)
        with opener.open(request, timeout=timeout) as response:
            sessions = json.loads(response.read(1 << 22))
        for session in sessions if isinstance(sessions, list) else []:
            if isinstance(session, dict) and (session.get("kernel") or {}).get("id") == kernel_id:
                path = session.get("path") or (session.get("notebook") or {}).get("path")
                return Path(root).expanduser() / path.lstrip("/") if isinstance(path, str) and path else None
    except Exception:
        return None
    return None
