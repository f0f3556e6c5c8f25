"""`python -m carver ...`: the `carver` command line, run in this process by the extension
module (the same parser and code as the `carver` binary; the wheel ships no binary)."""

import signal
import sys

from ._carver import main as _run


def main(argv=None):
    """Runs `carver` with `argv` (default: this process's arguments) in this process and
    returns its exit status: what `carver ARGV...` would print and return."""
    if argv is None:
        argv = sys.argv[1:]
    # `carver tune` starts its worker processes with this command line plus `tune --worker`.
    relaunch = [sys.executable, "-m", "carver"]
    return _run(["carver", *argv], relaunch)


if __name__ == "__main__":
    # The binary's signal behaviour: a closed pipe (`| head`) and Ctrl-C end the process, where
    # Python would raise BrokenPipeError or KeyboardInterrupt once the Rust code returned. Only
    # here: a caller of main() keeps its own handlers.
    for _name in ("SIGPIPE", "SIGINT"):
        if hasattr(signal, _name):
            signal.signal(getattr(signal, _name), signal.SIG_DFL)
    sys.exit(main())
