"""The log lines of a container's problem in ``~/.containers/<STACK>.deploy`` are no oracle, end
to end through `salt-call --local state.apply containers` on a real (private) dockerd.

A compute container never receives the node's secrets (the GPG pillar, ``ccc:secrets``), so a
guess it prints that equals one is shown as printed: masking it would answer "is this a
secret?". What the container WAS given and redaction hides (its admin's ``EXTRA_ENVS`` token,
its FRP password) is masked, also when escapes or control characters are inside it (masked in
the normal form, what a terminal shows). And a boot status file the user writes does not make
every apply read the log again: a changed status reuses the lines read before, with their time."""

import json
import pathlib
import time

import pytest

from support.site import SaltNode, sample_ccc

pytestmark = pytest.mark.docker

STACK, EMAIL = "ana-main", "ana.novak@example.org"
QUIET_STACK, QUIET_EMAIL = "bor-main", "bor.kralj@example.org"
ORACLE_IMAGE = "vicoslab/ccc:oracle-test"  # within the sample site's image policy
GIVEN = "hf_given_token_5e2a"  # the admin's EXTRA_ENVS value for this container
FRP_PASSWORD = "change-me"  # the sample site's FRP basic-auth password of ana-main
TIMEOUT = 60


@pytest.fixture
def node1(tmp_path, clean_node1, storage):
    salt = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage)
    salt.client = clean_node1.client()
    return salt


def cluster_secret(node):
    """Two values of the site's GPG pillar as this node decrypts them (a user and its password)."""
    shown, _ = node.salt_call("pillar.item", "ccc:secrets:basic_auth:monitor", "unmask=True")
    monitor = shown["ccc:secrets:basic_auth:monitor"]
    return monitor["user"], monitor["password"]


def oracle_image(client, guess):
    """An image whose entrypoint prints the guess, other secret-looking text and the values the
    container was given (whole, and split by escapes and control characters), then exits 1."""
    head, tail = GIVEN[:5], GIVEN[5:]
    script = "; ".join([
        'echo "given: $HF_TOKEN"',
        f"printf 'ansi: {head}\\033[1;31m{tail}\\033[0m\\n'",
        f"printf 'nul: {head}\\000{tail}\\007\\n'",
        f"printf 'backspace: {head}X\\b{tail}\\n'",
        f"printf 'return: %s\\rreturn: %s\\n' ----- \"$HF_TOKEN\"",
        f"printf 'zero-width: {head}\\342\\200\\213{tail}\\n'",
        f"echo 'frp: {FRP_PASSWORD}'",
        f"echo 'guess: admin {guess[0]} {guess[1]}'",
        "echo 'other: password=hunter2-not-given token=ghp_notgiven0123456789'",
        "exit 1",
    ])
    made = client.api.create_container("ccc-test/tiny:1")
    try:
        repository, tag = ORACLE_IMAGE.split(":")
        client.api.commit(made["Id"], repository=repository, tag=tag,
                          changes=[f"ENTRYPOINT {json.dumps(['/bin/sh', '-c', script])}"])
    finally:
        client.api.remove_container(made["Id"])


def settings_folder(storage, email):
    return pathlib.Path(storage) / "shared" / "user_data" / email / "container-settings"


def wait_for(predicate, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def test_a_guess_is_shown_as_printed_and_given_values_are_masked_in_every_form(node1, storage):
    guess = cluster_secret(node1)
    assert all(len(value) >= 8 for value in guess)
    oracle_image(node1.client, guess)
    try:
        containers = sample_ccc("node1")["containers"]
        ana = next(entry for entry in containers if entry["STACK_NAME"] == STACK)
        ana.update(CONTAINER_IMAGE=ORACLE_IMAGE, EXTRA_ENVS={"HF_TOKEN": GIVEN})
        node1.write_pillar({"containers": containers})
        _, code = node1.apply(f'pillar={{"containers": "{STACK}"}}')
        assert code == 0
        # Docker restarts it: once it crashed, the next apply reports it with its log
        assert wait_for(lambda: node1.client.api.inspect_container(STACK)["RestartCount"] >= 1)
        results, code = node1.apply(f'pillar={{"containers": "{STACK}"}}', check=False)
        report = (settings_folder(storage, EMAIL) / f"{STACK}.deploy").read_text()
        assert "\nproblem: it " in report and "last log lines (newest last):\n" in report, report
        for line in ("given: ***", "ansi: ***", "nul: ***", "backspace: ***", "return: ***", "zero-width: ***",
                     "frp: ***"):
            assert f"\n  | {line}\n" in report, (line, report)
        # Not given to the container: shown as printed, so the report tells nothing about them.
        assert f"\n  | guess: admin {guess[0]} {guess[1]}\n" in report
        assert "\n  | other: password=hunter2-not-given token=ghp_notgiven0123456789\n" in report
        assert GIVEN not in report and FRP_PASSWORD not in report
        # the admins' state output says what is wrong, never a log line
        assert guess[1] not in json.dumps(results) and GIVEN not in json.dumps(results)
    finally:
        node1.client.api.remove_container(STACK, force=True)
        node1.client.api.remove_image(ORACLE_IMAGE, force=True)


def test_a_changing_boot_status_does_not_read_the_log_on_every_apply(node1, storage):
    select = f'pillar={{"containers": "{QUIET_STACK}"}}'
    assert node1.apply(select)[1] == 0
    folder = settings_folder(storage, QUIET_EMAIL)
    report, status = folder / f"{QUIET_STACK}.deploy", folder / f"{QUIET_STACK}.status"

    def say(text):  # a line on the container's log, as its programs print them
        node1.client.containers.get(QUIET_STACK).exec_run(["/bin/sh", "-c", f"echo {text} > /proc/1/fd/1"])
        assert wait_for(lambda: text.encode() in node1.client.api.logs(QUIET_STACK))

    say("boot-output-first")
    status.write_text("booting 9\n")
    assert node1.apply(select)[1] == 0
    first = report.read_text()
    assert "problem: its boot keeps failing: the image reports boot attempt 9" in first
    assert "last log lines (newest last):\n  | boot-output-first\n" in first

    say("printed-after-the-first-report")
    for line in ("booting 10\n", "failed boot - running with last known working ENVs\n", "booting 11\n"):
        status.write_text(line)
        assert node1.apply(select)[1] == 0
        text = report.read_text()
        assert "printed-after-the-first-report" not in text  # the log was not read again
        assert "  | boot-output-first\n" in text and "last log lines (as read at " in text
    assert "boot attempt 11" in text
    status.unlink()
    assert node1.apply(select)[1] == 0
    assert "problem:" not in report.read_text()
