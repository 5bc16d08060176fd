#!/usr/bin/env bash
# The package, not the tree: build the sdist and (from it) the wheel, check their metadata, install
# the wheel into a fresh venv outside the checkout, and run what a new user runs first, in an empty
# folder: --version, the four demos, doctor --json. Nothing may be written into the installed package.
# Uses pip's cache (the venv install is the main cost).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
work="$(mktemp -d "${TMPDIR:-/tmp}/tracejudge-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "== build sdist and wheel"
"$PY" -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
ls "$work/dist"
"$PY" -m twine check --strict "$work"/dist/*
"$PY" - "$work"/dist/*.whl <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["tracejudge/_examples/procurement/scenarios.yaml", "tracejudge/_examples/restaurant/rubric.yaml",
        "tracejudge/_examples/calibration/labels.jsonl", "tracejudge/py.typed", "tracejudge_collectors/py.typed"]
missing = [n for n in need if n not in names]
cached = [n for n in names if "__pycache__" in n]
assert not missing, f"the wheel lacks {missing}"
assert not cached, f"the wheel carries bytecode: {cached[:3]}"
print(f"wheel: {len(names)} files, examples included")
PY

echo "== install into a fresh venv outside the checkout"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
"$work/venv/bin/python" -m pip install -q "$work"/dist/*.whl 2>&1 | grep -v "^WARNING: Location" || true
"$work/venv/bin/python" -m pip check
site="$("$work/venv/bin/python" -c 'import pathlib, tracejudge; print(pathlib.Path(tracejudge.__file__).parent)')"
find "$site" -type f | sort >"$work/before.txt"

mkdir "$work/empty"
cd "$work/empty"
# A clean environment: no keys or endpoints from the machine leak into what doctor reports.
run() { env -i PATH="$work/venv/bin:/usr/bin:/bin" HOME="$work/empty" LANG=C.UTF-8 "$@"; }
run tracejudge --version
echo "== tracejudge demo";           run tracejudge demo | grep "9 of 9 scenarios"
echo "== tracejudge demo score";     run tracejudge demo score --json >score.json
run python -c 'import json; s = json.load(open("score.json"))["summary"]; assert (s["pass"], s["fail"], s["indeterminate"]) == (7, 6, 1), s; print("score: 7 pass, 6 fail, 1 indeterminate")'
echo "== tracejudge demo calibrate"; run tracejudge demo calibrate | grep -c "kappa" >/dev/null
echo "== tracejudge demo regress";   run tracejudge demo regress | tail -3
# The procurement README's by-hand build, on the files and traces `tracejudge demo` left here.
echo "== regress build + check by hand"
demo_files=.tracejudge/demo/procurement
run tracejudge regress build --ticket "$demo_files/tickets" --ticket "$demo_files/feedback" \
  --manifest "$demo_files/manifest.jsonl" --out suite/ | tail -1
run tracejudge regress check suite/ | grep "no violations"
echo "== tracejudge doctor --json";  run tracejudge doctor --json >doctor.json
run python -c 'import json; d = json.load(open("doctor.json")); assert d["ok"], d; print("doctor:", ", ".join(c["name"] + " " + c["status"] for c in d["checks"]))'

find "$site" -type f | sort >"$work/after.txt"
if ! diff -u "$work/before.txt" "$work/after.txt"; then
  echo "the demos wrote into the installed package" >&2
  exit 1
fi
echo "wheel: --version, demo, demo score|calibrate|regress and doctor ran from the installed wheel"
