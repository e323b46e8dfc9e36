"""What a job's processes repeat off the training thread until told to stop."""

from __future__ import annotations

import threading
from collections.abc import Callable


def every(seconds: float, action: Callable[[], None], name: str) -> threading.Event:
    """Runs `action` every `seconds` on a daemon thread named `name`; setting the returned event
    stops it."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            action()

    threading.Thread(target=loop, name=name, daemon=True).start()
    return stop
