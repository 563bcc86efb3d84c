"""Record lingam 1.13's results for the comparison tests into tests/fixtures/lingam/.

Run where lingam 1.13.0 is installed (``pip install ".[test,lingam]"``), from
the repository root, with the package built in place or installed::

    python tools/record_lingam_fixtures.py                 # every test module
    python tools/record_lingam_fixtures.py tests/test_estimator.py ...

It runs the tests with ``PARALINGAM_LINGAM_FIXTURES=record``: every call the
tests make on lingam (through ``tests/lingam_oracle.py``) goes to lingam, and
its results are written, one gzip'd JSON file per test module, when the session
ends. Only lingam's outputs are stored; the tests rebuild their inputs from
seeds. A module's file is rewritten as a whole, so run every test of a
module (GPU tests record only on a machine where they run). Prints the
fixture files and their sizes; exits with pytest's status.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lingam"
LIMIT = 2 << 20  # the folder stays well under 2 MiB


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="*", default=["tests"],
                        help="test files or folders (default: tests)")
    args = parser.parse_args(argv)
    try:
        import lingam
    except ImportError:
        sys.exit("lingam is not installed: pip install 'lingam==1.13.0' (a separate venv)")
    if lingam.__version__ != "1.13.0":
        sys.exit(f"the fixtures are lingam 1.13.0's results; found lingam {lingam.__version__}")
    env = dict(os.environ, PARALINGAM_LINGAM_FIXTURES="record")
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *args.tests], cwd=ROOT, env=env)
    files = sorted(FIXTURES.glob("*.json.gz"))
    total = sum(f.stat().st_size for f in files)
    for f in files:
        print(f"{f.stat().st_size / 1024:8.1f} KiB  {f.relative_to(ROOT)}")
    print(f"{total / 1024:8.1f} KiB  in all ({len(files)} files)")
    if rc != 0:
        print("warning: some tests failed; lingam's results after a failure in a test are "
              "not recorded: fix them and record again", file=sys.stderr)
    if total > LIMIT:
        print(f"warning: the fixtures exceed {LIMIT >> 20} MiB", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
