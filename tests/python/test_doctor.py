"""`python -m cucore doctor`: the report's sections and verdict, and its --json
form naming every component. CPU only."""
import subprocess
import sys


def test_doctor_runs():
    r = subprocess.run([sys.executable, "-m", "cucore", "doctor"], capture_output=True, text=True)
    assert "Components" in r.stdout and "verdict:" in r.stdout, r.stderr
    j = subprocess.run([sys.executable, "-m", "cucore", "doctor", "--json"], capture_output=True, text=True)
    import json

    data = json.loads(j.stdout)
    assert {"components", "devices", "verdict"} <= set(data)
    assert any(c["name"] == "nvrtc" for c in data["components"])
