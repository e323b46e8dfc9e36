"""The project's own corpora, shipped in the package (the workstation's and the image's alike):
`data prepare` with no SOURCE prepares one of them."""

from pathlib import Path

TINY = Path(__file__).parent / "tiny"  # a corpus
TINY_SFT = Path(__file__).parent / "tiny-sft"  # an instruction set (with --fields)


def shipped(instructions: bool) -> Path:
    return TINY_SFT if instructions else TINY
