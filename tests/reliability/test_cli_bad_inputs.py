"""Every subcommand against bad inputs: one line naming the file, a non-zero exit, never a
traceback (issue 22, item 6).

The commands run in-process through ``main`` (seconds for the whole table); the full-disk cases
run in one subprocess under ``ulimit -f``.
"""
import csv
import http.server
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from nnabla_jit.utils.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def fixture(name):
    return os.path.join(FIXTURES, name)


def make_workspace(base):
    """Good inputs of every command under ``base``; returns name -> path."""
    ws = {}
    work = base / "work"
    work.mkdir()
    for name in ("train_mlp.nnp", "train_data.csv", "mlp.nnp", "mlp_params.h5"):
        shutil.copy(fixture(name), str(work / name))
        ws[name] = str(work / name)
    (work / "x.bin").write_bytes(np.zeros((1, 5), np.float32).tobytes())
    ws["x.bin"] = str(work / "x.bin")
    (work / "t.bin").write_bytes(np.zeros((1, 3), np.float32).tobytes())
    ws["t.bin"] = str(work / "t.bin")
    params = work / "params"
    assert main(["decode_param", "-p", ws["mlp_params.h5"], "-o", str(params)]) == 0
    ws["params"] = str(params)
    os.makedirs(work / "data")
    rows = [["x:data", "y:label"]]
    for i in range(3):
        np.savetxt(work / "data" / "{}.csv".format(i), np.full((2, 3), i, np.float32), delimiter=",")
        rows.append(["data/{}.csv".format(i), str(i % 2)])
    with open(work / "set.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    ws["set.csv"] = str(work / "set.csv")
    (work / "loss.series.txt").write_text("0 1.0\n1 0.5\n")
    ws["loss.series.txt"] = str(work / "loss.series.txt")
    (work / "epoch.timer.txt").write_text("0 1.0 1 1.0\n1 1.0 1 2.0\n")
    ws["epoch.timer.txt"] = str(work / "epoch.timer.txt")
    images = work / "images"
    PIL = pytest.importorskip("PIL.Image")
    for label in ("cat", "dog"):
        os.makedirs(images / label)
        PIL.fromarray(np.full((8, 8, 3), 9, np.uint8)).save(str(images / label / "a.png"))
    ws["images"] = str(images)
    detect = work / "detect"
    os.makedirs(detect)
    PIL.fromarray(np.full((16, 16, 3), 9, np.uint8)).save(str(detect / "a.png"))
    (detect / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    ws["detect"] = str(detect)
    return ws


# name -> (argv from (input, output folder), the good input, whether it is a folder)
COMMANDS = {
    "train": (lambda i, o: ["train", "-c", i, "-o", o], "train_mlp.nnp", False),
    "infer -c": (lambda i, o: ["infer", "-c", i, "-o", os.path.join(o, "y"), WS["x.bin"], WS["t.bin"]],
                 "mlp.nnp", False),
    "infer input": (lambda i, o: ["infer", "-c", WS["mlp.nnp"], "-o", os.path.join(o, "y"), i, WS["t.bin"]],
                    "x.bin", False),
    "forward -c": (lambda i, o: ["forward", "-c", i, "-d", WS["train_data.csv"], "-o", o],
                   "train_mlp.nnp", False),
    "forward -d": (lambda i, o: ["forward", "-c", WS["train_mlp.nnp"], "-d", i, "-o", o],
                   "train_data.csv", False),
    "encode_param": (lambda i, o: ["encode_param", "-i", i, "-p", os.path.join(o, "p.h5")],
                     "params", True),
    "decode_param": (lambda i, o: ["decode_param", "-p", i, "-o", o], "mlp_params.h5", False),
    "profile": (lambda i, o: ["profile", "-c", i, "-o", o], "train_mlp.nnp", False),
    "conv_dataset": (lambda i, o: ["conv_dataset", i, os.path.join(o, "set.cache")], "set.csv", False),
    "compare_with_cpu": (lambda i, o: ["compare_with_cpu", "-c", i, "-c2", WS["train_mlp.nnp"], "-o", o],
                         "train_mlp.nnp", False),
    "create_image_classification_dataset": (
        lambda i, o: ["create_image_classification_dataset", "-i", i, "-o", o, "-c", "3", "-w", "8",
                      "-g", "8", "-m", "trimming", "-s", "false", "-f1", "train.csv"], "images", True),
    "create_object_detection_dataset": (
        lambda i, o: ["create_object_detection_dataset", "-i", i, "-o", o, "-n", "1", "-c", "3",
                      "-w", "16", "-g", "16", "-a", "1", "-d", "4", "-m", "trimming", "-s", "false",
                      "-f1", "train.csv"], "detect", True),
    "create_tar": (lambda i, o: ["create_tar", i, os.path.join(o, "set.tar")], "set.csv", False),
    "convert": (lambda i, o: ["convert", i, os.path.join(o, "out.nnp")], "mlp.nnp", False),
    "convert nnb": (lambda i, o: ["convert", i, os.path.join(o, "out.nnb")], "mlp.nnp", False),
    "dump": (lambda i, o: ["dump", i], "mlp.nnp", False),
    "nnb_template": (lambda i, o: ["nnb_template", i, os.path.join(o, "s.yaml")], "mlp.nnp", False),
    "function_info": (lambda i, o: ["function_info", i, "-o", os.path.join(o, "f.txt")], "mlp.nnp", False),
    "plot_series": (lambda i, o: ["plot_series", i, "-o", os.path.join(o, "p.png")], "loss.series.txt", False),
    "plot_timer": (lambda i, o: ["plot_timer", i, "-o", os.path.join(o, "t.png")], "epoch.timer.txt", False),
    "draw_graph": (lambda i, o: ["draw_graph", "-o", o, "-f", "svg", i], "mlp.nnp", False),
    "optimize": (lambda i, o: ["optimize", i, os.path.join(o, "o.nnp")], "mlp.nnp", False),
}
WS = {}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    WS.clear()
    WS.update(make_workspace(tmp_path_factory.mktemp("cli")))
    return WS


@pytest.fixture
def out(workspace, tmp_path, monkeypatch):
    """An empty output folder; the current directory is the workspace's (train_mlp.nnp names
    its dataset relative to it)."""
    monkeypatch.chdir(os.path.dirname(workspace["mlp.nnp"]))
    path = tmp_path / "out"
    path.mkdir()
    return str(path)


def bad_input(kind, good, is_folder, tmp_path):
    """A path of the given kind, named after the good input (same extension)."""
    name = os.path.basename(good)
    path = tmp_path / ("bad_" + name)
    if kind == "missing":
        pass
    elif kind == "directory":
        if is_folder:
            path.write_text("a file, not a folder\n")
        else:
            path.mkdir()
    elif kind == "empty":
        if is_folder:
            path.mkdir()
        else:
            path.write_bytes(b"")
    elif kind == "wrong type":
        if is_folder:
            path.mkdir()
            (path / "junk.txt").write_bytes(b"\x89PNG\r\n\x1a\n\0\0garbage")
            (path / "sub").mkdir()
            (path / "sub" / "junk.png").write_bytes(b"not an image")
        else:
            path.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\xff\xfegarbage,\"\n" * 4)
    return str(path)


def run_cli(capsys, argv):
    try:
        status = main(argv)
    except SystemExit as e:   # argparse
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line_error(status, err, names):
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if ": error: " in line]
    assert status not in (0, None), err
    assert "Traceback" not in err, err
    assert len(errors) == 1, err
    assert any(n in errors[0] for n in names), "{} names none of {}".format(errors[0], names)
    return errors[0]


@pytest.mark.parametrize("kind", ["missing", "directory", "empty", "wrong type"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_input_file(command, kind, workspace, out, tmp_path, capsys):
    build, good, is_folder = COMMANDS[command]
    path = bad_input(kind, workspace[good], is_folder, tmp_path)
    status, _, err = run_cli(capsys, build(path, out))
    assert_one_line_error(status, err, [os.path.basename(path)])


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - {"profile"}))   # 30 s: test_cli_profile
def test_good_input(command, workspace, out, capsys):
    build, good, _ = COMMANDS[command]
    status, _, err = run_cli(capsys, build(workspace[good], out))
    assert status == 0, err


# ------------------------------------------------------------------------ where the output goes
WRITERS = sorted(set(COMMANDS) - {"dump"})


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder nothing can be written into: chmod 0555, or, for root (whom modes do not stop),
    sysfs's root, where no process may create a file."""
    if os.geteuid() != 0:
        path = tmp_path / "read_only"
        path.mkdir()
        path.chmod(0o555)
        yield str(path)
        path.chmod(0o755)
        return
    try:
        open("/sys/nnabla_jit_probe", "w").close()
    except OSError:
        yield "/sys"
        return
    pytest.skip("running as root with no read-only folder to write into")


@pytest.mark.parametrize("command", WRITERS)
def test_read_only_output_folder(command, workspace, out, read_only_folder, capsys):
    build, good, _ = COMMANDS[command]
    status, _, err = run_cli(capsys, build(workspace[good], read_only_folder))
    line = assert_one_line_error(status, err, [read_only_folder])
    assert "Permission denied" in line or "not permitted" in line or "Read-only" in line, line


DRIVER = textwrap.dedent('''
    import contextlib, io, json, os, sys, traceback
    from nnabla_jit.utils.cli import main
    for name, argv in json.load(open(sys.argv[1])):
        err = io.StringIO()
        escaped = None
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                status = main(argv)
            except SystemExit as e:
                status = e.code
            except BaseException:
                status, escaped = None, traceback.format_exc()
        print(json.dumps([name, status, err.getvalue(), escaped]), flush=True)
''')

# the commands whose output of the workspace's inputs is over 1 KB
BIG_WRITERS = ["compare_with_cpu", "convert", "convert nnb", "create_tar", "draw_graph",
               "encode_param", "forward -c", "optimize", "plot_series", "train"]


def test_full_disk(workspace, tmp_path):
    """Under ``ulimit -f 1`` a write past 1 KB fails with EFBIG (Python ignores SIGXFSZ), as on a
    full disk (ENOSPC): one line naming the file written. One subprocess runs every command."""
    cases = []
    for command in BIG_WRITERS:
        build, good, _ = COMMANDS[command]
        folder = tmp_path / command.replace(" ", "_")
        folder.mkdir()
        cases.append((command, build(workspace[good], str(folder))))
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "driver.py").write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run(["bash", "-c", 'ulimit -f 1 && exec "$0" "$@"', sys.executable,
                          str(tmp_path / "driver.py"), str(tmp_path / "cases.json")],
                         capture_output=True, text=True, timeout=600, env=env,
                         cwd=os.path.dirname(workspace["mlp.nnp"]))
    results = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("[")]
    assert [r[0] for r in results] == BIG_WRITERS, run.stderr[-3000:]
    for name, status, err, escaped in results:
        assert escaped is None, "{}: {}".format(name, escaped)
        line = assert_one_line_error(status, err, [str(tmp_path / name.replace(" ", "_"))])
        assert "File too large" in line, line


# ------------------------------------------------------------------------ particular cases
def test_output_folder_that_is_a_file(workspace, out, capsys):
    """FileExistsError from making the output folder."""
    taken = os.path.join(out, "taken")
    open(taken, "w").close()
    status, _, err = run_cli(capsys, ["train", "-c", workspace["train_mlp.nnp"], "-o", taken])
    assert "File exists" in assert_one_line_error(status, err, [taken])


@pytest.mark.parametrize("error, words", [(MemoryError(), "not enough memory to run dump on"),
                                          (RecursionError("maximum recursion depth exceeded"),
                                           "nested too deeply")])
def test_memory_and_recursion_errors_name_the_input(error, words, workspace, out, capsys, monkeypatch):
    from nnabla_jit.utils.converter.nnabla import importer

    def fail(self):
        raise error
    monkeypatch.setattr(importer.NnpImporter, "execute", fail)
    status, _, err = run_cli(capsys, ["dump", workspace["mlp.nnp"]])
    assert words in assert_one_line_error(status, err, [workspace["mlp.nnp"]])


def write_csv_with_a_huge_field(path):
    """A field over the csv module's limit (131072 characters) raises csv.Error."""
    path.write_text("x:data,y:label\n\"{}\",1\n".format("1" * 200000))
    return str(path)


@pytest.mark.parametrize("command", ["forward -d", "create_tar", "conv_dataset"])
def test_csv_error_names_the_file_and_line(command, workspace, out, tmp_path, capsys):
    build, _, _ = COMMANDS[command]
    bad = write_csv_with_a_huge_field(tmp_path / "huge.csv")
    status, _, err = run_cli(capsys, build(bad, out))
    line = assert_one_line_error(status, err, [bad])
    assert "line 2" in line and "field larger than field limit" in line, line


def test_failed_conv_dataset_leaves_no_destination(workspace, out, tmp_path, capsys):
    source = tmp_path / "set.csv"
    source.write_text("x:data,y:label\n{},0\nmissing.csv,1\n".format(
        os.path.join(os.path.dirname(workspace["set.csv"]), "data", "0.csv")))
    destination = os.path.join(out, "set.cache")
    status, _, err = run_cli(capsys, ["conv_dataset", str(source), destination])
    assert_one_line_error(status, err, ["missing.csv"])
    assert os.listdir(out) == []        # neither the cache nor the folder it was built in


def test_failed_conv_dataset_keeps_the_cache_it_would_overwrite(workspace, out, tmp_path, capsys):
    destination = os.path.join(out, "set.cache")
    assert run_cli(capsys, ["conv_dataset", workspace["set.csv"], destination])[0] == 0
    before = sorted(os.listdir(destination))
    source = tmp_path / "set.csv"
    source.write_text("x:data,y:label\nmissing.csv,1\n")
    status, _, err = run_cli(capsys, ["conv_dataset", "-F", str(source), destination])
    assert_one_line_error(status, err, ["missing.csv"])
    assert sorted(os.listdir(destination)) == before and os.listdir(out) == ["set.cache"]


def test_function_info_of_a_folder_fails(tmp_path, capsys):
    folder = tmp_path / "models"
    folder.mkdir()
    status, _, err = run_cli(capsys, ["function_info", str(folder)])
    assert "is a directory" in assert_one_line_error(status, err, [str(folder)])


@pytest.mark.parametrize("name, words", [("model", "not a file with no extension"),
                                         ("model.txt", "not '.txt'")])
def test_optimize_says_which_file_has_which_format(name, words, tmp_path, capsys):
    path = tmp_path / name
    path.write_text("x")
    status, _, err = run_cli(capsys, ["optimize", str(path), str(tmp_path / "o.nnp")])
    assert words in assert_one_line_error(status, err, [str(path)])


# ------------------------------------------------------------------------ upload's server answers
class AnsweringServer(http.server.BaseHTTPRequestHandler):
    """Answers the credential GET with ``get`` and the S3 PUT with ``put``: (status, body), or
    raw bytes that are no HTTP at all."""
    get = put = None

    def answer(self, what):
        if isinstance(what, bytes):
            self.wfile.write(what)
            return
        status, body = what
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer(AnsweringServer.get)

    def do_PUT(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(AnsweringServer.put)

    def log_message(self, *args):
        pass


GOOD_CREDENTIALS = (200, json.dumps({"upload_path": "s3://bucket/user", "access_key_id": "A",
                                     "secret_access_key": "S"}).encode())


@pytest.fixture(scope="module")
def server():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), AnsweringServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:{}".format(httpd.server_port)
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("get, put, words", [
    ((200, b"<html>busy</html>"), None, "did not answer JSON"),
    ((200, b'"a text"'), None, "answered str instead of a JSON object"),
    ((200, b"[1, 2]"), None, "answered list instead of a JSON object"),
    ((200, b'{"upload_path": 5}'), None, "gave the upload path 5"),
    ((200, b'{"upload_path": "s3://bucket"}'), None, "gave the upload path 's3://bucket'"),
    ((200, b'{"upload_path": "s3://bucket/key"}'), None, "gave no access_key_id"),
    ((200, b'{"upload_path": "s3://b/k", "access_key_id": "A", "secret_access_key": 7}'), None,
     "gave no secret_access_key"),
    ((500, b"<html>internal error</html>"), None, "answered HTTP 500"),
    (b"NOT HTTP AT ALL\r\n\r\n", None, "cannot reach"),
    (GOOD_CREDENTIALS, (403, b"<Error>AccessDenied</Error>"), "failed: HTTP 403"),
    (GOOD_CREDENTIALS, b"GARBAGE\r\n\r\n", "cannot upload to"),
])
def test_upload_with_a_malformed_server_answer(get, put, words, server, workspace, capsys, monkeypatch):
    monkeypatch.setattr(AnsweringServer, "get", get)
    monkeypatch.setattr(AnsweringServer, "put", put)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server)   # the PUT goes there too
    status, _, err = run_cli(capsys, ["upload", "-e", server, "TOKEN", workspace["set.csv"]])
    line = assert_one_line_error(status, err, [server.split("//")[1]])
    assert words in line, line
