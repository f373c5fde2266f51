"""Start-up of ``oom-wizard fit`` on a small config, beside ``python -c "import yaml, pydantic"``.

    python bench/bench_fit.py [RUNS]

Runs both RUNS times in turn (default 9) and prints the median wall and CPU seconds of each and
their ratio, then where one in-process ``fit`` spends its time (imports, reading the presets,
the config, the memory model). Asserts nothing.
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


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        timed(fit)
        timed(base)
        pairs = [(timed(fit), timed(base)) for _ in range(runs)]
        in_process(config)
    fit_wall = statistics.median(a[0] for a, _ in pairs)
    fit_cpu = statistics.median(a[1] for a, _ in pairs)
    base_wall = statistics.median(b[0] for _, b in pairs)
    base_cpu = statistics.median(b[1] for _, b in pairs)
    ratio = statistics.median(a[0] / b[0] for a, b in pairs)
    print(f"fit:                   wall {fit_wall:.3f} s, cpu {fit_cpu:.3f} s (median of {runs})")
    print(f"import yaml, pydantic: wall {base_wall:.3f} s, cpu {base_cpu:.3f} s")
    print(f"ratio (pairwise median of wall): {ratio:.2f}")


def in_process(config: Path) -> None:
    """One ``fit`` in a fresh interpreter, its phases timed."""
    code = f"""
import time
t0 = time.perf_counter()
import oom_wizard.catalog as catalog
t1 = time.perf_counter()
presets = catalog.load_presets()
t2 = time.perf_counter()
import oom_wizard.service as service
t3 = time.perf_counter()
from oom_wizard.document import load_document
document = load_document({str(config)!r}); document.view()
t4 = time.perf_counter()
from oom_wizard.memory import job_memory
job_memory(document, [], "image", presets=presets)
t5 = time.perf_counter()
print(f"in process: import catalog {{t1 - t0:.3f}} s, read the presets {{t2 - t1:.3f}} s, "
      f"import the service {{t3 - t2:.3f}} s, read the config {{t4 - t3:.3f}} s, "
      f"the memory model {{t5 - t4:.3f}} s")
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))


if __name__ == "__main__":
    main()
