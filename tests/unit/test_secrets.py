"""ccc_secrets: reading ccc:secrets from pillar with errors that name the key and never the value,
refusing ciphertext the renderer left behind, and masking secret values in texts; and the tests'
own leak check (tests/support/secrets.py), which must name the leak without printing it."""

import pytest

import ccc_secrets
from support import site  # noqa: F401  (puts _utils/ on the import path)
from support.secrets import assert_no_secret

CIPHERTEXT = "-----BEGIN PGP MESSAGE-----\n\nhQEMA5S0...\n-----END PGP MESSAGE-----"
PILLAR = {"ccc": {
    "cluster": {"name": "lab"},
    "secrets": {
        "registries": {"registry.example.org": {"username": "robot", "password": "s3cr3t-registry-pw"}},
        "frp": {"token": "frp-token-123"},
        "basic_auth": {"monitor": {"user": "mon-user", "password": "mon-pw"},
                       "metrics": {"user": "met-user", "password": ""}},
        "swarm": {"join_token": CIPHERTEXT},
        "portainer": {"agent_secret": 12345},
        "extra": ["listed-secret"],
    },
}}


def test_lookup_returns_the_decrypted_value():
    assert ccc_secrets.lookup(PILLAR, "registries", "registry.example.org", "password") == "s3cr3t-registry-pw"
    assert ccc_secrets.lookup(PILLAR, "frp", "token") == "frp-token-123"


def test_a_missing_secret_names_the_full_key_and_the_missing_part():
    with pytest.raises(KeyError) as error:
        ccc_secrets.lookup(PILLAR, "registries", "other.example.org", "password")
    message = str(error.value)
    assert message.startswith("secret ccc:secrets:registries:other.example.org:password is not in this node's pillar")
    assert "(ccc:secrets:registries:other.example.org is missing" in message


def test_no_secrets_pillar_at_all_is_a_clear_missing_key():
    with pytest.raises(KeyError, match="ccc:secrets is missing"):
        ccc_secrets.lookup({"ccc": {"cluster": {}}}, "frp", "token")


def test_leftover_ciphertext_is_refused_as_not_decrypted_on_this_node():
    with pytest.raises(ValueError) as error:
        ccc_secrets.lookup(PILLAR, "swarm", "join_token")
    assert str(error.value).startswith("secret ccc:secrets:swarm:join_token could not be decrypted on this node (gpg_keydir")
    assert "BEGIN PGP" not in str(error.value)


def test_wrong_types_and_empty_values_name_the_key_never_the_value():
    with pytest.raises(ValueError) as error:
        ccc_secrets.lookup(PILLAR, "portainer", "agent_secret")
    assert str(error.value) == "secret ccc:secrets:portainer:agent_secret must be a string, not int"
    assert "12345" not in str(error.value)
    with pytest.raises(ValueError, match=r"^secret ccc:secrets:basic_auth:metrics:password is empty$"):
        ccc_secrets.lookup(PILLAR, "basic_auth", "metrics", "password")
    with pytest.raises(ValueError, match="must be a string, not dict"):
        ccc_secrets.lookup(PILLAR, "basic_auth", "monitor")
    with pytest.raises(ValueError, match="is binary data"):
        ccc_secrets.check_value("ccc:secrets:x", b"raw")


def test_is_ciphertext_spots_armor_in_text_and_bytes():
    assert ccc_secrets.is_ciphertext(CIPHERTEXT) and ccc_secrets.is_ciphertext(CIPHERTEXT.encode())
    assert not ccc_secrets.is_ciphertext("plain") and not ccc_secrets.is_ciphertext(None)


def test_values_lists_every_secret_string_longest_first():
    assert ccc_secrets.values(PILLAR) == [
        CIPHERTEXT, "s3cr3t-registry-pw", "frp-token-123", "listed-secret", "met-user", "mon-user", "mon-pw", "robot"]
    assert ccc_secrets.values({}) == [] and ccc_secrets.values(None) == []
    assert ccc_secrets.values({"ccc": "not a mapping"}) == []


def test_mask_hides_every_occurrence_and_secrets_inside_other_secrets():
    error = ("Error response from daemon: login to registry.example.org as robot with s3cr3t-registry-pw failed;"
             " retry with s3cr3t-registry-pw")
    masked = ccc_secrets.mask(error, ccc_secrets.values(PILLAR))
    assert masked == "Error response from daemon: login to registry.example.org as *** with *** failed; retry with ***"
    # A short secret is masked wherever it occurs, inside words too (masking errs on the safe side).
    assert ccc_secrets.mask("daemon", ["mon"]) == "dae***"
    # "pw" alone is a secret here: the longer one that contains it is still masked whole.
    assert ccc_secrets.mask("token=abc-pw", ["pw", "abc-pw"]) == "token=***"
    assert ccc_secrets.mask("", ["x"]) == "" and ccc_secrets.mask(None, ["x"]) is None
    assert ccc_secrets.mask("nothing to hide", ["", None]) == "nothing to hide"


def test_leak_check_names_text_and_offset_without_the_secret():
    texts = {"state output": "ok", "minion.log": "user=robot password=s3cr3t-registry-pw end"}
    with pytest.raises(AssertionError) as error:
        assert_no_secret(texts, ["s3cr3t-registry-pw", "robot"])
    message = str(error.value)
    assert "secret #0 (18 chars) in minion.log at offset 20" in message
    assert "secret #1 (5 chars) in minion.log at offset 5" in message
    assert "s3cr3t" not in message and "robot" not in message
    assert "password=<SECRET> end" in message
    assert_no_secret(texts, ["absent", ""])
    assert_no_secret([b"bytes are decoded"], ["absent"])
    with pytest.raises(AssertionError, match=r"in text #1 at offset 0"):
        assert_no_secret(["clean", b"robot"], ["robot"])
