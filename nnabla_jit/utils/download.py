"""Downloading data files (nnabla's ``nnabla.utils.download``).

A download shows a tqdm progress bar, lands in ``<file>.part`` first and is renamed into place
only when complete (and, given a ``sha256``, verified), so an interrupted download never leaves a
truncated file where a good one is expected. Started again, it resumes from the ``.part`` file
with an HTTP range request (from scratch when the server ignores ranges).
"""
import hashlib
import os
import urllib.request

from tqdm import tqdm

from ..logger import logger

__all__ = ["download", "get_data_home"]

_CHUNK = 1 << 20


def get_data_home():
    """The folder data files are downloaded to: ``~/nnabla_data`` (created if missing)."""
    d = os.path.expanduser("~/nnabla_data")
    if d == "/nnabla_data":      # no home directory
        d = "./nnabla_data"
    os.makedirs(d, exist_ok=True)
    return d


def file_sha256(path):
    """The SHA-256 of the file at ``path``, as hex (read in chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch(url, part, timeout, name):
    """Download ``url`` into ``part``, continuing after the bytes it already holds."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={"Range": "bytes={}-".format(have)} if have else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        resumed = have > 0 and response.status == 206
        if have and not resumed:
            logger.info("{}: the server does not resume downloads; starting again".format(name))
            have = 0
        try:
            total = have + int(response.headers.get("Content-Length"))
        except (TypeError, ValueError):
            total = None
        with open(part, "ab" if resumed else "wb") as f, \
                tqdm(total=total, initial=have, desc=name, unit="B", unit_scale=True,
                     unit_divisor=1024) as bar:
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                f.write(chunk)
                bar.update(len(chunk))
    if total is not None and os.path.getsize(part) != total:
        raise IOError("download of {} ended after {} of {} bytes; run again to resume"
                      .format(url, os.path.getsize(part), total))


def download(url, output_file=None, open_file=True, allow_overwrite=False, sha256=None, timeout=60):
    """Download ``url`` to ``output_file`` (default: ``get_data_home()/<last part of url>``)
    unless that file exists (and ``allow_overwrite`` is False); return the file opened for
    reading in binary mode if ``open_file``, else None.

    ``sha256`` (hex digest, optional) is checked before the file is put in place: a mismatch
    removes the download and raises ``IOError``. ``timeout``: seconds a connection may stall."""
    filename = url.split("/")[-1]
    path = output_file if output_file is not None else os.path.join(get_data_home(), filename)
    if os.path.exists(path) and not allow_overwrite:
        logger.info("> {} already exists.".format(path))
        logger.info("> If you have any issue when using this file, ")
        logger.info("> manually remove the file and try download again.")
    else:
        part = path + ".part"
        _fetch(url, part, timeout, filename)
        if sha256 is not None:
            got = file_sha256(part)
            if got != sha256.lower():
                os.unlink(part)
                raise IOError("download of {}: sha256 {} does not match the expected {}; the file "
                              "was removed".format(url, got, sha256))
        os.replace(part, path)
    return open(path, "rb") if open_file else None
