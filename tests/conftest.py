"""Shared test set-up. absl flags are marked parsed so pytest's own argv never reaches absl."""

from __future__ import annotations

from pathlib import Path

from absl import flags

import launcher.train  # noqa: F401  (defines the launcher's flags before they are marked)

REPO = Path(__file__).resolve().parents[1]
flags.FLAGS.mark_as_parsed()
