"""What a fresh Python process asks to import, found or not.

"Never loads pandas" must hold whether or not pandas is installed: the test venv has none
(Snakemake imports it at every start where it is installed, .ci/slurm/executor.sh), so a check of
``sys.modules`` alone could not fail. ``RECORDER`` puts a finder first on ``sys.meta_path`` that
notes every top-level name looked up and lets the others find it.
"""

RECORDER = """import sys
class _Asked:
    def __init__(self):
        self.names = set()
    def find_spec(self, name, path=None, target=None):
        self.names.add(name.partition(".")[0])
        return None
ASKED = _Asked()
sys.meta_path.insert(0, ASKED)
"""


def asked(names: tuple[str, ...]) -> str:
    """An expression for code run after ``RECORDER``: which of ``names`` it looked up or imported."""
    return f"sorted((ASKED.names | {{m.partition('.')[0] for m in sys.modules}}) & set({names!r}))"
