"""Target lookup: paths, programs on $PATH, library short names, and perf's uprobe group names."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import build_fixture, missing
from probectl.target import binary as target_mod
from probectl.errors import TargetError
from probectl.target.binary import (find_library, find_binary, library_name_matches, mapped_libraries,
                             parse_ld_so_cache, read_ld_so_cache, uprobe_group_name)


def _loaded_libc() -> Path:
    """The libc this very process runs with: what 'the running system has loaded' means for libc."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(None, 5)[-1]
        if re.search(r"/libc\.so\.6$", path) or re.search(r"/libc-[\d.]+\.so$", path):
            return Path(path).resolve()
    missing("this process has no libc.so.6 mapped")


def test_program_on_path():
    bash = shutil.which("bash")
    if not bash:
        missing("bash is not installed")
    assert find_binary("bash") == Path(bash).resolve()
    assert find_binary("bash") == Path("/usr/bin/bash").resolve()


@pytest.mark.parametrize("name", ["libc", "libc.so", "libc.so.6", "c"])
def test_libc_short_names(name):
    assert find_binary(name) == _loaded_libc()


def test_other_library_names():
    cache = {soname for soname, _p in read_ld_so_cache()[0]}
    if "libpthread.so.0" not in cache:
        missing("libpthread.so.0 is not in the ld.so cache")
    lib = find_binary("libpthread")
    assert lib.name.startswith("libpthread.so")
    assert find_binary("pthread") == lib == find_binary("libpthread.so.0")


def test_absolute_and_relative_paths(tmp_path, monkeypatch):
    binary = build_fixture("uprobe_target")
    assert find_binary(str(binary)) == binary.resolve()
    link = tmp_path / "my-app"
    link.symlink_to(binary)
    monkeypatch.chdir(tmp_path)
    assert find_binary("./my-app") == binary.resolve()
    assert find_binary("my-app") == binary.resolve(), "a file in the current directory, as perf takes it"
    sub = tmp_path / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)
    assert find_binary("../my-app") == binary.resolve()


def test_missing_name_says_what_was_searched():
    with pytest.raises(TargetError) as err:
        find_binary("no-such-program-or-lib-xyz")
    msg = str(err.value)
    assert "cannot find a program or library called 'no-such-program-or-lib-xyz'" in msg
    assert "$PATH" in msg and "ld.so cache" in msg and "/proc/*/maps" in msg
    assert err.value.hint
    with pytest.raises(TargetError, match="no such file"):
        find_binary("/nonexistent/dir/prog")
    with pytest.raises(TargetError, match="no target"):
        find_binary("")


def test_non_elf_files(tmp_path, monkeypatch):
    text = tmp_path / "data.txt"
    text.write_text("not a program\n")
    with pytest.raises(TargetError, match="not an ELF file"):
        find_binary(str(text))
    with pytest.raises(TargetError, match="directory"):
        find_binary(str(tmp_path))
    # A script on $PATH: the error says it is a script and for which interpreter.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "myscript"
    script.write_text("#!/usr/bin/python3\nprint('hi')\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    with pytest.raises(TargetError) as err:
        find_binary("myscript")
    assert "script for /usr/bin/python3" in str(err.value)


def test_object_file_is_refused(tmp_path):
    obj = tmp_path / "prog.o"
    src = Path(__file__).resolve().parent.parent / "fixtures" / "uprobe_target.c"
    subprocess.run(["gcc", "-c", "-o", str(obj), str(src)], check=True)
    with pytest.raises(TargetError, match="REL"):
        find_binary(str(obj))


def test_library_name_matching():
    assert library_name_matches("libc.so.6", "libc")
    assert library_name_matches("libc.so.6", "c")
    assert library_name_matches("libc.so.6", "libc.so")
    assert library_name_matches("libc.so.6", "libc.so.6")
    assert library_name_matches("libc.so", "libc")
    assert not library_name_matches("libcrypt.so.1", "libc")
    assert not library_name_matches("libc.so.6", "libc.so.7")
    assert library_name_matches("libstdc++.so.6.0.30", "libstdc++")
    assert library_name_matches("ld-linux-x86-64.so.2", "ld-linux-x86-64")


def test_ld_so_cache_matches_ldconfig():
    if not Path("/etc/ld.so.cache").exists():
        missing("/etc/ld.so.cache does not exist")
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    if not os.path.exists(ldconfig):
        missing("ldconfig is not installed")
    entries = parse_ld_so_cache(Path("/etc/ld.so.cache").read_bytes())
    assert entries is not None, "this system's ld.so.cache format is not understood"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    expected = sorted(re.findall(r"^\s+(\S+) \(.*\) => (.+)$", out, re.M))
    assert sorted(entries) == expected
    assert parse_ld_so_cache(b"garbage") is None
    assert parse_ld_so_cache(b"glibc-ld.so.cache1.1" + b"\xff" * 30) is None


def test_mapped_libraries_include_our_libc():
    assert _loaded_libc() in {p.resolve() for p in mapped_libraries()}


def _shared_lib(tmp_path: Path, soname: str) -> Path:
    src = tmp_path / "lib.c"
    src.write_text("int probectl_test_lib_func(int x) { return x + 1; }\n")
    out = tmp_path / soname
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)], check=True)
    return out


def test_ambiguous_library_lists_candidates(tmp_path, monkeypatch):
    one = _shared_lib(tmp_path, "libprobectltest.so.1")
    two = _shared_lib(tmp_path, "libprobectltest.so.2")
    monkeypatch.setattr(target_mod, "read_ld_so_cache",
                        lambda: ([("libprobectltest.so.1", str(one)), ("libprobectltest.so.2", str(two))], "test"))
    monkeypatch.setattr(target_mod, "library_dirs", lambda: [])
    monkeypatch.setattr(target_mod, "mapped_libraries", lambda: [])
    with pytest.raises(TargetError) as err:
        find_binary("libprobectltest")
    assert "several libraries" in str(err.value)
    assert str(one) in str(err.value) and str(two) in str(err.value)
    assert "soname" in err.value.hint
    # The exact soname is not ambiguous.
    assert find_binary("libprobectltest.so.2") == two
    # The one running processes have loaded wins.
    monkeypatch.setattr(target_mod, "mapped_libraries", lambda: [two])
    assert find_binary("probectltest") == two


def test_library_found_only_in_process_maps(tmp_path, monkeypatch):
    lib = _shared_lib(tmp_path, "libprobectlmapped.so.1")
    monkeypatch.setattr(target_mod, "read_ld_so_cache", lambda: ([], "test"))
    monkeypatch.setattr(target_mod, "library_dirs", lambda: [])
    monkeypatch.setattr(target_mod, "mapped_libraries", lambda: [lib])
    assert find_library("libprobectlmapped").path == lib


def test_library_in_standard_dir_but_not_in_cache(tmp_path, monkeypatch):
    lib = _shared_lib(tmp_path, "libprobectldir.so.3")
    (tmp_path / "libprobectldir.so").symlink_to(lib.name)
    (tmp_path / "libprobectldir.a").write_bytes(b"!<arch>\n")
    monkeypatch.setattr(target_mod, "read_ld_so_cache", lambda: ([], "test"))
    monkeypatch.setattr(target_mod, "library_dirs", lambda: [str(tmp_path)])
    monkeypatch.setattr(target_mod, "mapped_libraries", lambda: [])
    assert find_binary("probectldir") == lib
    assert find_binary("libprobectldir.so") == lib


@pytest.mark.parametrize("path,group", [
    ("/lib/x86_64-linux-gnu/libc.so.6", "probe_libc"),
    ("/usr/bin/bash", "probe_bash"),
    ("my-app", "probe_my"),
    ("/opt/x/my_app2.bin", "probe_my_app2"),
    ("libstdc++.so.6", "probe_libstdc"),
    (Path("/usr/bin/python3.11"), "probe_python3"),
])
def test_uprobe_group_name(path, group):
    assert uprobe_group_name(path) == group


def test_uprobe_group_name_too_long():
    with pytest.raises(TargetError, match="longer than"):
        uprobe_group_name("/x/" + "a" * 80)


@pytest.mark.perf
@pytest.mark.parametrize("name", ["my_app-v2", "x.y", "ab12_cd"])
def test_group_name_matches_perf(perf_bin, tmp_path, name):
    binary = tmp_path / name
    shutil.copy(build_fixture("uprobe_target"), binary)
    proc = subprocess.run([perf_bin, "probe", "-x", str(binary), "-D", "add_ints"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"^p:(\w+)/add_ints ", proc.stdout, re.M)
    assert m, proc.stdout
    assert uprobe_group_name(binary) == m.group(1)


@pytest.mark.parametrize("args,flag", [(("", None, None), "-x"), ((None, " ", None), "-k"),
                                       ((None, None, "\t"), "-m")])
def test_an_empty_target_is_not_the_running_kernel(args, flag):
    from probectl.target import find_target

    with pytest.raises(TargetError, match=f"^{flag} was given an empty"):
        find_target(*args)


# --- a process's view of the files (--target-ns, /proc/PID/root): issue 24 -----------------------------

def test_links_are_followed_inside_the_processs_root(tmp_path):
    """An absolute link in a container's tree leads to the container's file, not the host's: the walk
    restarts at the root (as the process's own lookups do), and '..' does not leave it."""
    from probectl.target.process import resolve_in_root

    root = tmp_path / "root"
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "usr" / "lib" / "libx.so.1").write_bytes(b"\x7fELF")
    (root / "lib").symlink_to("/usr/lib")  # absolute: on the host, /usr/lib
    (root / "usr" / "lib" / "libx.so").symlink_to("libx.so.1")
    (root / "up").symlink_to("../../../../usr/lib")
    (root / "loop").symlink_to("/loop")
    assert resolve_in_root(root, "/lib/libx.so", "x") == "/usr/lib/libx.so.1"
    assert resolve_in_root(root, "/up/libx.so", "x") == "/usr/lib/libx.so.1"
    assert resolve_in_root(root, "/usr/./lib/../lib/libx.so", "x") == "/usr/lib/libx.so.1"
    with pytest.raises(TargetError, match="x: no such file"):
        resolve_in_root(root, "/lib/missing.so", "x")
    with pytest.raises(TargetError, match="too many levels of symbolic links"):
        resolve_in_root(root, "/loop", "x")


def test_a_path_under_proc_pid_root_names_the_process_and_its_path():
    from probectl.target.process import root_of, split_proc_root

    assert split_proc_root("/proc/42/root/srv/app/svc") == (42, "/srv/app/svc")
    assert split_proc_root("/proc/42/root") == (42, "/")
    assert split_proc_root("/proc//42/root/./srv//svc") == (42, "/srv/svc")
    assert split_proc_root("/proc/self/root/bin/ls") is None and split_proc_root("/srv/app/svc") is None
    assert root_of(Path("/proc/42/root/srv/app/svc")) == Path("/proc/42/root")
    assert root_of(Path("/usr/bin/ls")) is None


def test_a_process_of_our_namespace_sees_our_files():
    """--target-ns of a process that shares probectl's mount namespace and root: the paths are the
    ordinary ones (what is written to uprobe_events does not change), and a library name is the
    library it maps."""
    from probectl.target.process import ProcessView

    view = ProcessView.of(os.getpid())
    assert view.is_own and view.root == Path("/")
    assert find_binary("libc", view) == _loaded_libc()
    assert find_binary(os.path.realpath("/proc/self/exe"), view) == Path(os.path.realpath("/proc/self/exe"))
    with pytest.raises(TargetError, match=rf"there is no process 999999999"):
        ProcessView.of(999999999)


def test_a_path_in_another_root_is_that_roots_file(tmp_path):
    """A view whose root is another directory (as /proc/PID/root of a container is): the file is looked
    for there, its links followed there, and the path given back goes through the root (the kernel
    resolves it from the host)."""
    from probectl.target.binary import find_in_process
    from probectl.target.process import ProcessView

    binary = build_fixture("uprobe_target")
    root = tmp_path / "root"
    (root / "opt" / "app").mkdir(parents=True)
    shutil.copy(binary, root / "opt" / "app" / "svc")
    (root / "bin").symlink_to("/opt/app")
    view = ProcessView(os.getpid(), root)
    assert find_in_process("/bin/svc", view) == root / "opt" / "app" / "svc"
    assert view.inner_path(root / "opt" / "app" / "svc") == "/opt/app/svc"
    with pytest.raises(TargetError, match=r"/opt/app \(in process \d+\) is a directory"):
        find_in_process("/opt/app", view)
