"""`make run`'s and `make serve`'s processes: the Procfile's web, Celery worker and beat under honcho's manager.

    python -m config.serve [--prepare]      # PORT (8000) and API_ROOT from the environment, as the Makefile exports

--prepare first migrates and bootstraps. Then the banner, and the Procfile's processes with honcho's numbering of
ports (the web on PORT; the worker and beat, which serve nothing, are given PORT+100 and +200). A stop signal
(SIGINT, SIGTERM) stops all three and exits 0. One process that ends by itself (a crash, a kill) stops the others
too, as honcho does, and this says which one and exits 1: no web is left serving pages whose tasks nothing runs
(docs/development.md, "When a process dies").
"""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from honcho import environ
from honcho.manager import SIGNALS, Manager
from honcho.printer import Printer

ROOT = Path(__file__).resolve().parent.parent


class _Manager(Manager):
    """honcho's manager, keeping which process ended first and whether a stop signal came before it."""

    first_to_end: tuple[str, int] | None = None
    signalled = False

    def _any_stopped(self):
        if self.first_to_end is None:
            self.signalled = self.returncode in {s["rc"] for s in SIGNALS.values()}
            for name, process in self._processes.items():
                if process.get("returncode") is not None:
                    self.first_to_end = (name, process["returncode"])
                    break
        return self.first_to_end is not None


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _prepare() -> None:
    for step in (["migrate", "--noinput"], ["bootstrap"]):
        subprocess.run([sys.executable, "manage.py", *step], cwd=ROOT, check=True)


def main(argv: list[str]) -> int:
    port = int(os.environ.get("PORT") or 8000)
    api_root = os.environ.setdefault("API_ROOT", f"http://127.0.0.1:{port}")
    if "--prepare" in argv:
        # A stop while preparing: subprocess.run ends the step under way on the way out.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            _prepare()
        except KeyboardInterrupt:
            return 0
        except subprocess.CalledProcessError as failed:
            print(f"make run: `manage.py {' '.join(failed.cmd[2:])}` failed (status {failed.returncode}, its lines "
                  f"above); nothing was served.", file=sys.stderr, flush=True)
            return 1
    var = ROOT / "var"
    # /metrics adds up the web's and the worker's counters from here; a new run starts from zero.
    shutil.rmtree(var / "prometheus", ignore_errors=True)
    (var / "prometheus").mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(var / "prometheus")
    (var / "api_root").write_text(f"{api_root}\n")  # for manage.py in a second terminal (config/settings/local.py)
    print(f"Payments platform on {api_root}/ - admin {api_root}/admin/ - API docs {api_root}/openapi/v1/docs/ "
          f"(Ctrl-C stops it)", flush=True)

    manager = _Manager(Printer(sys.stdout))
    procfile = environ.parse_procfile((ROOT / "Procfile").read_text())
    for process in environ.expand_processes(procfile.processes, port=port):
        manager.add_process(process.name, process.cmd, env={**os.environ, **process.env}, cwd=str(ROOT))
    manager.loop()
    if manager.signalled or manager.first_to_end is None:
        return 0
    name, code = manager.first_to_end
    others = ", ".join(n for n in manager._processes if n != name)
    print(f"make run: {name} ended by itself (status {code}; its last lines above say why), so {others} were "
          f"stopped with it.", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
