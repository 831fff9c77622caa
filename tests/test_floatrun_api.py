"""The library call of floatref-run (issue 22, scope item 5): ``symattn.floatrun.run``, also
``sa.floatrun`` lazily; not ``floatref.run``, which would import up the layers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from floatrun_dumps import make_dump
from symattn.cli import main

pytest.importorskip("safetensors")
ROOT = Path(__file__).resolve().parents[1]


def test_sa_floatrun_is_the_package_and_loads_lazily():
    code = ("import sys, symattn as sa\n"
            "before = sorted(m for m in ('symattn.floatrun', 'dask', 'numpy') if m in sys.modules)\n"
            "import symattn.floatrun as fr\n"
            "print(before, sa.floatrun is fr, sa.floatrun.run is fr.run, 'floatrun' in sa.__all__,\n"
            "      hasattr(sa.floatref, 'run'), 'dask' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True", "True", "True", "False", "False"]


def test_the_library_report_is_the_one_the_command_writes(tmp_path, capsys):
    import symattn as sa

    make_dump(tmp_path / "dump", layers=1, heads=2, wrong=False)
    assert main(["floatref-run", str(tmp_path / "dump"), "--causal", "--max-ulp", "4", "--serial", "--quiet",
                 "-o", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    written = json.loads((tmp_path / "report" / "summary.json").read_text(encoding="utf-8"))
    report = sa.floatrun.run(tmp_path / "dump", sa.floatrun.Options(causal="top-left"), max_ulp=4)
    assert report.status == 0 and len(report.heads) == 2
    assert report.to_json()["heads"] == written["heads"]
