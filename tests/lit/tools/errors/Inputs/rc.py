"""Runs a command and reports how it ended, for FileCheck.

    rc.py [--timeout=S] [--fsize=BYTES] [--env=NAME=VALUE ...] CMD [ARGS...]

Prints the command's stdout and stderr (merged, in order), then one line:
"exit code: N", "killed by signal N" or "timed out after S s" (the command
is killed then). Exits 0 itself, so a RUN line pipes it into FileCheck and
the check file states the exact status. --fsize limits the size of files
the command writes (RLIMIT_FSIZE, with SIGXFSZ ignored), so a write past it
fails as on a full disk, with EFBIG. --env sets a variable for the command.
"""
import os
import resource
import signal
import subprocess
import sys


def report(output, status, timeout):
    """Prints the output, then how the command ended (None: timed out)."""
    sys.stdout.write(output)
    if status is None:
        print(f"timed out after {timeout:g} s")
    elif status < 0:
        print(f"killed by signal {-status}")
    else:
        print(f"exit code: {status}")


def main(argv):
    timeout, fsize, env = None, None, dict(os.environ)
    while argv and argv[0].startswith("--"):
        flag, _, value = argv.pop(0).partition("=")
        if flag == "--timeout":
            timeout = float(value)
        elif flag == "--fsize":
            fsize = int(value)
        elif flag == "--env":
            name, _, v = value.partition("=")
            env[name] = v
        else:
            sys.exit(f"rc.py: unknown flag {flag}")
    if not argv:
        sys.exit("rc.py: no command")

    def limit():
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env,
                            preexec_fn=limit, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = None
    report(out.decode(errors="replace"), status, timeout)


if __name__ == "__main__":
    main(sys.argv[1:])
