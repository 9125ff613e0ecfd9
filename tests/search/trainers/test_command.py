"""The command trainer on real processes: its faults fail the trial naming the cause, and stopping it leaves no
process behind. The trainers here are short scripts that misbehave for real; the neutrality test trains the example."""

import re
import subprocess
import sys
import textwrap
import time

import pytest

from search.runner.messages import Evaluated, Finished
from search.runner.outside import CommandSession
from search.trainers import NotNeutral, ProtocolError, TrainerError, TrainerTimeout
from tests.search.trainers.conftest import alive, gone_within, spec_for

START = '{"event": "start", "n_params": 100}'
EVAL = '{"event": "eval", "step": 10, "tokens": 1280, "val_loss": 3.5}'


def _script(tmp_path, body: str):
    """A trainer script that appends `body`'s report lines to $PRISM_TRAINER_REPORT, then does what `body` says."""
    path = tmp_path / "trainer.py"
    header = "import json, os, subprocess, sys, time\nreport = open(os.environ['PRISM_TRAINER_REPORT'], 'a', buffering=1)\n"
    path.write_text(header + textwrap.dedent(body))
    return ["{python}", str(path), "--heads", "{heads}"]


def _start(example_config, tmp_path, body: str, **trainer):
    config = example_config(argv=_script(tmp_path, body), **trainer)
    session = CommandSession()
    return session, session.start(spec_for(config, "1x1,2x1,4x1", baseline=False))


def test_non_zero_exit_fails_with_the_tail_of_stderr(example_config, tmp_path):
    body = f"""
    report.write({START!r} + "\\n")
    print("loading data", file=sys.stderr)
    print("RuntimeError: CUDA out of memory (tried to allocate 2 GiB)", file=sys.stderr)
    sys.exit(3)
    """
    session, _ = _start(example_config, tmp_path, body)
    with pytest.raises(TrainerError, match=r"exited with code 3; stderr: loading data \| RuntimeError: CUDA out of memory"):
        session.advance()


def test_a_bad_line_fails_naming_its_line_number(example_config, tmp_path):
    body = f"""
    report.write({START!r} + "\\n")
    report.write({EVAL!r} + "\\n")
    report.write('{{"event": "eval", "step": 20, "val_loss": 3.1}}\\n')
    time.sleep(60)
    """
    session, _ = _start(example_config, tmp_path, body)
    assert isinstance(session.advance(), Evaluated)
    with pytest.raises(ProtocolError, match=r"report.jsonl line 3: .*'tokens' is a required property"):
        session.advance()


def test_a_line_that_is_not_json_names_its_line(example_config, tmp_path):
    session, _ = _start(example_config, tmp_path, f'report.write({START!r} + "\\nloss=3.2\\n")\ntime.sleep(60)\n')
    with pytest.raises(ProtocolError, match=r"line 2: not a JSON object"):
        session.advance()


def test_a_silent_trainer_is_stopped_at_its_time_limit(example_config, tmp_path):
    session, started = _start(example_config, tmp_path, f'report.write({START!r} + "\\n")\ntime.sleep(600)\n', time_limit_s=1.0)
    began = time.monotonic()
    with pytest.raises(TrainerTimeout, match=r"no protocol line for 1 s"):
        session.advance()
    assert time.monotonic() - began < 10 and not alive(started.where["trainer_pid"])


def test_stop_ends_the_whole_process_group(example_config, tmp_path):
    """Pruning stops the trainer and the child it started (SIGTERM ignored: SIGKILL after the grace period)."""
    body = f"""
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    report.write(json.dumps({{"event": "start", "n_params": 100, "child": child.pid}}) + "\\n")
    report.write({EVAL!r} + "\\n")
    time.sleep(600)
    """
    session, started = _start(example_config, tmp_path, body, grace_s=0.5)
    child = session.trial.start["child"]
    assert isinstance(session.advance(), Evaluated) and alive(child)
    finished = session.stop()
    assert isinstance(finished, Finished) and finished.result.stopped_early and finished.result.curve[-1].step == 10
    assert not alive(started.where["trainer_pid"]) and gone_within(child)  # the trainer was waited for, its child not


def test_a_dead_worker_leaves_no_trainer_behind(example_config, tmp_path):
    """The worker is killed outright (as Ray does at shutdown): its guard ends the trainer's group."""
    config = example_config(argv=_script(tmp_path, f'report.write({START!r} + "\\n")\ntime.sleep(600)\n'))
    code = (
        "import sys, os, pickle\n"
        "from search.runner.outside import CommandSession\n"
        "started = CommandSession().start(pickle.loads(sys.stdin.buffer.read()))\n"
        "print(started.where['trainer_pid'], flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    import pickle

    worker = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(spec_for(config, "4x3", baseline=False)), capture_output=True, check=False
    )
    assert gone_within(int(worker.stdout.decode().split()[0]))


def test_a_schedule_with_another_parameter_count_is_refused(example_config):
    """The example's per-head gate gives each layer one parameter per head, so 1x1,2x1,4x1 has 7 gates, the uniform
    baseline one per layer: the trial fails at its start line with both counts, 4 apart."""
    config = example_config(argv=[*example_config().trainer.argv, "--per-head-gate"])
    assert str(config.baseline) == "1x3"
    with pytest.raises(NotNeutral) as e:
        CommandSession().start(spec_for(config, "1x1,2x1,4x1"))
    numbers = re.search(r"1x1,2x1,4x1 builds ([\d,]+) parameters, the uniform baseline 1x3 ([\d,]+) \(param_tolerance 0\)", str(e.value))
    assert numbers, str(e.value)
    trial, uniform = (int(n.replace(",", "")) for n in numbers.groups())
    assert trial - uniform == (1 + 2 + 4) - 3


def test_a_crash_s_error_is_its_last_lines_without_traceback_carets_and_the_folder_keeps_the_call(example_config, tmp_path):
    """Python's traceback marks the failing expression with `^^^^` and `~~~` lines, which say nothing once joined on
    one line; the trial's folder keeps the command that ran, so the crash can be run again by hand."""
    import json

    body = """
    report.write('{"event": "start", "n_params": 100, "flops_per_token": 0}' + "\\n")
    value = {"a": 1}
    print(value["a"] + value["b"])
    """
    session, started = _start(example_config, tmp_path, body)
    with pytest.raises(TrainerError) as failed:
        session.advance()
    assert "KeyError: 'b'" in str(failed.value) and "^" not in str(failed.value) and "~" not in str(failed.value)
    folder = started.where["folder"]
    assert "^" in (tmp_path / folder / "stderr.log").read_text()  # Python wrote them; the error left them out
    call = json.loads((tmp_path / folder / "call.json").read_text())
    assert call["call"] == started.where["call"] and "trainer.py --heads 1,2,4" in call["call"]
    assert call["request"]["schedule"] == "1x1,2x1,4x1" and (tmp_path / folder / "stderr.log").is_file()
