"""A run's Docker client keeps one connection to the node's engine (issue 21: a no-op apply of 50
containers inspects each of them once, and the SDK opened a new connection for every container's
URL, 0.4 ms more per call). Counted at the SDK's unix-socket connection against node1's real
dockerd; the same client must go on answering after a log read cut short and after the engine
restarted under it."""

import time

import pytest

from support.nodes import node_dockerd

import ccc_engine
import ccc_problems

pytestmark = pytest.mark.docker

CHATTY = "ccc-test-engine-connections"


@pytest.fixture
def connects(monkeypatch):
    """How many connections clients open to a unix socket from now on."""
    made = []
    real = ccc_engine.docker.transport.unixconn.UnixHTTPConnection.connect

    def counted(self):
        made.append(self.unix_socket)
        return real(self)

    monkeypatch.setattr(ccc_engine.docker.transport.unixconn.UnixHTTPConnection, "connect", counted)
    return made


@pytest.fixture
def chatty(node1_dockerd):
    """A running container with a long log (not a ccc-salt one: nothing here manages it)."""
    client = node1_dockerd.client()
    for old in client.containers.list(all=True, filters={"name": CHATTY}):
        old.remove(force=True)
    container = client.containers.run("ccc-test/tiny:1", name=CHATTY, detach=True,
                                      entrypoint=["/bin/sh", "-c", "seq 1 100000; exec sleep 3600"])
    deadline = time.monotonic() + 60
    while container.logs(tail=1) != b"100000\n":  # the whole log is written (about 576 KiB)
        assert time.monotonic() < deadline, "the container did not write its log"
        time.sleep(0.05)
    yield container
    container.remove(force=True)


def test_many_calls_about_many_containers_share_one_connection(node1_dockerd, tmp_path, chatty, connects):
    client = ccc_engine.client({"docker_url": node1_dockerd.url, "state_dir": str(tmp_path)})
    try:
        listed = ccc_engine.listed(client)
        assert ccc_engine.running(ccc_engine.inspect(client, CHATTY))
        assert [ccc_engine.inspect(client, f"ccc-test-missing-{n}") for n in range(30)] == [None] * 30
        assert CHATTY in listed
        assert len(connects) == 1

        # A log read cut short (as a problem report reads one) leaves no half-read answer behind.
        for _ in range(3):
            read = ccc_problems.read_log(client, chatty.id, lines=100000)
            assert len(read) == ccc_problems.LOG_READ_MAX and read.startswith(b"1")
            assert ccc_engine.inspect(client, CHATTY)["Id"] == chatty.id
        assert ccc_engine.inspect(client, "ccc-test-missing-again") is None
    finally:
        client.close()


def test_the_client_answers_again_after_the_engine_restarted(node1_dockerd, tmp_path, connects):
    client = ccc_engine.client({"docker_url": node1_dockerd.url, "state_dir": str(tmp_path)})
    try:
        assert ccc_engine.inspect(client, "ccc-test-missing") is None
        assert len(connects) == 1
        node1_dockerd.stop()
        with pytest.raises(ccc_engine.ENGINE_ERRORS):
            ccc_engine.inspect(client, "ccc-test-missing")
        node_dockerd("node1")  # node1 again, for this test and the ones after it
        assert ccc_engine.inspect(client, "ccc-test-missing") is None
        assert client.api.ping()
    finally:
        client.close()
