"""What `submit --release` says when the client and the release's launcher image differ: a
job runs the image's launcher, so an updated client with a stale image (or the reverse) is
named before the job starts, with the way to make them one version."""

from __future__ import annotations

import pytest

from launcher.client.release.image_tag import image_tag_of, skew

pytestmark = pytest.mark.unit
REF = "us-east5-docker.pkg.dev/p/tpu-stack/launcher"


def test_the_tag_is_read_from_any_reference_form():
    assert image_tag_of(f"{REF}:0.1.0-3f2a9c1b7e0d") == "0.1.0-3f2a9c1b7e0d"
    assert image_tag_of(f"{REF}:0.1.0-3f2a@sha256:{'a' * 64}") == "0.1.0-3f2a"
    assert image_tag_of("localhost:5000/launcher:0.2.0") == "0.2.0"  # a port is not a tag
    assert image_tag_of(f"{REF}@sha256:{'a' * 64}") is None


def test_the_same_version_and_sources_say_nothing():
    assert skew(f"{REF}:0.1.0-3f2a9c1b7e0d", "0.1.0", None) is None
    assert skew(f"{REF}:0.1.0-3f2a9c1b7e0d", "0.1.0", "0.1.0-3f2a9c1b7e0d") is None
    assert skew(f"{REF}@sha256:{'a' * 64}", "0.1.0", None) is None  # no tag: nothing to read
    assert skew(f"{REF}:latest", "0.1.0", None) is None  # not a tag of ours


def test_another_version_is_named_with_both_ways_to_match():
    said = skew(f"{REF}:0.2.0-3f2a9c1b7e0d", "0.1.0", None)
    assert said and "tpu-launcher 0.1.0" in said and "version 0.2.0" in said
    assert "client of version 0.2.0" in said and "`tpu-launcher image`" in said
    assert "pip install tpu-launcher" not in said  # not on PyPI: a name anyone may take


def test_a_checkout_whose_sources_changed_since_the_image_was_built():
    said = skew(f"{REF}:0.1.0-3f2a9c1b7e0d", "0.1.0", "0.1.0-000000000000")
    assert said and "other sources than this client's" in said
