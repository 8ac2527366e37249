"""
The GPU exporter's per-container metrics of the CCC compute containers on the node (those with
the ``ccc.managed-by=ccc-salt`` and ``ccc.stack`` labels, named as their stack: the leftovers
of a recreate and look-alikes of another name are not counted):

* ``ccc_container_network_receive_bytes_total{stack, network}`` and ``..._transmit_...``: bytes
  the container received/sent on each Docker network, as the container counts them
  (``ccc_netstats``; they restart from 0 when the container restarts, as counters may);
* ``ccc_container_restarts_total{stack}``: Docker's ``RestartCount`` of the current container;
* ``ccc_container_running{stack}``: 1 while it runs, 0 when it exists but does not;
* ``ccc_container_ssh_sessions{stack}``: established connections to its port 22;
* ``ccc_container_ssh_sessions_truncated{stack}``: 1 when its connection tables were longer
  than a scrape reads (``ccc_netstats.MAX_TCP_BYTES`` each): the session count is a lower bound;
* ``ccc_container_collection_success`` and ``ccc_container_collection_failures_total``: whether
  Docker could be asked in this scrape, and how often it could not.

``user_email`` (the ``ccc-user.email`` label) is added only with the exporter's
``user_labels: true``: the port answers anyone who reaches the node. Docker is asked through
the exporter's own client (``call(function)`` runs ``function(client)`` with it).
"""

import logging
import threading

import ccc_netstats
import ccc_rules
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

log = logging.getLogger("ccc_container_metrics")

EMAIL_LABEL = "ccc-user.email"
MAX_LABEL_CHARS = 128


def _inspect(client, container_id):
    try:
        return client.api.inspect_container(container_id)
    except Exception as exc:  # noqa: BLE001  (docker.errors.NotFound: removed meanwhile)
        if getattr(getattr(exc, "response", None), "status_code", None) == 404:
            return None
        raise


def compute_containers(client):
    """The node's CCC compute containers (list summaries), one per stack."""
    label = f"{ccc_rules.MANAGED_BY_LABEL}={ccc_rules.MANAGED_BY_VALUE}"
    found = []
    for summary in client.api.containers(all=True, filters={"label": label}):
        stack = (summary.get("Labels") or {}).get(ccc_rules.STACK_LABEL)
        names = [name.lstrip("/") for name in summary.get("Names") or []]
        if stack and stack in names:
            found.append(summary)
    return found


def read_containers(client, proc_root="/proc"):
    """One row per compute container: stack, user, running, restarts, networks, SSH sessions."""
    rows = []
    for summary in compute_containers(client):
        attrs = _inspect(client, summary["Id"])
        if attrs is None:
            continue
        labels = (attrs.get("Config") or {}).get("Labels") or {}
        row = {"stack": labels.get(ccc_rules.STACK_LABEL), "user": labels.get(EMAIL_LABEL),
               "running": bool((attrs.get("State") or {}).get("Running")),
               "restarts": int(attrs.get("RestartCount") or 0), "networks": {}, "ssh_sessions": None,
               "ssh_truncated": False}
        if row["running"]:
            try:
                usage = ccc_netstats.container_usage(attrs, lambda: _inspect(client, attrs["Id"]), proc_root)
                row.update(networks=usage["networks"], ssh_sessions=len(usage["ssh_peers"]),
                           ssh_truncated=usage["ssh_peers_truncated"])
            except ccc_netstats.NetnsGone as exc:
                log.debug("%s: %s", row["stack"], exc)
        rows.append(row)
    return rows


def _label(value):
    return ("" if value is None else str(value))[:MAX_LABEL_CHARS]


class ContainerCollector:
    """A Prometheus collector of ``read_containers`` on every scrape, with its own health."""

    def __init__(self, call, proc_root="/proc", user_labels=False):
        self.call = call
        self.proc_root = proc_root
        self.user_labels = user_labels
        self.failures = 0
        self.last_error = None
        self._lock = threading.Lock()

    def describe(self):
        return []  # collected on scrape only

    def _rows(self):
        try:
            rows, error = self.call(lambda client: read_containers(client, self.proc_root)), None
        except Exception as exc:  # noqa: BLE001  (Docker down must not fail the scrape)
            rows, error = [], f"cannot read the compute containers: {type(exc).__name__}: {exc}"
            self.failures += 1
        if error != self.last_error:
            (log.warning if error else log.info)("%s", error or "compute containers: recovered")
        self.last_error = error
        return rows

    def collect(self):
        with self._lock:
            rows = self._rows()
        extra = ["user_email"] if self.user_labels else []
        net_labels, stack_labels = ["stack", "network"] + extra, ["stack"] + extra
        receive = CounterMetricFamily("ccc_container_network_receive_bytes",
                                      "Bytes a compute container received on a Docker network", labels=net_labels)
        transmit = CounterMetricFamily("ccc_container_network_transmit_bytes",
                                       "Bytes a compute container sent on a Docker network", labels=net_labels)
        restarts = CounterMetricFamily("ccc_container_restarts", "Docker's restart count of the compute "
                                       "container (RestartCount)", labels=stack_labels)
        running = GaugeMetricFamily("ccc_container_running", "1 while the compute container runs",
                                    labels=stack_labels)
        ssh = GaugeMetricFamily("ccc_container_ssh_sessions", "Established TCP connections to the compute "
                                "container's port 22", labels=stack_labels)
        ssh_cut = GaugeMetricFamily("ccc_container_ssh_sessions_truncated", "1 when the compute container's "
                                    "connection tables were cut at the read limit (ssh_sessions is then a lower "
                                    "bound)", labels=stack_labels)
        for row in rows:
            user = [_label(row["user"])] if self.user_labels else []
            stack = [_label(row["stack"])] + user
            restarts.add_metric(stack, row["restarts"])
            running.add_metric(stack, int(row["running"]))
            if row["ssh_sessions"] is not None:
                ssh.add_metric(stack, row["ssh_sessions"])
                ssh_cut.add_metric(stack, int(row["ssh_truncated"]))
            for network, counters in sorted(row["networks"].items()):
                labels = [_label(row["stack"]), _label(network)] + user
                receive.add_metric(labels, counters["rx_bytes"])
                transmit.add_metric(labels, counters["tx_bytes"])
        success = GaugeMetricFamily("ccc_container_collection_success",
                                    "1 when the compute containers could be read in this scrape",
                                    value=int(self.last_error is None))
        failures = CounterMetricFamily("ccc_container_collection_failures",
                                       "Scrapes in which the compute containers could not be read", value=self.failures)
        return [receive, transmit, restarts, running, ssh, ssh_cut, success, failures]
