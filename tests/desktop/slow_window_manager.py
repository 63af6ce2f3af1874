"""A window manager that claims the screen at once but serves requests only after a pause (argv[1] seconds),
as openbox does while it starts on a loaded machine (it grabs keys and buttons after claiming the screen).
It writes a file (argv[2]) when it starts serving, then answers `_NET_REQUEST_FRAME_EXTENTS` until killed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from Xlib import X, Xatom
from Xlib import display as xdisplay


def main() -> None:
    pause, serving = float(sys.argv[1]), Path(sys.argv[2])
    dpy = xdisplay.Display()
    root = dpy.screen().root
    root.change_attributes(event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
    check = root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
    atom = dpy.intern_atom("_NET_SUPPORTING_WM_CHECK")
    root.change_property(atom, Xatom.WINDOW, 32, [check.id])
    check.change_property(atom, Xatom.WINDOW, 32, [check.id])
    dpy.sync()
    time.sleep(pause)  # starting up: requests wait in the queue
    request, extents = dpy.intern_atom("_NET_REQUEST_FRAME_EXTENTS"), dpy.intern_atom("_NET_FRAME_EXTENTS")
    serving.write_text(str(time.monotonic()))
    while True:
        event = dpy.next_event()
        if event.type == X.ClientMessage and event.client_type == request:
            event.window.change_property(extents, Xatom.CARDINAL, 32, [0, 0, 0, 0])
            dpy.flush()


if __name__ == "__main__":
    main()
