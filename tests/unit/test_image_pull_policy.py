"""``ccc:cluster:image_policy:pull`` read (``ccc_images.pull_mode``) and the image ids the
``.deploy`` shows when a re-pulled tag recreates a container (``ccc_swap.image_update``).
The pulls themselves run against a real test dockerd: tests/integration/test_image_repull.py."""

import pytest

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_images  # noqa: E402
import ccc_swap  # noqa: E402


@pytest.mark.parametrize("policy, mode", [
    (None, "missing"), ({}, "missing"), ({"pull": True}, "missing"), ({"pull": "missing"}, "missing"),
    ({"pull": "always"}, "always"), ({"pull": False}, "never"), ({"pull": "never"}, "never"),
])
def test_pull_modes(policy, mode):
    assert ccc_images.pull_mode(policy) == mode


@pytest.mark.parametrize("value", ["sometimes", 1, ["always"], None])
def test_a_bad_pull_mode_names_the_choices(value):
    with pytest.raises(ValueError, match=r"ccc:cluster:image_policy:pull must be missing, always or never"):
        ccc_images.pull_mode({"pull": value})


def test_an_image_update_is_told_in_short_ids_and_only_when_the_id_differs():
    old, new = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert ccc_swap.image_update({"Image": old}, new) == {"old": "a" * 12, "new": "b" * 12}
    assert ccc_swap.image_update({"Image": new}, new) is None
    assert ccc_swap.image_update({"Image": old}, None) is None  # policy not always: never compared
    assert ccc_swap.image_update(None, new) is None
