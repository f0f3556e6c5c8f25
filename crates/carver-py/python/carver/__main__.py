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
    # Only here, where this process is the command: a caller of main() keeps its own signal
    # handlers and environment. As the binary does, a closed pipe (`| head`) ends the process and
    # blank CARVER_* variables count as unset; and Ctrl-C ends it, where Python would raise
    # KeyboardInterrupt only once the Rust code returned.
    from ._carver import _prepare_cli_process

    _prepare_cli_process()
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main())
