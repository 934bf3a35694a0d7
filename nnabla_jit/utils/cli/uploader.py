"""``create_tar`` and ``upload``: a CSV dataset packed for Neural Network Console, and sent there.

``create_tar data.csv data.tar`` writes the tar NNC reads: ``index.csv`` (the CSV with every
cell that names an existing file replaced by ``data/<12-digit number>_<file name>``) and those
files under ``data/``. A file outside the CSV's folder (an absolute path, ``../``, a symlink
leading out) is packed only with ``--allow-outside-files``; otherwise the command stops and
lists them, so that a CSV cannot make it pack and send, say, ``~/.ssh/id_rsa``. ``upload TOKEN data.csv`` (or a ``.tar``) asks the endpoint
(``-e``, else ``$NNC_ENDPOINT``, else NNC's) for upload credentials at
``/v1/misc/credential?encrypted_text=..&dataset_name=..&dataset_size=..`` and PUTs the tar to
the S3 ``upload_path`` it answers (``s3://bucket/key`` -> ``key/<name>.tar``), signed with AWS
Signature V4 by the standard library (nnabla uses boto3). ``$AWS_ENDPOINT_URL_S3`` (as boto3
reads it) sends the PUT elsewhere, path-style. Uploads are single PUTs, so at most 5 GB.
"""
import csv
import datetime
import hashlib
import hmac
import http.client
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request

import tqdm

from ...serialization.files import atomic_path
from ..data_source_implements import read_csv_rows
from ..download import file_sha256
from . import CommandError

__all__ = ["Progress", "Uploader", "add_create_tar_command", "add_upload_command",
           "create_tar_command", "log", "upload_command"]

NNC_ENDPOINT = "https://console-api.dl.sony.com"
_CHUNK = 1 << 20
_S3_SINGLE_PUT_LIMIT = 5 * 1024 ** 3


class UploadError(CommandError):
    """The server refused or could not be reached."""


class Progress:
    """A tqdm bar per stage: ``init(total, label)``, calls with the amount done, ``finish()``."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pbar = None

    def __call__(self, amount):
        with self._lock:
            if self._pbar is not None:
                self._pbar.update(amount)

    def init(self, maximum, label):
        if self._pbar is not None:
            self._pbar.close()
        self._pbar = tqdm.tqdm(total=maximum, desc=label)

    def finish(self):
        if self._pbar is not None:
            self._pbar.close()
            self._pbar = None


def log(string):
    print(string)


def _sign(key, text):
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def s3_put_headers(method, url, payload_sha256, credentials, region, now=None):
    """The headers of an AWS Signature V4 request to S3 (``Authorization`` included)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    parts = urllib.parse.urlsplit(url)
    headers = {"host": parts.netloc, "x-amz-content-sha256": payload_sha256, "x-amz-date": amz_date}
    if credentials.get("session_token"):
        headers["x-amz-security-token"] = credentials["session_token"]
    names = sorted(headers)
    canonical = "\n".join([method, parts.path or "/", parts.query,
                           "".join("{}:{}\n".format(n, headers[n].strip()) for n in names),
                           ";".join(names), payload_sha256])
    scope = "{}/{}/s3/aws4_request".format(day, region)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    key = ("AWS4" + credentials["secret_access_key"]).encode("utf-8")
    for part in (day, region, "s3", "aws4_request"):
        key = _sign(key, part)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    headers["Authorization"] = ("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}"
                                .format(credentials["access_key_id"], scope, ";".join(names), signature))
    return headers


def _s3_url(bucket, key, region):
    quoted = urllib.parse.quote(key, safe="/~")
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        return "{}/{}/{}".format(endpoint.rstrip("/"), bucket, quoted)
    return "https://{}.s3.{}.amazonaws.com/{}".format(bucket, region, quoted)


def _outside_message(csvfilename, base, outside):
    shown = outside[:20] + (["... {} more".format(len(outside) - 20)] if len(outside) > 20 else [])
    return ("{} names {} file{} outside its folder {}, not packed unless asked for "
            "(--allow-outside-files): {}".format(
                csvfilename, len(outside), "" if len(outside) == 1 else "s",
                os.path.abspath(base or "."), ", ".join(shown)))


def _checked_credentials(endpoint, info):
    """The credential answer, refused naming the endpoint unless it is a JSON object with an
    ``s3://bucket/key`` upload path and string keys (a malformed answer would fail deep in the
    signing code)."""
    if not isinstance(info, dict):
        raise UploadError("{} answered {} instead of a JSON object".format(
            endpoint, type(info).__name__))
    if "upload_path" not in info:
        raise UploadError("{} gave no upload path: {}".format(endpoint, info.get("message", "no message")))
    path = info["upload_path"]
    if not isinstance(path, str) or not re.match(r"^s3://[^/]+/[^/].*$", path):
        raise UploadError("{} gave the upload path {!r}; expected s3://<bucket>/<key>".format(endpoint, path))
    for key in ("access_key_id", "secret_access_key"):
        if not isinstance(info.get(key), str) or not info[key]:
            raise UploadError("{} gave no {} with the upload path".format(endpoint, key))
    for key in ("session_token", "region"):
        if info.get(key) is not None and not isinstance(info[key], str):
            raise UploadError("{} gave a {} that is not text: {!r}".format(endpoint, key, info[key]))
    return info


class Uploader:
    """nnabla's uploader: CSV -> tar (``convert``) and tar -> NNC (``upload``)."""

    def __init__(self, log, token=None, progress=None, allow_outside_files=False):
        self._log = log
        self._progress = progress or Progress()
        # files a CSV names outside its own folder are packed only when asked for
        self.allow_outside_files = allow_outside_files

    def createCsvData(self, csvfilename):
        """The CSV's rows with file cells renamed, and {name in tar: path}."""
        if not os.path.exists(csvfilename):
            raise CommandError("CSV dataset '{}' does not exist".format(csvfilename))
        rows = read_csv_rows(csvfilename)
        if not rows:
            raise CommandError("{}: the CSV file is empty (a dataset needs a header line)".format(csvfilename))
        data_files, csv_data, outside = {}, [], []
        self._progress.init(len(rows), "Create CSV")
        base = os.path.dirname(csvfilename)
        folder = os.path.realpath(base or ".")
        for line, row in enumerate(rows):
            self._progress(1.0)
            if line and len(row) != len(rows[0]):
                self._progress.finish()
                raise CommandError("{}: line {} has {} items, the header {}".format(
                    csvfilename, line + 1, len(row), len(rows[0])))
            new_row = []
            for item in row:
                path = item if os.path.isfile(item) else "/".join([base, "/".join(item.split("\\"))])
                if os.path.isfile(path):
                    real = os.path.realpath(path)
                    if os.path.commonpath([folder, real]) != folder:
                        outside.append(item if item == real else "{} ({})".format(item, real))
                    name = "data/{:012d}_{}".format(len(data_files), os.path.basename(path))
                    data_files[name] = os.path.abspath(path)
                    new_row.append(name)
                else:
                    new_row.append(item)
            csv_data.append(new_row)
        self._progress.finish()
        if outside and not self.allow_outside_files:
            raise CommandError(_outside_message(csvfilename, base, outside))
        return csv_data, data_files

    def createTemporaryTar(self, name, csv_data, data_files, tmpdir):
        index = os.path.join(tmpdir, "index.csv")
        self._log("Create index.csv")
        with open(index, "w", newline="") as f:
            csv.writer(f).writerows(csv_data)
        tarfilename = os.path.join(tmpdir, "{}.tar".format(name))
        self._log("Add file to tar archive.")
        self._progress.init(len(data_files), "Create TAR")
        with tarfile.open(tarfilename, "w") as tar:
            tar.add(index, "index.csv")
            for member in sorted(data_files):
                self._progress(1.0)
                tar.add(data_files[member], member)
        self._progress.finish()
        return tarfilename

    def _credentials(self, endpoint, token, name, size):
        query = urllib.parse.urlencode({"encrypted_text": token, "dataset_name": name,
                                        "dataset_size": size})
        url = "{}/v1/misc/credential?{}".format(endpoint.rstrip("/"), query)
        self._log("Getting Upload path" if endpoint == NNC_ENDPOINT
                  else "Getting Upload path from [{}]".format(endpoint))
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                info = json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            raise UploadError("{} answered HTTP {} {}".format(endpoint, e.code, e.reason)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise UploadError("cannot reach {}: {}".format(
                endpoint, getattr(e, "reason", None) or str(e) or type(e).__name__)) from None
        except ValueError:
            raise UploadError("{} did not answer JSON".format(endpoint)) from None
        return _checked_credentials(endpoint, info)

    def uploadFile(self, endpoint, token, filename, name):
        size = os.path.getsize(filename)
        if size > _S3_SINGLE_PUT_LIMIT:
            raise UploadError("{} is {} bytes; one upload holds at most 5 GB".format(filename, size))
        info = self._credentials(endpoint, token, name, size)
        upload_url = info["upload_path"]
        self._log("Got upload_url" if endpoint == NNC_ENDPOINT
                  else "upload_url is [{}]".format(upload_url))
        bucket, key = upload_url.split("://", 1)[1].split("/", 1)
        region = info.get("region") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        url = _s3_url(bucket, "{}/{}.tar".format(key, name), region)
        headers = s3_put_headers("PUT", url, file_sha256(filename), info, region)
        headers["Content-Length"] = str(size)
        parts = urllib.parse.urlsplit(url)
        connection_class = (http.client.HTTPSConnection if parts.scheme == "https"
                            else http.client.HTTPConnection)
        try:
            connection = connection_class(parts.netloc, timeout=300)
            connection.putrequest("PUT", parts.path + ("?" + parts.query if parts.query else ""),
                                  skip_host=True)
            for header, value in headers.items():
                connection.putheader(header, value)
            connection.endheaders()
            self._progress.init(size, "Upload")
            with open(filename, "rb") as f:
                for chunk in iter(lambda: f.read(_CHUNK), b""):
                    connection.send(chunk)
                    self._progress(len(chunk))
            self._progress.finish()
            response = connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as e:
            self._progress.finish()
            raise UploadError("cannot upload to {}: {}".format(parts.netloc, str(e) or type(e).__name__)) from None
        if response.status >= 300:
            raise UploadError("upload to {} failed: HTTP {} {} {}".format(
                parts.netloc, response.status, response.reason, body[:200].decode(errors="replace")))
        return True

    def convert(self, source, destination):
        """Write the tar of CSV dataset ``source`` to ``destination``."""
        tmpdir = tempfile.mkdtemp()
        try:
            self._log("Prepare csv data")
            csv_data, data_files = self.createCsvData(source)
            self._log("Prepare tar file")
            name = os.path.splitext(os.path.basename(source))[0]
            tar = self.createTemporaryTar(name, csv_data, data_files, tmpdir)
            with atomic_path(destination) as partial:
                shutil.copyfile(tar, partial)
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)

    def upload(self, token, filename, name, finishCallback=None, endpoint=None):
        endpoint = endpoint or NNC_ENDPOINT
        ext = os.path.splitext(filename)[1]
        if ext not in (".csv", ".tar"):
            if finishCallback is not None:
                finishCallback(False)
            raise CommandError("upload sends a .csv dataset or a .tar, got '{}'".format(filename))
        if not os.path.isfile(filename):
            raise CommandError("'{}' does not exist".format(filename))
        if ext == ".csv":
            tmpdir = tempfile.mkdtemp()
            try:
                self._log("Prepare csv data")
                csv_data, data_files = self.createCsvData(filename)
                self._log("Prepare tar file")
                tar = self.createTemporaryTar(name, csv_data, data_files, tmpdir)
                self._log("Upload")
                self.uploadFile(endpoint, token, tar, name)
            finally:
                shutil.rmtree(tmpdir, ignore_errors=True)
        else:
            self.uploadFile(endpoint, token, filename, name)
        self._log("Finished")
        if finishCallback is not None:
            finishCallback(True)


def _add_outside_flag(sub):
    sub.add_argument("--allow-outside-files", action="store_true",
                     help="also pack files the CSV names outside its own folder (refused otherwise)")


def upload_command(args):
    endpoint = args.endpoint or os.getenv("NNC_ENDPOINT", NNC_ENDPOINT)
    name = os.path.splitext(os.path.basename(args.filename))[0]
    Uploader(log=log, progress=Progress(), allow_outside_files=args.allow_outside_files).upload(
        args.token, args.filename, name, endpoint=endpoint)
    return True


def add_upload_command(subparsers):
    sub = subparsers.add_parser("upload", help="Upload dataset to Neural Network Console.",
                                description="Upload a CSV dataset (packed as create_tar does) "
                                            "or a tar to Neural Network Console.")
    sub.add_argument("-e", "--endpoint", help="set endpoint uri", type=str)
    sub.add_argument("token", help="token for upload")
    sub.add_argument("filename", help="filename to upload")
    _add_outside_flag(sub)
    sub.set_defaults(func=upload_command)
    return sub


def create_tar_command(args):
    Uploader(log=log, progress=Progress(), allow_outside_files=args.allow_outside_files).convert(
        args.source, args.destination)
    return True


def add_create_tar_command(subparsers):
    sub = subparsers.add_parser("create_tar", help="Create tar file for Neural Network Console.",
                                description="Pack a CSV dataset and the files it names into a "
                                            "tar for Neural Network Console.")
    sub.add_argument("source", help="CSV dataset")
    sub.add_argument("destination", help="TAR filename")
    _add_outside_flag(sub)
    sub.set_defaults(func=create_tar_command)
    return sub
