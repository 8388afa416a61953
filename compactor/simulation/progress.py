"""A progress bar on stderr while a simulation runs; plain lines when stderr is not a terminal."""

from __future__ import annotations

from typing import TextIO

WIDTH = 30


class Bar:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.phase: str | None = None
        self.shown = -1

    def update(self, phase: str, fraction: float) -> None:
        if phase != self.phase:
            self._finish_line()
            self.phase = phase
            self.shown = -1
        percent = int(max(0.0, min(1.0, fraction)) * 100)
        if percent == self.shown:
            return
        self.shown = percent
        if self.live:
            filled = WIDTH * percent // 100
            self.stream.write(f"\r{phase:<15} [{'#' * filled}{'.' * (WIDTH - filled)}] {percent:3d}%")
            self.stream.flush()
        elif percent == 100:
            self.stream.write(f"{phase}: done\n")
            self.stream.flush()

    def close(self) -> None:
        self._finish_line()

    def _finish_line(self) -> None:
        if self.live and self.phase is not None:
            self.stream.write("\n")
            self.stream.flush()
            self.phase = None
