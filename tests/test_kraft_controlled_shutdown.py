"""Controlled shutdown as a state (issue 33, item 2): `shutdown: {phase: request}` leaves the broker
registered and unfenced but in controlled shutdown (3.5.0 handleBrokerInControlledShutdown,
ClusterControlManager.isActive): leadership moves away, it leaves the ISR, it is not elected and not
added to the ISR; `phase: stop` stops it (fenced); a new registration ends the state."""

from __future__ import annotations

import pytest

from conftest import run

KRAFT = ["kip903", "kip966"]
CREATE = {"elect": {"leader": 1, "epoch": 0, "isr": [1, 2, 3]}}


def at(result, step):
    return result["trace"][step - 1]


@pytest.mark.parametrize("protocol", KRAFT)
def test_a_leader_asking_to_shut_down_hands_over_and_stays_registered(protocol):
    steps = [CREATE, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
             {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
             {"shutdown": {"replica": 1, "phase": "request"}},
             {"produce": {"value": "b"}}, {"fetch": {"replica": 1}},
             {"shutdown": {"replica": 1, "phase": "stop"}}]
    result = run(steps, protocol, replicas=(1, 2, 3), trace=True)
    ctl = at(result, 7)["controller"]
    assert ctl["leader"] == 2 and ctl["isr"] == [2, 3] and ctl["in_controlled_shutdown"] == [1] and ctl["fenced"] == []
    assert at(result, 7)["replicas"]["1"]["alive"] and at(result, 7)["replicas"]["1"]["role"] == "follower"
    # it follows 2 but does not fetch: outside the ISR during controlled shutdown its fetcher is
    # stopped (3.5.0 ReplicaManager.applyLocalFollowersDelta ~2213; issue 49, departure 1), so its
    # fetch is refused and it keeps its log
    assert (9, "FETCHER_STOPPED") in [(e["step"], e["error"]) for e in result["errors"]]
    assert at(result, 9)["replicas"]["1"]["leo"] == 1 and at(result, 9)["controller"]["isr"] == [2, 3]
    final = result["final"]
    assert final["controller"]["fenced"] == [1] and not final["replicas"]["1"]["alive"]
    assert result["violations"] == [] and result["losses"] == []


@pytest.mark.parametrize("protocol", KRAFT)
def test_a_broker_in_controlled_shutdown_is_not_elected(protocol):
    """2 is shutting down; 1 is fenced: the ISR [2, 3] minus 1 elects 3, not 2 (isAcceptableLeader)."""
    steps = [CREATE, {"shutdown": {"replica": 2, "phase": "request"}}, {"fence": {"replica": 1}}]
    result = run(steps, protocol, replicas=(1, 2, 3), trace=True)
    assert result["final"]["controller"]["leader"] == 3


def test_a_restart_ends_the_controlled_shutdown():
    steps = [CREATE, {"shutdown": {"replica": 3, "phase": "request"}}, {"shutdown": {"replica": 3, "phase": "stop"}},
             {"restart": {"replica": 3}}]
    result = run(steps, "kip903", replicas=(1, 2, 3), trace=True)
    assert at(result, 3)["controller"]["in_controlled_shutdown"] == [3]
    assert "in_controlled_shutdown" not in result["final"]["controller"]
    assert result["final"]["controller"]["fenced"] == []


def test_the_request_phase_is_kraft_only():
    result = run([CREATE, {"shutdown": {"replica": 2, "phase": "request"}}], "kip320", replicas=(1, 2, 3))
    assert [(e["step"], e["error"]) for e in result["errors"]] == [(2, "UNSUPPORTED_VERSION")]
    assert result["final"]["replicas"]["2"]["alive"]


@pytest.mark.parametrize("protocol", KRAFT)
def test_a_one_step_shutdown_ends_as_before(protocol):
    """`shutdown` without a phase is both phases: the controller's state ends as the one-step
    controlled shutdown did (leadership and ISR moved, the broker fenced)."""
    steps = [CREATE, {"shutdown": {"replica": 1}}]
    result = run(steps, protocol, replicas=(1, 2, 3))
    ctl = result["final"]["controller"]
    assert ctl["leader"] == 2 and ctl["isr"] == [2, 3] and ctl["fenced"] == [1]
    assert ctl["epoch"] == 1
