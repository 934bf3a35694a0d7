"""``conv_dataset``: a CSV dataset (or a cache) into nnabla's file cache.

    nnabla_jit conv_dataset [-F] [-S] [-N] [-t THREADS] train.csv train.cache

A CSV source goes through :class:`~nnabla_jit.utils.create_cache.CreateCache`; a cache source
is re-written through :class:`~nnabla_jit.utils.data_source.DataSourceWithFileCache` (with a
progress bar), e.g. to shuffle it. The destination must be a directory (named ``*.cache``).
"""
import argparse
import os
import shutil

from tqdm import tqdm

from ...config import nnabla_config
from ..create_cache import CreateCache
from ..data_source import DataSourceWithFileCache
from ..data_source_implements import CacheDataSource, CsvDataSource
from . import CommandError

__all__ = ["CacheDataSource", "CreateCache", "CsvDataSource", "DataSourceWithFileCache",
           "add_conv_dataset_command", "conv_dataset_command"]


def _show_progress():
    return nnabla_config.get("MISC", "misc_show_progress", fallback="True") == "True"


def _copy_into_cache(args, source):
    with DataSourceWithFileCache(source, cache_dir=args.destination, shuffle=args.shuffle) as ds:
        print("Number of Data: {}".format(ds.size))
        print("Shuffle:        {}".format(args.shuffle))
        print("Normalize:      {}".format(args.normalize))
        with tqdm(total=ds.size, desc="conv_dataset", disable=not _show_progress()) as bar:
            for i in range(ds.size):
                ds._get_data(i)
                bar.update(1)


def _check_destination(args):
    if not os.path.exists(args.destination):
        return
    if not args.force:
        raise CommandError("'{}' exists; use -F/--force to overwrite it".format(args.destination))
    if not os.path.isdir(args.destination):
        raise CommandError("cannot overwrite file '{}' (the destination is a cache directory); "
                           "delete it first".format(args.destination))


def _fill(args, ext, folder):
    if ext == ".csv":
        cache = CreateCache(args.source, shuffle=args.shuffle, num_of_threads=args.num_of_threads)
        print("Number of Data: {}".format(cache._size))
        print("Shuffle:        {}".format(args.shuffle))
        print("Normalize:      {}".format(args.normalize))
        cache.create(folder, normalize=args.normalize)
    else:
        with CacheDataSource(args.source, shuffle=args.shuffle, normalize=args.normalize) as source:
            args_into = argparse.Namespace(**dict(vars(args), destination=folder))
            _copy_into_cache(args_into, source)


def conv_dataset_command(args):
    if args.num_of_threads is not None and args.num_of_threads <= 0:
        raise CommandError("-t/--num_of_threads must be a positive integer, got {}".format(
            args.num_of_threads))
    ext = os.path.splitext(args.source)[1].lower()
    if ext not in (".csv", ".cache"):
        raise CommandError("conv_dataset reads a .csv dataset or a .cache directory, got '{}'"
                           .format(args.source))
    if os.path.splitext(args.destination)[1].lower() != ".cache":
        raise CommandError("conv_dataset writes a cache directory named *.cache, got '{}'"
                           .format(args.destination))
    if not os.path.exists(args.source):
        raise CommandError("source '{}' does not exist".format(args.source))
    if ext == ".csv" and not os.path.isfile(args.source):
        raise CommandError("source '{}' is a directory, not a CSV file".format(args.source))
    if ext == ".cache" and not os.path.isdir(args.source):
        raise CommandError("source '{}' is a file, not a cache directory".format(args.source))
    _check_destination(args)
    # The cache is built in a folder beside the destination and renamed into place once complete:
    # a failure (a bad row, a full disk) leaves no partial cache, and -F keeps the old one until
    # the new one is whole.
    parent = os.path.dirname(os.path.abspath(args.destination))
    if not os.path.isdir(parent):
        raise CommandError("the folder of the destination '{}' does not exist".format(args.destination))
    folder = os.path.join(parent, ".{}.{}.partial".format(os.path.basename(args.destination), os.getpid()))
    shutil.rmtree(folder, ignore_errors=True)   # left by a killed run that had this process id
    os.mkdir(folder)
    try:
        _fill(args, ext, folder)
        if os.path.exists(args.destination):
            print("Overwrite destination [{}].".format(args.destination))
            shutil.rmtree(args.destination)
        os.rename(folder, args.destination)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return True


def add_conv_dataset_command(subparsers):
    sub = subparsers.add_parser("conv_dataset", help="Convert CSV dataset to cache.",
                                description="Convert a CSV dataset (or a cache) into a cache "
                                            "directory that CacheDataSource reads.")
    sub.add_argument("-F", "--force", action="store_true", help="force overwrite destination")
    sub.add_argument("-S", "--shuffle", action="store_true", help="shuffle data")
    sub.add_argument("-N", "--normalize", action="store_true", help="normalize data range")
    sub.add_argument("-t", "--num_of_threads", type=int, required=False,
                     help="use multithreading to convert cache, default to 10")
    sub.add_argument("source")
    sub.add_argument("destination")
    sub.set_defaults(func=conv_dataset_command)
    return sub
