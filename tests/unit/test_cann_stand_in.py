"""The stand-in CANN toolkit installer (tests/fixtures/fake-cann-toolkit) honours the real
installer's command line: run here on the host, no engine. What the Ascend recipe's image build does
with it is tests/integration/test_ascend_integration.py."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

STAND_IN = Path(__file__).resolve().parents[1] / "fixtures" / "fake-cann-toolkit"


@pytest.fixture(scope="module")
def installer(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cann")
    made = subprocess.run(["sh", str(STAND_IN / "make_installer.sh"), "8.0.0", str(out)],
                          capture_output=True, text=True, check=True)
    return Path(made.stdout.strip())


def run(installer: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(installer), *args], capture_output=True, text=True, input=stdin)


def test_name_and_bytes_are_reproducible(installer, tmp_path):
    assert installer.name == "Ascend-cann-toolkit_8.0.0_linux-x86_64.run"
    again = subprocess.run(["sh", str(STAND_IN / "make_installer.sh"), "8.0.0", str(tmp_path)],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert hashlib.sha256(Path(again).read_bytes()).digest() == hashlib.sha256(installer.read_bytes()).digest()
    stamped = subprocess.run(["sh", str(STAND_IN / "make_installer.sh"), "8.0.0", str(tmp_path / "s.run"), "x86_64",
                              "session-1"], capture_output=True, text=True, check=True).stdout.strip()
    assert Path(stamped).read_bytes() != installer.read_bytes()


def test_quiet_install_leaves_set_env_and_the_install_info(installer, tmp_path):
    proc = run(installer, "--install", f"--install-path={tmp_path}/Ascend", "--quiet", "--full")
    assert proc.returncode == 0, proc.stderr
    home = tmp_path / "Ascend" / "ascend-toolkit"
    assert os.readlink(home / "latest") == "8.0.0"
    info = (home / "latest" / "x86_64-linux" / "ascend_toolkit_install.info").read_text()
    assert "version=8.0.0\n" in info and f"path={home}/8.0.0/x86_64-linux\n" in info
    env = subprocess.run(["bash", "-c", f'set +u; . {home}/set_env.sh; echo "$ASCEND_HOME_PATH|$ASCEND_OPP_PATH|$LD_LIBRARY_PATH"'],
                         capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    home_path, opp, ld = env.stdout.strip().split("|")
    assert home_path == f"{home}/latest" and opp == f"{home}/latest/opp" and Path(opp).is_dir()
    assert ld.startswith(f"{home}/latest/tools/aml/lib64:")
    # like the real one: it extends unset variables without a default, so `set -u` stops it
    strict = subprocess.run(["bash", "-c", f"set -u; . {home}/set_env.sh"], capture_output=True, text=True,
                            env={"PATH": os.environ["PATH"]})
    assert strict.returncode != 0 and "LD_LIBRARY_PATH: unbound variable" in strict.stderr


@pytest.mark.parametrize("args, stdin, message", [
    (["--install", "--verbose"], "", "Unrecognized parameter: --verbose"),
    (["--check", "--quiet"], "", "--quiet must be used together with --install or --upgrade"),
    (["--install", "--install-path=relative/dir", "--quiet"], "", "--install-path must be an absolute path: relative/dir"),
    (["--install", "--install-path=/tmp/never-installed"], "n\n", "the EULA was not accepted"),
    (["--install", "--uninstall"], "", "--uninstall cannot be combined with --install"),
    (["--quiet"], "", "no operation given"),
])
def test_refusals_exit_1_with_a_message(installer, args, stdin, message):
    proc = run(installer, *args, stdin=stdin)
    assert proc.returncode == 1
    assert message in proc.stderr.strip().splitlines()[-1]
    assert not Path("/tmp/never-installed").exists()


def test_eula_accepted_on_stdin_installs(installer, tmp_path):
    proc = run(installer, "--install", f"--install-path={tmp_path}", stdin="y\n")
    assert proc.returncode == 0 and "Do you accept the EULA" in proc.stdout
    assert (tmp_path / "ascend-toolkit" / "set_env.sh").is_file()


def test_check_extract_upgrade_uninstall(installer, tmp_path):
    assert "All good." in run(installer, "--check").stdout
    assert run(installer, "--noexec", f"--extract={tmp_path}/x").returncode == 0
    assert (tmp_path / "x" / "8.0.0" / "version.cfg").is_file()
    assert run(installer, "--upgrade", "--quiet", f"--install-path={tmp_path}/A").returncode == 1  # nothing to upgrade
    assert run(installer, "--install", "--quiet", f"--install-path={tmp_path}/A").returncode == 0
    assert run(installer, "--upgrade", "--quiet", f"--install-path={tmp_path}/A").returncode == 0
    assert run(installer, "--uninstall", f"--install-path={tmp_path}/A").returncode == 0
    assert not (tmp_path / "A" / "ascend-toolkit").exists()


def test_a_damaged_payload_is_refused(installer, tmp_path):
    damaged = tmp_path / installer.name
    data = bytearray(installer.read_bytes())
    data[-100] ^= 0xFF
    damaged.write_bytes(bytes(data))
    proc = run(damaged, "--install", "--quiet", f"--install-path={tmp_path}/A")
    assert proc.returncode == 1 and "the package is damaged" in proc.stderr
    assert not (tmp_path / "A").exists()
