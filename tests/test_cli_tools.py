"""nnabla_cli's dataset and parameter tools in the ``nnabla_jit`` command: encode_param,
decode_param, conv_dataset, create_tar, upload (against a local HTTP server), ``-m/--mpi``,
the ``nnabla_cli`` alias and nnabla's per-command module paths; and the logger's settings."""
import csv
import http.server
import json
import os
import subprocess
import sys
import tarfile
import threading
import urllib.parse

import numpy as np
import pytest

import nnabla_jit as nn
from nnabla_jit.utils.cli import main

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# ------------------------------------------------------------------------ encode / decode
def test_decode_then_encode_param_round_trips(tmp_path, capsys):
    params = os.path.join(FIXTURES, "mlp_params.h5")
    status, _, err = run_cli(capsys, "decode_param", "-p", params, "-o", str(tmp_path / "txt"))
    assert status == 0, err
    names = sorted(os.listdir(tmp_path / "txt"))
    assert names == ["fc1~affine~W.txt", "fc1~affine~b.txt", "fc2~affine~W.txt",
                     "fc2~affine~b.txt", "fc3~affine~W.txt", "fc3~affine~b.txt"]
    with open(tmp_path / "txt" / "fc1~affine~b.txt") as f:
        assert f.readline() == "(8,)\n"
    nn.clear_parameters()
    nn.load_parameters(params)
    expected = {k: v.d.copy() for k, v in nn.get_parameters(grad_only=False).items()}
    nn.clear_parameters()
    out = str(tmp_path / "again.h5")
    status, _, err = run_cli(capsys, "encode_param", "-i", str(tmp_path / "txt"), "-p", out)
    assert status == 0, err
    nn.clear_parameters()
    nn.load_parameters(out)
    got = nn.get_parameters(grad_only=False)
    assert sorted(got) == sorted(expected)
    for k, v in expected.items():
        np.testing.assert_array_equal(got[k].d, v)
    nn.clear_parameters()


def test_encode_param_rejects_a_bad_file(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "w.txt").write_text("(2, 3)\n1\n2\n")
    status, _, err = run_cli(capsys, "encode_param", "-i", str(tmp_path / "in"), "-p",
                             str(tmp_path / "p.h5"))
    assert status == 1 and "shape (2, 3) needs 6 values, the file has 2" in err
    nn.clear_parameters()


# ------------------------------------------------------------------------ datasets
def _image_dataset(tmp_path, rows=5):
    """A CSV dataset whose rows name small CSV data files (as NNC datasets do)."""
    os.makedirs(tmp_path / "data", exist_ok=True)
    lines = [["x:data", "y:label"]]
    for i in range(rows):
        name = "data/{}.csv".format(i)
        np.savetxt(tmp_path / name, np.full((2, 3), i, np.float32), delimiter=",")
        lines.append([name, str(i % 2)])
    path = tmp_path / "set.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(lines)
    return str(path)


def test_conv_dataset_writes_a_cache_that_reads_back(tmp_path, capsys):
    from nnabla_jit.utils.data_source_implements import CacheDataSource
    source = _image_dataset(tmp_path)
    dest = str(tmp_path / "set.cache")
    status, out, err = run_cli(capsys, "conv_dataset", source, dest)
    assert status == 0, err
    assert "Number of Data: 5" in out
    with CacheDataSource(dest, shuffle=False) as ds:
        assert ds.size == 5 and list(ds.variables) == ["x", "y"]
        x, y = ds._get_data(3)
        np.testing.assert_array_equal(x, np.full((2, 3), 3, np.float32))
    status, _, err = run_cli(capsys, "conv_dataset", source, dest)
    assert status == 1 and "-F/--force" in err
    status, _, err = run_cli(capsys, "conv_dataset", "-F", "-S", dest, str(tmp_path / "b.cache"))
    assert status == 0, err
    with CacheDataSource(str(tmp_path / "b.cache"), shuffle=False) as ds:
        assert ds.size == 5
    status, _, err = run_cli(capsys, "conv_dataset", "-t", "0", source, str(tmp_path / "c.cache"))
    assert status == 1 and "num_of_threads" in err


def test_create_tar_packs_index_and_files(tmp_path, capsys):
    source = _image_dataset(tmp_path, rows=3)
    dest = str(tmp_path / "set.tar")
    status, _, err = run_cli(capsys, "create_tar", source, dest)
    assert status == 0, err
    with tarfile.open(dest) as tar:
        names = tar.getnames()
        index = tar.extractfile("index.csv").read().decode().splitlines()
    assert names == ["index.csv", "data/000000000000_0.csv", "data/000000000001_1.csv",
                     "data/000000000002_2.csv"]
    assert index[0] == "x:data,y:label" and index[2] == "data/000000000001_1.csv,1"


# ------------------------------------------------------------------------ upload
class _FakeNnc(http.server.BaseHTTPRequestHandler):
    """The credential endpoint of NNC and an S3 bucket, in one local server."""
    received = {}

    def do_GET(self):
        parts = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        _FakeNnc.received["query"] = query
        if parts.path != "/v1/misc/credential" or query.get("encrypted_text") != "TOKEN":
            body = {"message": "bad token"}
        else:
            body = {"upload_path": "s3://bucket/user/42", "access_key_id": "AKID",
                    "secret_access_key": "SECRET", "session_token": "SESSION"}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        size = int(self.headers["Content-Length"])
        _FakeNnc.received.update(path=self.path, body=self.rfile.read(size),
                                 headers=dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_nnc(monkeypatch):
    server = http.server.HTTPServer(("127.0.0.1", 0), _FakeNnc)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = "http://127.0.0.1:{}".format(server.server_port)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
    _FakeNnc.received = {}
    yield url
    server.shutdown()
    server.server_close()


def test_upload_sends_the_tar_signed_to_the_upload_path(tmp_path, capsys, fake_nnc):
    source = _image_dataset(tmp_path, rows=2)
    status, out, err = run_cli(capsys, "upload", "-e", fake_nnc, "TOKEN", source)
    assert status == 0, err
    got = _FakeNnc.received
    assert got["query"]["dataset_name"] == "set" and int(got["query"]["dataset_size"]) > 0
    assert got["path"] == "/bucket/user/42/set.tar"
    auth = got["headers"]["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKID/") and "/s3/aws4_request" in auth
    assert got["headers"]["x-amz-security-token"] == "SESSION"
    tar_path = tmp_path / "got.tar"
    tar_path.write_bytes(got["body"])
    with tarfile.open(tar_path) as tar:
        assert "index.csv" in tar.getnames() and "data/000000000001_1.csv" in tar.getnames()
    assert "Finished" in out


def test_upload_reports_a_refused_token_and_an_unreachable_server(tmp_path, capsys, fake_nnc):
    source = _image_dataset(tmp_path, rows=1)
    status, _, err = run_cli(capsys, "upload", "-e", fake_nnc, "WRONG", source)
    assert status == 1 and "bad token" in err
    status, _, err = run_cli(capsys, "upload", "-e", "http://127.0.0.1:9", "TOKEN", source)
    lines = [l for l in err.splitlines() if "error" in l]
    assert status == 1 and len(lines) == 1 and "cannot reach http://127.0.0.1:9" in lines[0]


def test_s3_signature_matches_aws_documented_example():
    """AWS's Signature V4 documentation example (GET /test.txt, examplebucket)."""
    import datetime
    from nnabla_jit.utils.cli.uploader import s3_put_headers
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    headers = s3_put_headers("GET", "https://examplebucket.s3.amazonaws.com/photos/photo1.jpg",
                             empty, {"access_key_id": "AKIAIOSFODNN7EXAMPLE",
                                     "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
                             "us-east-1", now=datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc))
    assert headers["x-amz-date"] == "20130524T000000Z"
    assert "SignedHeaders=host;x-amz-content-sha256;x-amz-date" in headers["Authorization"]
    assert len(headers["Authorization"].rsplit("Signature=", 1)[1]) == 64


# ------------------------------------------------------------------------ command line
def test_mpi_flag_runs_the_command_in_a_single_process(capsys, monkeypatch):
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE", raising=False)
    status, out, _ = run_cli(capsys, "-m", "version")
    assert status == 0 and "Version:" in out


def test_nnabla_cli_console_script_is_declared(monkeypatch, capsys):
    text = open(os.path.join(REPO, "pyproject.toml")).read()
    assert 'nnabla_cli = "nnabla_jit.utils.cli:main"' in text
    monkeypatch.setattr(sys, "argv", ["/usr/bin/nnabla_cli"])
    assert main(["encode_param", "-i", "/no/such/dir", "-p", "x.h5"]) == 1
    assert capsys.readouterr().err.startswith("nnabla_cli encode_param: error: ")


def test_nnabla_module_paths_of_the_commands(tmp_path, capsys):
    from nnabla_jit.utils.cli import cli, conv_dataset, encode_decode_param, uploader
    assert callable(encode_decode_param.encode_param_command)
    assert callable(conv_dataset.conv_dataset_command)
    assert callable(uploader.create_tar_command)
    parser_args = __import__("nnabla_jit.utils.cli", fromlist=["build_parser"]).build_parser()
    args = parser_args.parse_args(["version"])
    assert cli.cli_main(parser_args, args) == 0
    assert "Version:" in capsys.readouterr().out


# ------------------------------------------------------------------------ logger
def _logger_run(tmp_path, conf, code):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("NNABLA_JIT_LOG_LEVEL", None)
    (tmp_path / "nnabla.conf").write_text(conf)
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_logger_prints_info_by_default(tmp_path):
    r = _logger_run(tmp_path, "", "from nnabla_jit.logger import logger\n"
                                  "logger.debug('dbg'); logger.info('hello')")
    assert "[nnabla][INFO]: hello" in r.stderr and "dbg" not in r.stderr


def test_logger_level_and_file_come_from_nnabla_conf(tmp_path):
    log = tmp_path / "run.log"
    r = _logger_run(tmp_path, "[LOG]\nlog_console_level = ERROR\nlog_file_name = {}\n".format(log),
                    "from nnabla_jit.logger import logger\n"
                    "logger.debug('dbg'); logger.info('hello'); logger.error('bad')")
    assert "hello" not in r.stderr and "[nnabla][ERROR]: bad" in r.stderr
    text = log.read_text()
    assert "[nnabla][DEBUG]" in text and "dbg" in text and "hello" in text and "bad" in text


def test_size_syntax_of_the_ooc_options():
    from nnabla_jit.utils.cli.utility import str_to_num
    assert str_to_num("1234") == 1234
    assert str_to_num("1.5K") == 1500 and str_to_num("1k") == 1024
    assert str_to_num("2G") == 2 * 1000 ** 3 and str_to_num("2g") == 2 * 1024 ** 3
    assert str_to_num("2e3") == 8          # nnabla reads NUMeNUM as a power
    with pytest.raises(Exception, match="is not a size"):
        str_to_num("0x10")


def test_train_accepts_nnablas_out_of_core_options(capsys):
    from nnabla_jit.utils.cli import build_parser
    args = build_parser().parse_args(["train", "-c", "a.nnp", "-o", "out", "-O", "-m", "1G", "-w", "3"])
    assert args.enable_ooc and args.ooc_gpu_memory_size == 10 ** 9 and args.ooc_window_length == 3
    with pytest.raises(SystemExit, match="2"):   # argparse's usage error
        build_parser().parse_args(["train", "-c", "a.nnp", "-o", "out", "-m", "lots"])
