"""output_lock: a second writer of the same folder is refused, never interleaved."""

import subprocess
import sys
import textwrap

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import output_lock


def test_second_writer_in_another_process_is_refused(tmp_path):
    holder = textwrap.dedent(f"""
        import sys, time
        from rosetrain.core.io import output_lock
        with output_lock({str(tmp_path)!r}):
            print("held", flush=True)
            sys.stdin.readline()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RosetrainError, match="another rosetrain process"):
            with output_lock(tmp_path):
                pass
    finally:
        proc.communicate("\n", timeout=30)
    with output_lock(tmp_path):  # released when the holder exits
        pass


def test_lock_is_released_when_the_holder_is_killed(tmp_path):
    holder = f"from rosetrain.core.io import output_lock\nimport time\nwith output_lock({str(tmp_path)!r}):\n    print('held', flush=True); time.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    proc.kill()
    proc.wait(timeout=30)
    with output_lock(tmp_path):
        pass
