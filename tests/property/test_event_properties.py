"""Property tests of the settings beacon's file versions and of the master side that reads them
from event data. A version is ``"<mtime_ns>:<ctime_ns>:<size>:<inode>"`` or ``"deleted"``
(``_beacons/_ccc_settings_watcher.py``); the master (``ccc.redeploy`` → ``ccc_redeploy``)
remembers the versions its jobs covered, so the same save reported by every node is applied once.

* every version the watcher can produce, for any stat values (an mtime set before 1970 or far
  ahead included) and for real files, is one the master takes as a version, and two different
  signatures never give one version;
* event data is minion-supplied: for any JSON as the stack and the version of a settings event,
  or as the minion id of an engine restart or minion start, in any order, the runner answers with
  data (a non-STACK_NAME or an id that is not an accepted minion refused), and its record stays
  bounded (a version that is not one is not stored); a version a published job covered is not
  applied again.
"""

import contextlib
import importlib.util
import json
import os
import sys
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from support import strategies as gen
from support.hypothesis_profiles import examples
from support.site import REPO, sample_ccc

import ccc_redeploy  # noqa: E402

sys.path.insert(0, str(REPO / "_beacons"))  # the beacon imports its helper by name, as Salt's loader lets it
import _ccc_settings_watcher as watcher  # noqa: E402

_spec = importlib.util.spec_from_file_location("ccc_runner_properties", REPO / "_runners" / "ccc.py")
ccc_runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ccc_runner)

CCCS = {node: sample_ccc(node) for node in ("node1", "node2", "node3")}
STACKS = [entry["STACK_NAME"] for entry in CCCS["node1"]["containers"]]
LIMITS = {"max_applies": 3, "window": 15, "job_timeout": 60}
INT64 = st.integers(-2**63, 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)
signatures = st.tuples(INT64, INT64, UINT64, UINT64)
versions = st.one_of(signatures.map(watcher.version), st.just("deleted"), gen.values,
                     st.text(min_size=200, max_size=4000), st.integers(0, 9).map(lambda n: "1:2:3:" * n))
# The record of a master that got any number of any events: its versions, stacks and users.
RECORD_BYTES_AT_MOST = len(STACKS) * (ccc_redeploy.VERSIONS_KEPT + 1) * 200 + 4000


@examples(5)
@given(first=signatures, second=signatures)
def test_every_version_the_watcher_reports_is_one_the_master_takes_and_versions_differ(first, second):
    text = watcher.version(first)
    assert ccc_redeploy.is_file_version(text), text
    assert (watcher.version(first) == watcher.version(second)) is (first == second)
    assert ccc_redeploy.is_file_version(watcher.version(None))


@examples(0.5)
@given(content=st.binary(max_size=64), mtime_ns=st.integers(-(2**31 - 1) * 10**9, 2**33 * 10**9))
def test_a_real_file_with_any_content_and_mtime_gives_a_version_the_master_takes(tmp_path_factory, content, mtime_ns):
    path = tmp_path_factory.mktemp("beacon") / "ana-main.yml"
    path.write_bytes(content)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    sig = watcher.signature(str(path))
    assert sig[2] == len(content)  # the mtime as the file system keeps it (it may clip or round it)
    assert ccc_redeploy.is_file_version(watcher.version(sig))
    assert watcher.version(watcher.signature(str(path.with_name("gone.yml")))) == "deleted"


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def time(self):
        return self.now


class _Master:
    """A master whose minions return every job ``duration`` s after its publish."""

    def __init__(self, clock, duration=5):
        self.clock, self.duration, self.jobs = clock, duration, []

    def cccs(self):
        return CCCS

    def placement(self, stack):
        return ccc_runner.ccc_redeploy.placement_from(CCCS, stack)

    def returns(self, jid):
        published, minions = self.jobs[int(jid)]
        return {m: {"ret": {}} for m in minions} if self.clock.now >= published + self.duration else {}

    def publish(self, stack, minions, notice):
        self.jobs.append((self.clock.now, minions))
        return str(len(self.jobs) - 1), minions

    def time(self):
        return self.clock.now

    def find_job(self, minions, jid):
        self.jobs.append((self.clock.now, []))
        return str(len(self.jobs) - 1)

    def accepted(self, minion):
        return minion in CCCS

    def reconcile(self, minion, sync=False):
        self.jobs.append((self.clock.now, [minion]))
        return str(len(self.jobs) - 1)


@contextlib.contextmanager
def runner(cachedir):
    clock = _Clock()
    master = _Master(clock)
    with mock.patch.object(ccc_runner, "__opts__", {"cachedir": str(cachedir), "ccc_redeploy": dict(LIMITS)},
                           create=True), mock.patch.object(ccc_runner, "time", clock), \
            mock.patch.object(ccc_runner, "_Master", lambda: master):
        yield clock, master


events = st.lists(st.tuples(st.sampled_from(["settings", "engine", "start"]), st.sampled_from(STACKS + list(CCCS))
                            | gen.values, versions, st.integers(0, 30), st.booleans()), max_size=12)


@examples(1)
@given(sequence=events)
def test_any_event_data_is_answered_and_the_record_stays_bounded(tmp_path_factory, sequence):
    cachedir = tmp_path_factory.mktemp("master")
    with runner(cachedir) as (clock, _):
        for kind, name, version, wait, flush in sequence:  # name: the event's stack or minion id
            clock.now += wait
            if kind == "settings":
                answer = ccc_runner.redeploy(name, version)
                if not (isinstance(name, str) and name in STACKS):
                    assert answer["targets"] == [] and answer.get("jid") is None
            else:
                answer = (ccc_runner.reconcile_node if kind == "engine" else ccc_runner.node_start)(name)
                if not (isinstance(name, str) and name in CCCS):
                    assert answer["action"] is None and answer["error"]
            assert isinstance(answer, dict) and json.dumps(answer)
            if flush:
                ccc_runner.flush()
        path = cachedir / "ccc-redeploy" / "record.json"
        text = path.read_text() if path.exists() else "{}"
        assert len(text) <= RECORD_BYTES_AT_MOST, len(text)
        record = json.loads(text)
        for stack, items in (record.get("versions") or {}).items():
            assert stack in STACKS and len(items) <= ccc_redeploy.VERSIONS_KEPT
            assert all(ccc_redeploy.is_file_version(item[0]) for item in items), items
        assert set(record.get("nodes") or {}) <= set(CCCS)
        for entry in (record.get("stacks") or {}).values():
            assert entry.get("version") is None or ccc_redeploy.is_file_version(entry["version"])


@examples(1)
@given(stack=st.sampled_from(STACKS), sig=signatures, wait=st.integers(0, ccc_redeploy.VERSION_MEMORY - 1))
def test_a_version_a_published_job_covered_is_not_applied_again(tmp_path_factory, stack, sig, wait):
    """Every node where the stack may run reports the same save; one apply covers them all."""
    with runner(tmp_path_factory.mktemp("master")) as (clock, master):
        version = watcher.version(sig)
        first = ccc_runner.redeploy(stack, version)
        if not first.get("jid"):
            return  # the stack runs nowhere (a disabled one still names nodes)
        clock.now += wait
        assert ccc_runner.redeploy(stack, version)["action"] == "covered"
        assert len(master.jobs) == 1 or all(not minions for _, minions in master.jobs[1:])


def test_event_data_that_is_not_a_version_is_not_stored(tmp_path):
    """Found by the property above: any text in the event's ``version`` (minion-supplied) was kept
    in the master's redeploy record, up to 8 per stack, however long; now only a file version is
    (``ccc_redeploy.is_file_version``), and an event with anything else counts as one without."""
    with runner(tmp_path) as (clock, _):
        for version in ("x" * 100000, "1:2", "1:2:3:4:5", "-1:2:3:4\n", ["1:2:3:4"], "deleted"):
            clock.now += 100
            ccc_runner.flush()  # the job before has returned
            ccc_runner.redeploy("ana-main", version)
        record = (tmp_path / "ccc-redeploy" / "record.json").read_text()
        assert len(record) < 2000
        assert [item[0] for item in json.loads(record)["versions"]["ana-main"]] == ["deleted"]
        clock.now += 100
        ccc_runner.flush()
        assert ccc_runner.redeploy("ana-main", "deleted")["action"] == "covered"
        assert ccc_runner.redeploy("ana-main", "1:2:3")["action"] != "covered"  # the previous beacon's form is a version
