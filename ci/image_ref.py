#!/usr/bin/env python3
"""Prints the launcher image reference the chart would run, from its values and a values file.

ci/image_ref.py charts/tpu-stack/values.yaml [values/v6e-16.yaml]
"""

from __future__ import annotations

import sys

import yaml


def merged_image(paths: list[str]) -> dict:
    image: dict = {}
    registry = ""
    for path in paths:
        with open(path) as f:
            values = yaml.safe_load(f) or {}
        image.update(values.get("ray", {}).get("image", {}) or {})
        registry = (values.get("global", {}) or {}).get("imageRegistry") or registry
    if registry:
        image["registry"] = registry
    return image


def main(paths: list[str]) -> int:
    image = merged_image(paths)
    ref = "/".join(x for x in (image.get("registry"), image["repository"]) if x)
    print(f"{ref}:{image['tag']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
