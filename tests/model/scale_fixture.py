"""What the peak-memory tests share (tests/model/memory_bound.py, tests/calib/prune_memory_bound.py):
the fetched SmolLM2 tokenizer and texts, the random-weight models of scripts/make_scale_model.py,
and a child's peak RSS as the kernel reports it (wait4's ru_maxrss)."""
import os
import subprocess
import tempfile
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fetched(script, *args):
    """The last line a scripts/ fetch script prints (a path under ROOT), None when it fails."""
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", script), *args], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else None


def make_scale_models(tokenizer, shapes):
    """{shape: absolute GGUF path}, or (None, error) when make_scale_model.py fails for a shape."""
    models = {}
    for shape in shapes:
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_scale_model.py"), shape,
                            "--tokenizer", os.path.join(ROOT, tokenizer)], cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"scripts/make_scale_model.py {shape}: {r.stderr.strip()[-300:]}"
        models[shape] = os.path.join(ROOT, r.stdout.strip())
    return models, None


def run_measured(cmd):
    """Runs cmd in a child: (exit code, stderr text, peak RSS in bytes).

    The child is reaped here by wait4 (for its ru_maxrss), so its status comes from wait4, not
    from Popen (which would then see no child and report 0); a signal reads as "killed by signal N"
    in the returned text. Its stderr goes to a file, so a talkative child cannot block on a full
    pipe before it exits; stdout is not kept."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace").strip()
    if proc.returncode < 0:
        stderr = f"killed by signal {-proc.returncode}" + (f"; {stderr}" if stderr else "")
    return proc.returncode, stderr, usage.ru_maxrss * 1024
