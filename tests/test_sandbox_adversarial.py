"""Adversarial tests for the sandbox: one per isolation property in metaagentx.mas.sandbox.

Each runs hostile code and checks it was contained: the result comes back, the attack failed,
and the test process (and the machine) are fine afterwards. Properties that need root and
Linux namespaces skip with the sandbox's own reason when those are missing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from metaagentx.mas.sandbox import (
    Sandbox,
    default_sandbox,
    run_interactive,
    run_untrusted,
    run_untrusted_async,
)

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]


def _need_namespaces() -> None:
    info = default_sandbox().isolation()
    if not info.namespaces:
        pytest.skip(f"sandbox has no namespaces ({info.reason}); lost: {', '.join(info.lost)}")


def _pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_infinite_loop_is_killed_at_the_wall_clock_timeout():
    res = run_untrusted("while True:\n    pass\n", timeout_s=1.0, memory_mb=256)
    assert res.timed_out
    assert res.killed_reason == "timeout"
    assert res.exit_code == -9


def test_cpu_time_limit_is_set_from_the_timeout():
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU))"
    res = run_untrusted(code, timeout_s=2.5, memory_mb=256)
    assert res.stdout.strip() == "(4, 5)"  # ceil(2.5) + 1 soft, + 1 hard (SIGKILL)


def test_double_forked_setsid_daemon_dies_with_the_job():
    _need_namespaces()
    code = """
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, os.readlink('/proc/self').encode() + b'\\n')  # pid as the host sees it
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.wait()
print(os.read(r, 64).decode().strip())
"""
    res = run_untrusted(code, timeout_s=10, memory_mb=256)
    assert res.exit_code == 0, res.stderr
    pid = int(res.stdout)
    assert not _pid_alive(pid), f"daemon pid {pid} outlived its job"


def test_memory_bomb_hits_the_address_space_limit():
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"
    res = run_untrusted(code, timeout_s=20, memory_mb=128)
    assert res.exit_code == 1
    assert "MemoryError" in res.stderr
    big = run_untrusted("x = bytearray(1 << 30)", timeout_s=10, memory_mb=128)
    assert "MemoryError" in big.stderr


def test_fork_bomb_is_capped_by_the_process_limit():
    _need_namespaces()
    code = """
import os, time
n = 0
try:
    while n < 500:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as exc:
    print('blocked', n, type(exc).__name__, os.getuid())
"""
    res = run_untrusted(code, timeout_s=20, memory_mb=256)
    word, n, err, uid = res.stdout.split()
    assert word == "blocked" and err == "BlockingIOError"
    assert 0 < int(n) < 64  # RLIMIT_NPROC = 64 for the job's own uid
    assert not _processes_of_uid(int(uid)), "fork bomb children outlived the job"
    subprocess.run(["true"], check=True)  # the machine can still start processes


def test_runaway_fork_loop_is_contained():
    _need_namespaces()
    res = run_untrusted("import os\nwhile True:\n    os.fork()\n", timeout_s=3, memory_mb=256)
    assert res.exit_code != 0 or res.timed_out
    subprocess.run(["true"], check=True)


def _processes_of_uid(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines = (entry / "status").read_text().splitlines()
            except OSError:
                continue
            uids = next((ln.split()[1:] for ln in lines if ln.startswith("Uid:")), [])
            if str(uid) in uids and _pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def test_network_cannot_reach_a_loopback_listener_of_the_parent():
    _need_namespaces()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    code = f"""
import socket
for host in ('127.0.0.1', '1.1.1.1'):
    try:
        socket.create_connection((host, {port}), timeout=3).close()
        print('connected')
    except OSError as exc:
        print('failed', type(exc).__name__)
"""
    try:
        res = run_untrusted(code, timeout_s=15, memory_mb=256)
        lines = res.stdout.split("\n")
        assert lines[0].startswith("failed") and lines[1].startswith("failed"), res.stdout
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_parent_environment_secrets_do_not_reach_the_child(monkeypatch):
    monkeypatch.setenv("METAAGENTX_TEST_SECRET", "hunter2-sandbox-secret")
    box = Sandbox()  # its server starts after the secret is set
    try:
        code = f"""
import os
print(sorted(os.environ.items()))
try:
    print(open('/proc/{os.getpid()}/environ', 'rb').read())
except OSError as exc:
    print('environ unreadable', type(exc).__name__)
"""
        res = box.run_sync(code, timeout_s=10, memory_mb=256)
    finally:
        box.close()
    assert res.exit_code == 0, res.stderr
    assert "hunter2" not in res.stdout and "METAAGENTX_TEST_SECRET" not in res.stdout
    if box.isolation().namespaces:
        assert "environ unreadable" in res.stdout


def test_writes_outside_the_working_directory_fail(tmp_path):
    _need_namespaces()
    name = f"sandbox-escape-{os.getpid()}"
    targets = [
        f"/tmp/{name}",
        f"/var/tmp/{name}",
        f"/dev/shm/{name}",
        str(ROOT / name),
        str(Path.home() / name),
        str(tmp_path / name),
    ]
    code = f"""
import os
for path in {targets!r} + ['inside.txt']:
    try:
        with open(path, 'w') as f:
            f.write('x')
        print('wrote', path)
    except OSError as exc:
        print('denied', type(exc).__name__)
print(os.getcwd())
"""
    res = run_untrusted(code, timeout_s=10, memory_mb=256)
    lines = res.stdout.splitlines()
    assert lines[:-2] == [line for line in lines[:-2] if line.startswith("denied")], res.stdout
    assert len(lines) == len(targets) + 2 and lines[-2] == "wrote inside.txt", res.stdout
    for path in targets:
        assert not Path(path).exists(), path
    server_view = Path(f"/proc/{default_sandbox().isolation().server_pid}/root{lines[-1]}")
    assert not server_view.exists(), "the working directory was not removed"


def test_file_size_limit(tmp_path):
    _need_namespaces()
    box = Sandbox(fsize_mb=1)
    code = """
try:
    with open('big', 'wb') as f:
        f.write(b'x' * (2 << 20))
    print('wrote')
except OSError as exc:
    print('denied', exc.errno)
"""
    try:
        res = box.run_sync(code, timeout_s=10, memory_mb=256)
    finally:
        box.close()
    assert res.stdout.strip() == "denied 27"  # EFBIG


def test_200_mb_of_output_is_bounded_and_does_not_hang():
    code = (
        "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.write(chunk)\n"
    )
    tracemalloc.start()
    try:
        res = run_untrusted(code, timeout_s=60, memory_mb=256, max_output_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.killed_reason == "output_limit"
    assert len(res.stdout) == 1 << 20 and set(res.stdout) == {"x"}
    assert peak < 16 << 20, f"parent memory peaked at {peak} bytes"


def test_stderr_flood_is_bounded_too():
    code = "import os\nwhile True:\n    os.write(2, b'e' * 65536)\n"
    res = run_untrusted(code, timeout_s=30, memory_mb=256, max_output_bytes=100_000)
    assert res.killed_reason == "output_limit"
    assert len(res.stderr) == 100_000


def test_child_cannot_signal_the_parent_or_the_server():
    _need_namespaces()
    server = default_sandbox().isolation().server_pid
    code = f"""
import os, signal
for pid in ({os.getpid()}, {server}, -1):
    try:
        os.kill(pid, signal.SIGKILL)
        print('sent', pid)
    except OSError as exc:
        print('blocked', type(exc).__name__)
print('ppid', os.getppid())
"""
    res = run_untrusted(code, timeout_s=10, memory_mb=256)
    lines = res.stdout.splitlines()
    assert lines[0] == "blocked ProcessLookupError" and lines[1] == "blocked ProcessLookupError"
    assert lines[-1] == "ppid 0"  # the parent is outside the job's PID namespace
    assert _pid_alive(os.getpid()) and _pid_alive(server)
    assert default_sandbox().isolation().server_pid == server


def test_a_private_home_stays_hidden():
    _need_namespaces()
    home = Path.home()
    if home.stat().st_mode & 0o001:
        pytest.skip(f"{home} is enterable by other users; nothing to hide")
    secret = home / f".metaagentx-sandbox-secret-{os.getpid()}"
    secret.write_text("hunter2")
    secret.chmod(0o644)  # readable by anyone who can reach it
    try:
        res = run_untrusted(f"print(open({str(secret)!r}).read())", timeout_s=10, memory_mb=256)
    finally:
        secret.unlink()
    assert "hunter2" not in res.stdout
    assert "FileNotFoundError" in res.stderr or "PermissionError" in res.stderr, res.stderr


def _wait_until(condition, limit_s: float = 15.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_server_and_jobs_die_when_the_parent_is_killed(tmp_path):
    _need_namespaces()
    script = tmp_path / "parent.py"
    script.write_text(
        "from metaagentx.mas.sandbox import default_sandbox, run_untrusted\n"
        "print(default_sandbox().isolation().server_pid, flush=True)\n"
        "run_untrusted('import time\\ntime.sleep(120)', timeout_s=120, memory_mb=256)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        server = int(proc.stdout.readline())
        children = Path(f"/proc/{server}/task/{server}/children")
        assert _wait_until(lambda: children.read_text().split() != []), "job never started"
        job = int(children.read_text().split()[0])
        assert _pid_alive(job)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert _wait_until(lambda: not _pid_alive(server) and not _pid_alive(job))


def test_other_processes_are_invisible_in_proc():
    _need_namespaces()
    code = f"""
import os
mine = sorted(p for p in os.listdir('/proc') if p.isdigit())
print(mine == [os.readlink('/proc/self')], os.path.exists('/proc/{os.getpid()}'))
try:
    print(open('/proc/{os.getpid()}/cmdline', 'rb').read())
except OSError as exc:
    print('cmdline unreadable', type(exc).__name__)
"""
    res = run_untrusted(code, timeout_s=10, memory_mb=256)
    assert res.stdout.splitlines() == ["True False", "cmdline unreadable FileNotFoundError"]


def test_jobs_cannot_touch_each_other():
    _need_namespaces()
    victim = """
import os, time
from metaagentx.mas.channel import request
with open('secret.txt', 'w') as f:
    f.write('hunter2')
request({'cwd': os.getcwd(), 'pid': os.readlink('/proc/self')})
print(open('secret.txt').read())
"""
    attacks: list[str] = []

    async def handler(obj: dict) -> dict:
        code = f"""
import os, signal
for attempt in ('read', 'write', 'list', 'kill'):
    try:
        if attempt == 'read':
            open({obj["cwd"]!r} + '/secret.txt').read()
        elif attempt == 'write':
            open({obj["cwd"]!r} + '/secret.txt', 'w').write('pwned')
        elif attempt == 'list':
            os.listdir({obj["cwd"]!r})
        else:
            os.kill({obj["pid"]}, signal.SIGKILL)
        print(attempt, 'succeeded')
    except OSError as exc:
        print(attempt, 'blocked')
"""
        res = await run_untrusted_async(code, timeout_s=10, memory_mb=256)
        attacks.append(res.stdout)
        return {}

    res = asyncio.run(run_interactive(victim, timeout_s=30, memory_mb=256, handler=handler))
    assert attacks == ["read blocked\nwrite blocked\nlist blocked\nkill blocked\n"]
    assert res.stdout == "hunter2\n" and res.exit_code == 0
