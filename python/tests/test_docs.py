"""The documentation's examples run: every ```python block of docs/PYTHON.md and of
the README's Python section, each as a program of its own in a fresh directory."""
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO


def blocks(path, section=None):
    text = open(os.path.join(REPO, path)).read()
    if section:
        start = text.index(section)
        end = text.find("\n## ", start + len(section))
        text = text[start:end if end >= 0 else len(text)]
    return re.findall(r"```python\n(.*?)```", text, re.S)


EXAMPLES = [("docs/PYTHON.md", i, b) for i, b in enumerate(blocks("docs/PYTHON.md"))] + \
           [("README.md", i, b) for i, b in enumerate(blocks("README.md", "## Python\n"))]


def test_there_are_examples():
    assert len([e for e in EXAMPLES if e[0] == "docs/PYTHON.md"]) >= 6
    assert any(e[0] == "README.md" for e in EXAMPLES)


@pytest.mark.parametrize("path,index,code", EXAMPLES, ids=["%s-%d" % (e[0], e[1]) for e in EXAMPLES])
def test_example_runs(path, index, code, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, "%s example %d failed:\n%s\n%s" % (path, index, r.stdout, r.stderr)
    assert r.stdout.strip(), "the example printed nothing"
    assert "Traceback" not in r.stderr
