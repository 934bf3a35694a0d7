"""``create_image_classification_dataset``: a folder per class of images -> an image dataset.

Every image under ``SOURCEDIR/<class>/`` is shaped (see :mod:`.dataset_images`) and saved as
``OUTDIR/<class>/<name>.png``; the CSV files (``x:image,y:label``, labels numbered by the sorted
class folders that hold images) list them, ``-r2`` percent going to ``-f2``.
"""
import os

from ...logger import logger
from . import CommandError
from .dataset_images import (IMAGE_PATTERN, add_common_arguments, add_image_shape_arguments,
                             add_output_arguments,
                             check_common_arguments, imread, imresize, imsave, run_parallel,
                             shape_image, write_csv_split)

__all__ = ["add_create_image_classification_dataset_command", "convert_image",
           "create_image_classification_dataset_command", "imread", "imresize", "imsave"]


def convert_image(args):
    """Shape one image: ``args`` = (file name, source dir, dest dir, width, height, mode,
    channels). Returns whether it was written (a failure is logged as a warning)."""
    file_name, source_dir, dest_dir, width, height, mode, ch = args
    source = os.path.join(source_dir, file_name)
    dest = os.path.join(dest_dir, os.path.splitext(file_name)[0] + ".png")
    try:
        im, _ = shape_image(imread(source), width, height, mode, ch)
    except (OSError, ValueError) as e:   # an unreadable image is left out, as nnabla does
        logger.warning("Failed to convert %s: %s" % (source, e))
        return False
    # a failed write (a read-only or full disk) ends the command
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    imsave(dest, im)
    return True


def create_image_classification_dataset_command(args):
    width, height, ch = check_common_arguments(args)
    logger.log(99, "Creating file list...")
    classes = sorted(d for d in os.listdir(args.sourcedir)
                     if os.path.isdir(os.path.join(args.sourcedir, d)))
    if not classes:
        raise CommandError("no class subdirectory in '{}'".format(args.sourcedir))
    rows, label = [], -1
    for name in classes:
        folder = os.path.join(args.sourcedir, name)
        images = sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f))
                        and IMAGE_PATTERN.search(os.path.splitext(f)[1]))
        if images:
            label += 1
        rows += [[os.path.join(".", name, f), label] for f in images]
    if not rows:
        raise CommandError("no image file in the class subdirectories of '{}'".format(args.sourcedir))
    logger.log(99, "Creating output images...")
    written = run_parallel(convert_image, [(r[0], args.sourcedir, args.outdir, width, height,
                                            args.mode, ch) for r in rows], "images")
    rows = [[os.path.splitext(r[0])[0] + ".png", r[1]] for r, ok in zip(rows, written) if ok]
    if not rows:
        raise CommandError("no image in the class subdirectories of '{}' could be read (see the "
                           "warnings)".format(args.sourcedir))
    logger.log(99, "Creating CSV files...")
    write_csv_split(rows, ["x:image", "y:label"], args, args.shuffle == "true")
    logger.log(99, "Dataset was successfully created.")
    return True


def add_create_image_classification_dataset_command(subparsers):
    sub = subparsers.add_parser("create_image_classification_dataset",
                                help="Create dataset from image files.",
                                description="Shape the images of a folder per class to one size "
                                            "and write the dataset CSV files.")
    add_common_arguments(sub, "source directory with directories for each class")
    add_image_shape_arguments(sub)
    add_output_arguments(sub)
    sub.set_defaults(func=create_image_classification_dataset_command)
    return sub
