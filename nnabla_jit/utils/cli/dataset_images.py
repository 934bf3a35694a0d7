"""What the two ``create_*_dataset`` commands share: shaping images to one size and channel
count, converting many in parallel with a progress bar, and writing the CSV split.

Shaping (``mode``): ``trimming`` cuts the longer side around the centre to the output's aspect
ratio, ``padding`` pads the shorter side with zeros around the centre; the image is then resized
to (width, height). Grey images become RGB for 3 channels, RGB images grey (ITU-R 601 luma) for 1.
"""
import csv
import os
import random
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tqdm

from ..image_utils import imread, imresize, imsave
from . import CommandError

__all__ = ["IMAGE_PATTERN", "add_common_arguments", "add_output_arguments", "check_common_arguments",
           "imread", "imresize", "imsave", "run_parallel", "shape_image", "write_csv_split"]

IMAGE_PATTERN = re.compile(r"\.(bmp|jpg|jpeg|png|gif|tif|tiff)", re.IGNORECASE)


def shape_image(im, width, height, mode, channels):
    """(shaped image, kind) where kind is None (size kept), 'trimming' or 'padding'."""
    if im.ndim == 3 and im.shape[2] != 3:
        raise ValueError("the image must be RGB or monochrome, it has {} channels".format(im.shape[2]))
    if im.ndim not in (2, 3):
        raise ValueError("illegal image of shape {}".format(im.shape))
    h, w = im.shape[:2]
    kind = None
    if w != width or h != height:
        if mode == "trimming":
            if float(h) / w > float(height) / width:
                target_h = int(float(w) / width * height)
                im = im[(h - target_h) // 2:h - (h - target_h) // 2, :]
            else:
                target_w = int(float(h) / height * width)
                im = im[:, (w - target_w) // 2:w - (w - target_w) // 2]
        elif mode == "padding":
            if float(h) / w < float(height) / width:
                target_h = int(float(height) / width * w)
                pad = (((target_h - h) // 2, target_h - (target_h - h) // 2 - h), (0, 0))
            else:
                target_w = int(float(width) / height * h)
                pad = ((0, 0), ((target_w - w) // 2, target_w - (target_w - w) // 2 - w))
            im = np.pad(im, pad + (((0, 0),) if im.ndim == 3 else ()), "constant")
        else:
            raise CommandError("-m/--mode must be trimming or padding, got '{}'".format(mode))
        kind = mode
        im = imresize(im, size=(width, height))
    if im.ndim == 2 and channels == 3:
        im = np.stack([im, im, im], axis=2)
    elif im.ndim == 3 and channels == 1:
        im = np.dot(im[..., :3], [0.299, 0.587, 0.114]).astype(np.uint8)
    return im, kind


def run_parallel(function, items, desc):
    """``function`` over ``items`` on a thread per core, with a tqdm bar; the results in order."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool, \
            tqdm.tqdm(total=len(items), desc=desc) as bar:
        results = []
        for result in pool.map(function, items):
            results.append(result)
            bar.update()
    return results


def write_csv_split(rows, header, args, shuffle):
    """Write ``rows`` to ``-f1`` (and ``-f2`` with ``-r2`` percent of them) in OUTDIR."""
    if shuffle:
        random.shuffle(rows)
    names = [os.path.join(args.outdir, args.file1)]
    if args.file2:
        names.append(os.path.join(args.outdir, args.file2))
    second = int(args.ratio2) if args.ratio2 else 0
    counts = [(len(rows) * (100 - second)) // 100]
    counts.append(len(rows) - counts[0])
    head = 0
    for name, count in zip(names, counts):
        if count:
            with open(name, "w") as f:
                writer = csv.writer(f, lineterminator="\n")
                writer.writerow(header)
                writer.writerows(rows[head:head + count])
            head += count


def check_common_arguments(args):
    if os.path.abspath(args.sourcedir) == os.path.abspath(args.outdir):
        raise CommandError("the input directory and the output directory are the same")
    if not os.path.isdir(args.sourcedir):
        raise CommandError("input directory '{}' {}".format(
            args.sourcedir, "is a file" if os.path.exists(args.sourcedir) else "does not exist"))
    if args.mode not in ("trimming", "padding"):
        raise CommandError("-m/--mode must be trimming or padding, got '{}'".format(args.mode))
    if args.shuffle not in ("true", "false"):
        raise CommandError("-s/--shuffle must be true or false, got '{}'".format(args.shuffle))
    try:
        return int(args.width), int(args.height), int(args.channel)
    except ValueError:
        raise CommandError("-w, -g and -c take integers") from None


def add_common_arguments(sub, source_help):
    sub.add_argument("-i", "--sourcedir", help=source_help, required=True)
    sub.add_argument("-o", "--outdir", help="output directory", required=True)
    return sub


def add_image_shape_arguments(sub):
    """The output images' channels and size, which check_common_arguments returns."""
    sub.add_argument("-c", "--channel", help="number of output color channels", required=True)
    sub.add_argument("-w", "--width", help="width of output image", required=True)
    sub.add_argument("-g", "--height", help="height of output image", required=True)


def add_output_arguments(sub):
    sub.add_argument("-m", "--mode", help="shaping mode (trimming or padding)", required=True)
    sub.add_argument("-s", "--shuffle", help="shuffle mode (true or false)", required=True)
    sub.add_argument("-f1", "--file1", help="output file name 1", required=True)
    sub.add_argument("-r1", "--ratio1", help="output file ratio(%%) 1")
    sub.add_argument("-f2", "--file2", help="output file name 2")
    sub.add_argument("-r2", "--ratio2", help="output file ratio(%%) 2")
