"""Start-up of ``oom-wizard fit`` on a small config, beside ``python -c "import yaml, pydantic"``.

    python bench/bench_fit.py [RUNS]

Runs both RUNS times in turn (default 9) and prints the median wall and CPU seconds of each and
their ratios (pairwise medians; the CPU one is the figure: the machine may be shared), then
where one in-process ``fit`` spends its time (yaml and pydantic, pydantic's first model, the
catalog's models, reading the presets, the config, the memory model). Asserts nothing.

A third command, one pydantic model defined and validated, is timed beside them: the floor of
anything that validates with pydantic models (``BaseModel``'s machinery, ``pydantic.fields``
and the plugin lookup through ``importlib.metadata``), already about 2× the baseline.

All three run with their bytecode cached, as an installed package has it (pip compiles the wheel):
the children get a cache folder of their own (``PYTHONPYCACHEPREFIX``) even where the shell sets
``PYTHONDONTWRITEBYTECODE``, and the first run of each, not timed, fills it. Without that, an
editable checkout would compile every module of the wizard on every run, while the baseline's
packages come compiled.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL = """\
job: extension
config:
  name: small
  process:
    - type: sd_trainer
      network: {type: lora, linear: 16}
      train: {batch_size: 1, dtype: bf16, gradient_checkpointing: true, steps: 1000}
      model: {arch: flux, name_or_path: black-forest-labs/FLUX.1-dev, quantize: true}
      datasets: [{folder_path: /data/x, resolution: [512, 768, 1024]}]
      sample: {width: 1024, height: 1024, sample_every: 250, prompts: ["a photo"]}
"""

ONE_MODEL = """\
import yaml
from pydantic import BaseModel

class Model(BaseModel):
    x: int

Model(x=1)
"""


def cached_bytecode(folder: Path) -> dict[str, str]:
    """The environment of the children: bytecode written to and read from ``folder``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder)
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    wizard = shutil.which("oom-wizard") or "oom-wizard"
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "small.yaml"
        config.write_text(SMALL, encoding="utf-8")
        fit = [wizard, "fit", str(config), "--gpu", "24", "--no-probe", "--json"]
        base = [sys.executable, "-c", "import yaml, pydantic"]
        model = [sys.executable, "-c", ONE_MODEL]
        env = cached_bytecode(Path(folder) / "bytecode")
        timed(fit, env)  # compiles the bytecode, and warms the file cache
        timed(base, env)
        timed(model, env)
        triples = [(timed(fit, env), timed(base, env), timed(model, env)) for _ in range(runs)]
        in_process(config, env)
    pairs = [(a, b) for a, b, _ in triples]
    fit_wall = statistics.median(a[0] for a, _ in pairs)
    fit_cpu = statistics.median(a[1] for a, _ in pairs)
    base_wall = statistics.median(b[0] for _, b in pairs)
    base_cpu = statistics.median(b[1] for _, b in pairs)
    ratio = statistics.median(a[0] / b[0] for a, b in pairs)
    cpu_ratios = sorted(a[1] / b[1] for a, b in pairs)
    print(f"fit:                   wall {fit_wall:.3f} s, cpu {fit_cpu:.3f} s (median of {runs})")
    print(f"import yaml, pydantic: wall {base_wall:.3f} s, cpu {base_cpu:.3f} s")
    print(
        f"ratio (pairwise median of cpu): {statistics.median(cpu_ratios):.2f} "
        f"(from {cpu_ratios[0]:.2f} to {cpu_ratios[-1]:.2f})"
    )
    print(f"ratio (pairwise median of wall): {ratio:.2f}")
    floor = statistics.median(c[1] / b[1] for _, b, c in triples)
    print(
        f"one pydantic model:    cpu {statistics.median(c[1] for _, _, c in triples):.3f} s, "
        f"ratio {floor:.2f} (the floor of validating with pydantic models)"
    )


def in_process(config: Path, env: dict[str, str]) -> None:
    """One ``fit`` through the application layer in a fresh interpreter, its phases timed (CPU)."""
    code = f"""
import time
t0 = time.process_time()
import yaml, pydantic
ta = time.process_time()
import oom_wizard.frozen  # the first model: BaseModel, pydantic.fields, the plugin lookup
tb = time.process_time()
import oom_wizard.rules.catalog as catalog
t1 = time.process_time()
catalog.load_presets()
t2 = time.process_time()
from pathlib import Path
from oom_wizard.application.settling import JobCard
from oom_wizard.application.fitting import fit
from oom_wizard.application.settling import start
from oom_wizard.request import JobRequest
state = start(JobRequest(target=Path({str(config)!r}), probe=False))
t3 = time.process_time()
fit(state, JobCard(24.0, "--gpu"))
t4 = time.process_time()
print(f"in process (cpu): import yaml and pydantic {{ta - t0:.3f}} s, "
      f"pydantic's first model {{tb - ta:.3f}} s, the catalog's models {{t1 - tb:.3f}} s, "
      f"read the presets {{t2 - t1:.3f}} s, open and settle the job {{t3 - t2:.3f}} s, "
      f"the fit {{t4 - t3:.3f}} s")
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


if __name__ == "__main__":
    main()
