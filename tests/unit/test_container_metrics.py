"""The exporter's container collector (ccc_container_metrics) on a FAKE Docker client (the three
SDK calls it makes: ``api.containers``, ``api.inspect_container``, and a 404 for a container
removed meanwhile) and a crafted ``proc_root`` with real procfs lines (see test_netstats). The
same collector against a real dockerd and a real container's /proc: tests/agents."""


import ccc_container_metrics
import ccc_netstats
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.logs import kept
from test_netstats import CONTAINER_ID, TCP, _attrs, _fake_process, _many

STOPPED_ID = "ef" * 32


class NotFound(Exception):
    """Shaped like docker.errors.NotFound: an API error whose response is a 404."""

    class response:  # noqa: N801
        status_code = 404


class FakeDocker:
    """A FAKE Docker SDK client: fixed list summaries and inspect data."""

    def __init__(self, summaries, inspected, error=None):
        self.summaries, self.inspected, self.error = summaries, inspected, error
        self.api = self
        self.filters = []

    def containers(self, all=False, filters=None):  # noqa: A002  (the SDK's name)
        if self.error:
            raise self.error
        self.filters.append((all, filters))
        return self.summaries

    def inspect_container(self, container_id):
        if container_id not in self.inspected:
            raise NotFound()
        return self.inspected[container_id]


def _summary(cid, name, stack, managed=True):
    labels = {"ccc.stack": stack, "ccc-user.email": f"{stack.split('-')[0]}@example.org"}
    if managed:
        labels["ccc.managed-by"] = "ccc-salt"
    return {"Id": cid, "Names": [f"/{name}"], "Labels": labels}


def _inspected(attrs, restarts, labels):
    return dict(attrs, RestartCount=restarts, Config={"Labels": labels})


def scrape(collector):
    registry = CollectorRegistry()
    registry.register(collector)
    families = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            families.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return families


@pytest.fixture
def docker(tmp_path):
    _fake_process(tmp_path, 4242, tcp=TCP)
    running = _attrs()
    stopped = {"Id": STOPPED_ID, "Name": "/bor-main", "State": {"Running": False, "Pid": 0}}
    ana_labels = {"ccc.managed-by": "ccc-salt", "ccc.stack": "ana-main", "ccc-user.email": "ana@example.org"}
    bor_labels = {"ccc.managed-by": "ccc-salt", "ccc.stack": "bor-main", "ccc-user.email": "bor@example.org"}
    return FakeDocker(
        [_summary(CONTAINER_ID, "ana-main", "ana-main"), _summary(STOPPED_ID, "bor-main", "bor-main"),
         _summary("11" * 32, "ana-main.ccc-old", "ana-main"),        # a recreate's leftover: not counted
         _summary("22" * 32, "gone-box", "gone-box")],                # removed before its inspect
        {CONTAINER_ID: _inspected(running, 3, ana_labels), STOPPED_ID: _inspected(stopped, 7, bor_labels),
         "11" * 32: _inspected(_attrs(pid=1), 0, ana_labels)})


def test_metrics_per_compute_container_with_the_agreed_names(tmp_path, docker):
    collector = ccc_container_metrics.ContainerCollector(lambda fn: fn(docker), proc_root=str(tmp_path))
    metrics = scrape(collector)
    assert docker.filters == [(True, {"label": "ccc.managed-by=ccc-salt"})]
    assert metrics["ccc_container_network_receive_bytes_total"] == {
        (("network", "claims"), ("stack", "ana-main")): 1866,
        (("network", "lab-unrestricted"), ("stack", "ana-main")): 5265937}
    assert metrics["ccc_container_network_transmit_bytes_total"] == {
        (("network", "claims"), ("stack", "ana-main")): 726,
        (("network", "lab-unrestricted"), ("stack", "ana-main")): 10494262}
    assert metrics["ccc_container_restarts_total"] == {(("stack", "ana-main"),): 3, (("stack", "bor-main"),): 7}
    assert metrics["ccc_container_running"] == {(("stack", "ana-main"),): 1, (("stack", "bor-main"),): 0}
    assert metrics["ccc_container_ssh_sessions"] == {(("stack", "ana-main"),): 2}
    assert metrics["ccc_container_ssh_sessions_truncated"] == {(("stack", "ana-main"),): 0}
    assert metrics["ccc_container_collection_success"] == {(): 1}
    assert metrics["ccc_container_collection_failures_total"] == {(): 0}
    assert "example.org" not in generate_latest_text(collector), "no e-mail without user_labels"


def generate_latest_text(collector):
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_user_email_only_with_user_labels(tmp_path, docker):
    collector = ccc_container_metrics.ContainerCollector(lambda fn: fn(docker), str(tmp_path), user_labels=True)
    metrics = scrape(collector)
    assert metrics["ccc_container_running"] == {
        (("stack", "ana-main"), ("user_email", "ana@example.org")): 1,
        (("stack", "bor-main"), ("user_email", "bor@example.org")): 0}


@pytest.fixture
def collector_log():
    with kept("ccc_container_metrics") as records:
        yield records


def test_docker_down_answers_with_the_failure_counted(tmp_path, collector_log):
    down = FakeDocker([], {}, error=ConnectionError("docker.sock: connection refused"))
    collector = ccc_container_metrics.ContainerCollector(lambda fn: fn(down), str(tmp_path))
    for expected in (1, 2):
        metrics = scrape(collector)
        assert metrics["ccc_container_collection_success"] == {(): 0}
        assert metrics["ccc_container_collection_failures_total"] == {(): expected}
        assert "ccc_container_running" not in metrics
    warnings = collector_log.messages()
    assert warnings == ["cannot read the compute containers: ConnectionError: docker.sock: connection refused"]


def test_a_container_whose_process_is_gone_still_counts_as_running_without_traffic(tmp_path):
    inspected = _inspected(_attrs(pid=9999), 0, {"ccc.managed-by": "ccc-salt", "ccc.stack": "ana-main"})
    docker = FakeDocker([_summary(CONTAINER_ID, "ana-main", "ana-main")], {CONTAINER_ID: inspected})
    metrics = scrape(ccc_container_metrics.ContainerCollector(lambda fn: fn(docker), str(tmp_path)))
    assert metrics["ccc_container_running"] == {(("stack", "ana-main"),): 1}
    assert "ccc_container_network_receive_bytes_total" not in metrics  # pid 9999 has no namespace files


def test_a_container_with_a_huge_connection_table_costs_a_bounded_read_and_says_so(tmp_path, docker):
    _fake_process(tmp_path, 4343, tcp=_many(100_000, then=TCP))
    docker.inspected[CONTAINER_ID] = dict(docker.inspected[CONTAINER_ID], State=dict(_attrs()["State"], Pid=4343))
    collector = ccc_container_metrics.ContainerCollector(lambda fn: fn(docker), proc_root=str(tmp_path))
    metrics = scrape(collector)
    assert metrics["ccc_container_ssh_sessions"] == {(("stack", "ana-main"),): 0}  # the sessions come after the cut
    assert metrics["ccc_container_ssh_sessions_truncated"] == {(("stack", "ana-main"),): 1}
    assert ccc_netstats.MAX_TCP_BYTES < (tmp_path / "4343" / "net" / "tcp").stat().st_size
