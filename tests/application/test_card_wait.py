"""Before each attempt ``run`` names the card's other tenants, and waits, bounded and saying
so, for the last trainer's memory to come back (a fake probe and a fake clock: no sleeping)."""

from __future__ import annotations

from oom_wizard.application.card_wait import CardWait
from oom_wizard.host.probe import GpuInfo, GpuProcess, ProbeResult


def card(used: float, *processes: GpuProcess) -> ProbeResult:
    return ProbeResult((GpuInfo(0, "NVIDIA RTX 4090", 24.0, used, 24.0 - used),), processes)


OTHER = GpuProcess(4242, "python", 6.0)


class Machine:
    """The card's answers in turn, and a clock that moves only when slept."""

    def __init__(self, *answers: ProbeResult) -> None:
        self.answers, self.now, self.slept = list(answers), 0.0, 0.0

    def probe(self) -> ProbeResult:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds

    def wait(self, limit_s: float = 60.0) -> CardWait:
        return CardWait(self.probe, self.sleep, lambda: self.now, limit_s=limit_s)


def test_the_first_attempt_names_the_other_process_and_does_not_wait() -> None:
    machine = Machine(card(6.0, OTHER))
    said: list[str] = []
    machine.wait().before_attempt(said.append)
    assert said and "pid 4242 python 6.00 GiB" in said[0] and "18.00 GiB free" in said[0]
    assert machine.slept == 0


def test_the_next_attempt_waits_until_the_last_trainers_memory_is_back() -> None:
    trainer = GpuProcess(5000, "python", 20.0)
    machine = Machine(card(6.0, OTHER), card(23.5, OTHER, trainer), card(23.5), card(6.2))
    said: list[str] = []
    wait = machine.wait()
    wait.before_attempt(said.append)
    wait.before_attempt(said.append)
    assert "Waiting up to 60 s for the last trainer's memory" in said[1]
    assert said[2] == "The card's memory is back after 2 s."
    assert machine.slept == 2.0


def test_the_wait_is_bounded_and_says_so() -> None:
    stuck = GpuProcess(5000, "python", 17.5)
    machine = Machine(card(6.0, OTHER), card(23.5, OTHER, stuck))
    said: list[str] = []
    wait = machine.wait(limit_s=5)
    wait.before_attempt(said.append)
    wait.before_attempt(said.append)
    assert machine.slept == 5.0
    assert said[-1].startswith("After 5 s the card still has 23.50 GiB in use")
    assert "pid 5000 python 17.50 GiB" in said[-1] and "starts anyway" in said[-1]


def test_without_nvidia_smi_nothing_is_said_or_waited() -> None:
    said: list[str] = []
    wait = CardWait(lambda: None, lambda s: None, lambda: 0.0)
    wait.before_attempt(said.append)
    wait.before_attempt(said.append)
    assert said == []
