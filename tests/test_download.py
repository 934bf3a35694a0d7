"""nnabla_jit.utils.download against a local HTTP server on 127.0.0.1: a whole download, resuming
from a partial file with a range request, a server that ignores ranges, checksums."""
import hashlib
import http.server
import threading

import pytest

from nnabla_jit.utils.download import download

PAYLOAD = bytes(range(256)) * 4000          # about 1 MB: more than one read chunk


class _Handler(http.server.BaseHTTPRequestHandler):
    ranges = True                  # class-level switches the tests flip
    seen_ranges = []

    def do_GET(self):
        start = 0
        header = self.headers.get("Range")
        _Handler.seen_ranges.append(header)
        if header and self.ranges:
            start = int(header.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", "bytes {}-{}/{}".format(start, len(PAYLOAD) - 1, len(PAYLOAD)))
        else:
            self.send_response(200)
        body = PAYLOAD[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.ranges, _Handler.seen_ranges = True, []
    yield "http://127.0.0.1:{}/".format(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


def test_download_whole_file_with_checksum(server, tmp_path):
    out = tmp_path / "data.bin"
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    with download(server + "data.bin", str(out), sha256=digest) as f:
        assert f.read() == PAYLOAD
    assert not (tmp_path / "data.bin.part").exists()
    out.write_bytes(b"kept")                           # present: not downloaded again
    assert download(server + "data.bin", str(out), open_file=False) is None
    assert out.read_bytes() == b"kept"


def test_download_resumes_from_a_partial_file(server, tmp_path):
    out = tmp_path / "data.bin"
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:1000])
    download(server + "data.bin", str(out), open_file=False)
    assert _Handler.seen_ranges == ["bytes=1000-"]
    assert out.read_bytes() == PAYLOAD


def test_download_starts_again_when_the_server_ignores_ranges(server, tmp_path):
    _Handler.ranges = False
    out = tmp_path / "data.bin"
    (tmp_path / "data.bin.part").write_bytes(b"x" * 1000)
    download(server + "data.bin", str(out), open_file=False)
    assert out.read_bytes() == PAYLOAD


def test_download_with_a_wrong_checksum_leaves_no_file(server, tmp_path):
    out = tmp_path / "data.bin"
    with pytest.raises(IOError, match="sha256"):
        download(server + "data.bin", str(out), sha256="0" * 64)
    assert not out.exists() and not (tmp_path / "data.bin.part").exists()
