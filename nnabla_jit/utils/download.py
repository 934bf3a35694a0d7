"""Downloading data files (nnabla's ``nnabla.utils.download``)."""
import os
import urllib.request

from tqdm import tqdm

from ..logger import logger
from .data_source import _write_atomically

__all__ = ["download", "get_data_home"]


def get_data_home():
    """The folder data files are downloaded to: ``~/nnabla_data`` (created if missing)."""
    d = os.path.expanduser("~/nnabla_data")
    if d == "/nnabla_data":      # no home directory
        d = "./nnabla_data"
    os.makedirs(d, exist_ok=True)
    return d


def download(url, output_file=None, open_file=True, allow_overwrite=False):
    """Download ``url`` to ``output_file`` (default: ``get_data_home()/<last part of url>``)
    unless that file exists (and ``allow_overwrite`` is False); return the file opened for
    reading in binary mode if ``open_file``, else None. The file appears complete or not at all."""
    filename = url.split("/")[-1]
    path = output_file if output_file is not None else os.path.join(get_data_home(), filename)
    if os.path.exists(path) and not allow_overwrite:
        logger.info("> {} already exists.".format(path))
        logger.info("> If you have any issue when using this file, ")
        logger.info("> manually remove the file and try download again.")
    else:
        with urllib.request.urlopen(url) as response:
            try:
                total = int(response.headers.get("Content-Length"))
            except (TypeError, ValueError):
                total = 0

            def write(f):
                with tqdm(total=total, desc=filename, unit="B", unit_scale=True,
                          unit_divisor=1024) as bar:
                    while True:
                        chunk = response.read(1 << 20)
                        if not chunk:
                            break
                        f.write(chunk)
                        bar.update(len(chunk))
            _write_atomically(path, write)
    return open(path, "rb") if open_file else None
