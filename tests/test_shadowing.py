"""The installed package cannot be shadowed by a folder named attngraph: a script run from the parent of a clone
called attngraph (the folder is then the first entry of sys.path) imports the package, not the clone's folder as
a namespace package. The Makefile's editable install (editable_mode=compat) puts the project on sys.path, where a
regular package wins over namespace portions; setuptools' default import hook is consulted after sys.path."""
import subprocess
import sys
from pathlib import Path

import attngraph

PACKAGE = Path(attngraph.__file__).resolve()


def test_a_folder_named_attngraph_beside_the_script_does_not_shadow_the_package(tmp_path):
    (tmp_path / "attngraph" / "docs").mkdir(parents=True)           # a clone's folder: no __init__.py at its top
    script = tmp_path / "script.py"
    script.write_text("import attngraph\nprint(attngraph.__file__)\nprint(attngraph.__version__)\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    where, version = done.stdout.split()
    assert Path(where).resolve() == PACKAGE and version == attngraph.__version__
