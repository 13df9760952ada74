"""The soak's orchestration (tests/soak/harness.py: orchestrate), without starting a platform: the deployments' child
processes run side by side, each with its own share of the load time, and their JSON objects are combined; with
`--in-turn` one after the other. The children are stand-ins that only record when they were started and ended."""

import json
import threading

from tests.soak import harness


class FakeChildren:
    """Stands in for subprocess.Popen in the harness: a child 'runs' until every expected child has started (side
    by side) or for a moment (in turn), then prints its deployment's JSON."""

    def __init__(self, expected: int, wait: float):
        self.events: list[str] = []
        self.argvs: dict[str, list[str]] = {}
        self.all_started = threading.Event()
        self.expected, self.wait = expected, wait
        self.lock = threading.Lock()

    def __call__(self, argv, **kwargs):
        deployment = argv[argv.index("--deployment") + 1]
        fake = self

        class Child:
            returncode = None

            def communicate(self):
                fake.all_started.wait(fake.wait)
                with fake.lock:
                    fake.events.append(f"end {deployment}")
                self.returncode = 0
                return json.dumps({"ok": True, "deployment": deployment, "checks": {"x": {"ok": True}}}), None

            def poll(self):
                return self.returncode

        with self.lock:
            self.events.append(f"start {deployment}")
            self.argvs[deployment] = argv
            if sum(event.startswith("start") for event in self.events) == self.expected:
                self.all_started.set()
        return Child()


def test_the_deployments_run_side_by_side_each_with_its_share_of_the_load(monkeypatch, tmp_path):
    children = FakeChildren(expected=2, wait=10)
    monkeypatch.setattr(harness.subprocess, "Popen", children)
    argv = ["--seconds", "90", "--seed", "7", "--logdir", str(tmp_path)]

    result = harness.orchestrate(harness.parse_args(argv), argv)

    assert sorted(children.events[:2]) == ["start live", "start sandbox"], children.events  # both before either ends
    assert sorted(children.events[2:]) == ["end live", "end sandbox"], children.events
    seconds = {d: a[len(a) - 1 - a[::-1].index("--seconds") + 1] for d, a in children.argvs.items()}
    assert seconds == {"sandbox": "60.0", "live": "30.0"}  # the 90 s shared 2:1, as one after the other
    assert result["ok"] is True and set(result["deployments"]) == {"sandbox", "live"}
    assert result["failed_checks"] == []


def test_in_turn_runs_one_deployment_after_the_other(monkeypatch, tmp_path):
    children = FakeChildren(expected=2, wait=0.2)
    monkeypatch.setattr(harness.subprocess, "Popen", children)
    argv = ["--seconds", "90", "--seed", "7", "--logdir", str(tmp_path), "--in-turn"]

    result = harness.orchestrate(harness.parse_args(argv), argv)

    assert children.events == ["start sandbox", "end sandbox", "start live", "end live"]
    assert result["ok"] is True and set(result["deployments"]) == {"sandbox", "live"}
