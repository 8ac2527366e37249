"""A user's FRP basic-auth values may not carry ``{{``/``}}``: frpc expands those in its config (where
docker-gen pastes the labels), so ``pass: "{{ .Envs.FRPC_AUTH_TOKEN }}"`` would publish the cluster's
FRP token as that user's password, and a stray brace would break frpc's config for every user.
The settings check refuses them with a message that names the key, never the password."""

import pytest

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_schema  # noqa: E402

STACK = "ana-main"


def problems(http):
    return ccc_schema.validate_user_settings({"FRP_PORTS": {"HTTP": [dict({"port": 8888, "subdomain": "ana"}, **http)]}},
                                             STACK, {})


@pytest.mark.parametrize("password", ["{{ .Envs.FRPC_AUTH_TOKEN }}", "abc}}def", "x{{y"])
def test_a_password_with_template_braces_is_refused_without_showing_it(password):
    found = problems({"pass": password})
    assert found == ["FRP_PORTS.HTTP: 'pass' of subdomain 'ana' must not contain '{{' or '}}' "
                     "(the FRP client reads them as a template)"]
    assert password not in " ".join(found)


def test_ordinary_passwords_with_single_braces_pass():
    assert problems({"pass": "p{a}ss-w0rd", "user": "ana"}) == []


def test_a_user_name_with_braces_never_reaches_the_labels():
    assert problems({"pass": "ok-pass", "user": "{{x}}"})  # refused (by the name pattern first)
