"""The notebook kernel that nbval starts inside the grader's sandbox: ipykernel without TCP.

With its sockets on ZeroMQ's ipc transport (nbval_plugin.py), ipykernel's one TCP socket left is
the pipe that forwards the output of forked children (IOPubThread's pipe, on 127.0.0.1). A sandbox
that allows unix sockets only makes libzmq abort there, so that pipe is off: a forked child's prints
are lost, which no check cell relies on.

    python -m minilm.course.sandboxed.kernel -f CONNECTION_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

from ipykernel import iostream, kernelapp

_init = iostream.IOPubThread.__init__


def _without_pipe(self, socket, pipe=False, **kwargs):
    _init(self, socket, pipe=False, **kwargs)


if __name__ == "__main__":
    if sys.path[0] in ("", str(Path.cwd())):  # as ipykernel_launcher: the notebook's folder is added back later
        del sys.path[0]
    iostream.IOPubThread.__init__ = _without_pipe
    kernelapp.launch_new_instance()
