"""A uid per sandbox: leases never handed out twice at once, never a uid a process still runs as, never a user's;
and real sandboxes of a root judge, started at once, run as uids of their own, neither the judge's nor each
other's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import SimpleNamespace

import pytest

from evalkit.sandbox.uid_pool import NoSandboxUid, UidLease

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only a root judge gives sandboxes uids of their own")


def test_a_uid_leased_is_not_leased_again_until_given_back(tmp_path):
    uids = range(61000, 61002)
    first = UidLease.take(tmp_path, uids)
    second = UidLease.take(tmp_path, uids)
    assert {first.uid, second.uid} == set(uids) and first.identity == (first.uid, first.uid)
    with pytest.raises(NoSandboxUid, match="61000-61001"):
        UidLease.take(tmp_path, uids)
    first.release()
    first.release()  # idempotent
    assert UidLease.take(tmp_path, uids).uid == first.uid


def test_a_lease_holds_across_processes(tmp_path):
    # Another launcher (the build pool, a judge process, another run) must not get the same uid meanwhile.
    held = UidLease.take(tmp_path, range(61000, 61001))
    other = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from pathlib import Path
        from evalkit.sandbox.uid_pool import NoSandboxUid, UidLease
        try:
            UidLease.take(Path({str(tmp_path)!r}), range(61000, 61001))
        except NoSandboxUid:
            print("refused")
        """)], capture_output=True, text=True, timeout=60)
    assert other.stdout.strip() == "refused", other.stderr
    held.release()


def test_a_uid_that_a_process_still_runs_as_or_a_user_has_is_never_leased(tmp_path):
    # Root (a user of every machine, in use here too) is never leased; nor is a uid a process still runs as (one
    # that escaped an earlier sandbox's kill), until it is gone.
    with pytest.raises(NoSandboxUid):
        UidLease.take(tmp_path, range(0, 1))
    if os.geteuid() != 0:
        mine = os.geteuid()
        with pytest.raises(NoSandboxUid):
            UidLease.take(tmp_path, range(mine, mine + 1))
        return
    left_behind = subprocess.Popen(["sleep", "60"], user=61500, group=61500, extra_groups=[])
    try:
        with pytest.raises(NoSandboxUid):
            UidLease.take(tmp_path, range(61500, 61501))
    finally:
        left_behind.kill()
        left_behind.wait()
    assert UidLease.take(tmp_path, range(61500, 61501)).uid == 61500


UID_AT_IMPORT = """
import getpass, os, time
time.sleep({sleep})  # both sandboxes alive at once
raise RuntimeError(f"uid={{os.getuid()}} gid={{os.getgid()}} groups={{os.getgroups()}} user={{getpass.getuser()}}")
"""


@as_root
def test_sandboxes_started_at_once_run_as_uids_of_their_own(tmp_path):
    from evalkit.judge import builder
    from evalkit.sandbox.identity import unprivileged_identity
    from evalkit.sandbox.launcher import Limits

    pool = unprivileged_identity()
    if pool is None:
        pytest.skip("no uid of the pool can import torch and evalkit here (the judge warned with what to change)")
    limits = replace(Limits(group=f"test-uids-{uuid.uuid4().hex[:8]}"), run_as=pool)
    codes = [UID_AT_IMPORT.format(sleep=2.0) + f"# sandbox {n}\n" for n in range(2)]
    with ThreadPoolExecutor(2) as threads:
        outcomes = list(threads.map(lambda code: builder.build(code, tmp_path / "cache", "cpu", 120, limits), codes))
    seen = [outcome.message for outcome in outcomes]
    uids = {message.split("uid=")[1].split()[0] for message in seen}
    assert len(uids) == 2 and str(os.geteuid()) not in uids and "0" not in uids, seen
    assert all("groups=[]" in message for message in seen), seen
    # A uid that names no user still has a name to give (torch.compile asks for one).
    assert all("user=evalkit-sandbox" in message for message in seen), seen


def test_an_unprivileged_judge_says_its_sandboxes_share_its_uid_and_what_to_change(monkeypatch, caplog):
    from evalkit.sandbox import identity

    monkeypatch.setattr(identity.os, "geteuid", lambda: 1000)
    with caplog.at_level("WARNING", logger="evalkit.sandbox.identity"):
        assert identity.unprivileged_identity() is None
    assert "sandboxes run as your own uid (1000)" in caplog.text and "run evalkit as root" in caplog.text


WRITES_ITS_INDUCTOR_CACHE = """
import os
cache = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "io")
os.makedirs(cache)  # what torch.compile does first
raise RuntimeError(f"made {{cache}}")
"""


@as_root
def test_what_a_worker_made_as_root_after_its_folder_was_handed_over_is_its_uids(tmp_path, monkeypatch):
    # A worker started ahead may still be preloading when its answer comes and the judge hands its folder over;
    # starting the profiler then makes torch.compile's cache folder as root, and the answer's torch.compile failed
    # with EACCES (seen on a GPU host under load). Played here by making that folder right after the hand-over.
    from evalkit.judge import builder
    from evalkit.sandbox import launcher
    from evalkit.sandbox.identity import unprivileged_identity

    pool = unprivileged_identity()
    if pool is None:
        pytest.skip("no uid of the pool can import torch and evalkit here (the judge warned with what to change)")
    handed = launcher.hand_over

    def late_preload(folder, run_as):
        handed(folder, run_as)
        if folder.name.startswith("evalkit-build-"):
            (folder / "torchinductor").mkdir()  # root's: the preload went on after the hand-over

    monkeypatch.setattr(launcher, "hand_over", late_preload)
    limits = replace(launcher.Limits(group=f"test-uids-{uuid.uuid4().hex[:8]}"), run_as=pool)
    outcome = builder.build(WRITES_ITS_INDUCTOR_CACHE.format(), tmp_path / "cache", "cpu", 120, limits)
    assert "made " in outcome.message and "Permission denied" not in outcome.message, outcome.message


@as_root
def test_a_passed_probe_is_remembered_for_its_key_only_and_a_failed_one_never(tmp_path, monkeypatch):
    from evalkit.sandbox import identity

    real_run, probes = identity.subprocess.run, []

    def counted(*args, **kwargs):
        probes.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(identity.subprocess, "run", counted)
    remembered = tmp_path / "cache" / "sandbox-identity.json"
    first = identity.unprivileged_identity(remembered)
    if first is None:
        pytest.skip("no uid of the pool can import torch and evalkit here (the judge warned with what to change)")
    assert len(probes) == 1 and remembered.stat().st_mode & 0o777 == 0o644
    assert identity.unprivileged_identity(remembered) is not None and len(probes) == 1  # remembered: not probed
    for damaged in ("{not json", '{"passed": "not a list"}', "[1, 2]"):  # a file spoilt: probed again, then mended
        remembered.write_text(damaged)
        assert identity.unprivileged_identity(remembered) is not None
        assert identity.probe_key() in json.loads(remembered.read_text())["passed"]
    assert len(probes) == 4
    assert identity.unprivileged_identity() is not None and len(probes) == 5  # no file given: probed
    monkeypatch.setattr(identity, "probe_key", lambda: "another host, or torch installed anew")
    monkeypatch.setattr(identity, "_PROBE", "raise SystemExit(3)")  # a uid that cannot run the worker there
    assert identity.unprivileged_identity(remembered) is None and len(probes) == 6
    assert identity.unprivileged_identity(remembered) is None and len(probes) == 7  # a failure is never remembered


def test_a_probes_key_follows_the_folders_down_to_torch_and_evalkit(monkeypatch):
    from evalkit.sandbox import identity

    key = identity.probe_key()
    assert identity.probe_key() == key
    real_stat = identity.os.stat
    evalkit_folder = str(identity.package_root() / "evalkit")

    def chmodded(path, *args, **kwargs):  # the package's folder closed to others since the probe passed
        info = real_stat(path, *args, **kwargs)
        if str(path) != evalkit_folder:
            return info
        fields = {name: getattr(info, name) for name in dir(info) if name.startswith("st_")}
        return SimpleNamespace(**{**fields, "st_mode": info.st_mode & ~0o005})

    monkeypatch.setattr(identity.os, "stat", chmodded)
    assert identity.probe_key() != key
