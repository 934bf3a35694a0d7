"""``create_object_detection_dataset``: images with YOLO-style labels -> a detection dataset.

Each image under SOURCEDIR (searched recursively) may have ``<name>.txt`` beside it, one object a
line: ``class cx cy w h`` in fractions of the image. Anchors (``-a`` of them) are the k-means
centres of the objects' (w, h), smallest area first. Each image is shaped (see
:mod:`.dataset_images`) into ``OUTDIR/data/<name>.png`` and the labels moved with it; for the
``-d`` pixel grid, ``<name>_label.csv`` holds the class of the object each (anchor, cell) is
responsible for (-1: none) and ``<name>_region.csv`` its offset and log size against the anchor
(``x, y, log w, log h``). The CSV files list ``x:image,y:label,r:region``, images in sorted order.

Where trimming or padding moved an image, the objects' centres and sizes move with it. (nnabla
1.39 shifts fields 0 and 1 of the label line, the class and x, instead of x and y: an index
slip that changes classes; here the class stays and the centre moves.)
"""
import os

import numpy as np
import tqdm

from ...logger import logger
from . import CommandError
from .dataset_images import (IMAGE_PATTERN, add_common_arguments, add_image_shape_arguments,
                             add_output_arguments,
                             check_common_arguments, imread, imresize, imsave, run_parallel,
                             shape_image, write_csv_split)

__all__ = ["ObjectRect", "add_create_object_detection_dataset_command", "convert_image",
           "create_object_detection_dataset_command", "get_anchors", "imread", "imresize",
           "imsave", "load_label"]


class ObjectRect:
    """A rectangle in fractions of the image: from (left, top, right, bottom) or (cx, cy, w, h)."""

    def __init__(self, LRTB=None, XYWH=None):
        if LRTB is not None:
            self.rect = np.array(LRTB, dtype=float)
        elif XYWH is not None:
            x, y, w, h = XYWH
            self.rect = np.array([x - w * 0.5, y - h * 0.5, x + w * 0.5, y + h * 0.5])
        else:
            self.rect = np.zeros(4)

    def clip(self):
        return ObjectRect(LRTB=self.rect.clip(0.0, 1.0))

    def left(self):
        return self.rect[0]

    def top(self):
        return self.rect[1]

    def right(self):
        return self.rect[2]

    def bottom(self):
        return self.rect[3]

    def width(self):
        return max(self.rect[2] - self.rect[0], 0.0)

    def height(self):
        return max(self.rect[3] - self.rect[1], 0.0)

    def centerx(self):
        return (self.rect[0] + self.rect[2]) * 0.5

    def centery(self):
        return (self.rect[1] + self.rect[3]) * 0.5

    def center(self):
        return self.centerx(), self.centery()

    def area(self):
        return self.width() * self.height()

    def overlap(self, rect2):
        w = max(min(self.right(), rect2.right()) - max(self.left(), rect2.left()), 0.0)
        h = max(min(self.bottom(), rect2.bottom()) - max(self.top(), rect2.top()), 0.0)
        return w * h

    def iou(self, rect2):
        overlap = self.overlap(rect2)
        union = self.area() + rect2.area() - overlap
        return overlap / union if union > 0 else 0.0


def load_label(file_name):
    """The ``class cx cy w h`` lines of a label file ([] with a warning when it is missing)."""
    if not os.path.exists(file_name):
        logger.warning("Label txt file is not found %s." % file_name)
        return []
    labels = []
    with open(file_name, encoding="utf-8", errors="replace") as f:   # bad bytes fail as a bad line
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                values = [float(s) for s in line.split()]
            except ValueError:
                raise CommandError("{}:{}: a label line is 'class cx cy w h', got {!r}".format(
                    file_name, number, line.strip())) from None
            if len(values) == 5:
                labels.append(values)
    return labels


def get_anchors(source_dir, file_list, num_anchor):
    """``num_anchor`` (w, h) k-means centres of the objects' sizes, smallest area first."""
    sizes = []
    for name in tqdm.tqdm(file_list, desc="labels"):
        labels = load_label(os.path.join(source_dir, os.path.splitext(name)[0] + ".txt"))
        sizes += [label[3:5] for label in labels]
    sizes = np.array(sizes, dtype=float).reshape(-1, 2)
    if len(sizes) < num_anchor:
        raise CommandError("{} labelled objects found in the .txt files beside the images under "
                           "'{}'; -a/--num_anchor {} needs at least as many".format(
                               len(sizes), source_dir, num_anchor))
    logger.log(99, "{} labels are found in {} images ({:.2f} labels/image on average).".format(
        len(sizes), len(file_list), len(sizes) / len(file_list)))
    rng = np.random.RandomState(0)
    classes = rng.randint(num_anchor, size=len(sizes))
    for _ in range(1000):
        means = np.array([sizes[classes == i].mean(axis=0) if np.any(classes == i) else sizes[i]
                          for i in range(num_anchor)])
        distance = ((sizes[None, :, :] - means[:, None, :]) ** 2).sum(axis=2)
        new_classes = distance.argmin(axis=0)
        if np.array_equal(new_classes, classes):
            break
        classes = new_classes
    return means[(means[:, 0] * means[:, 1]).argsort()]


def _warp(label, kind, input_size, output_size):
    """Move a label (class cx cy w h) from the source image into the trimmed/padded one."""
    w_scale = input_size[0] / output_size[0]
    h_scale = input_size[1] / output_size[1]
    label = list(label)
    if kind == "trimming":
        label[1] = (label[1] - (1.0 - 1.0 / w_scale) * 0.5) * w_scale
        label[2] = (label[2] - (1.0 - 1.0 / h_scale) * 0.5) * h_scale
    else:
        label[1] = label[1] * w_scale + (1.0 - w_scale) * 0.5
        label[2] = label[2] * h_scale + (1.0 - h_scale) * 0.5
    label[3] *= w_scale
    label[4] *= h_scale
    return label


def convert_image(args):
    """Shape one image and write its grid labels: ``args`` = (file name, source dir, dest dir,
    width, height, mode, channels, classes, grid size, anchors). Returns whether it was written."""
    file_name, source_dir, dest_dir, width, height, mode, ch, num_class, grid_size, anchors = args
    stem = os.path.splitext(file_name)[0]
    source = os.path.join(source_dir, file_name)
    out = os.path.join(dest_dir, "data", stem)
    labels = load_label(os.path.join(source_dir, stem + ".txt"))
    try:
        im = imread(source)
        input_size = (im.shape[1], im.shape[0])
        im, kind = shape_image(im, width, height, mode, ch)
    except (OSError, ValueError) as e:   # an unreadable image is left out, as nnabla does
        logger.warning("Failed to convert %s: %s" % (source, e))
        return False
    # a failed write (a read-only or full disk) ends the command
    os.makedirs(os.path.dirname(out), exist_ok=True)
    imsave(out + ".png", im)
    if kind is not None:
        labels = [_warp(label, kind, input_size, (width, height)) for label in labels]
    grid_w, grid_h = width // grid_size, height // grid_size
    label_array = np.full((len(anchors), grid_h, grid_w), -1, dtype=int)
    region_array = np.zeros((len(anchors), grid_h, grid_w, 4))
    for label in labels:
        rect = ObjectRect(XYWH=label[1:]).clip()
        if rect.width() <= 0.0 or rect.height() <= 0.0:
            continue
        gx, gy = min(int(rect.centerx() * grid_w), grid_w - 1), min(int(rect.centery() * grid_h), grid_h - 1)
        best, best_iou, best_rect = 0, 0.0, None
        for i, anchor in enumerate(anchors):
            anchor_rect = ObjectRect(XYWH=[(gx + 0.5) / grid_w, (gy + 0.5) / grid_h, anchor[0], anchor[1]])
            iou = rect.iou(anchor_rect)
            if best_rect is None or iou > best_iou:
                best, best_iou, best_rect = i, iou, anchor_rect
        label_array[best, gy, gx] = int(label[0])
        region_array[best, gy, gx] = [(rect.centerx() - best_rect.centerx()) * grid_w + 0.5,
                                      (rect.centery() - best_rect.centery()) * grid_h + 0.5,
                                      np.log(rect.width() * grid_w), np.log(rect.height() * grid_h)]
    np.savetxt(out + "_label.csv", label_array.reshape(len(anchors) * grid_h, -1), fmt="%i", delimiter=",")
    np.savetxt(out + "_region.csv", region_array.reshape(len(anchors) * grid_h, -1), fmt="%f", delimiter=",")
    return True


def _image_files(source_dir, folder=""):
    found = []
    for item in sorted(os.listdir(os.path.join(source_dir, folder))):
        path = os.path.join(folder, item)
        if os.path.isdir(os.path.join(source_dir, path)):
            found += _image_files(source_dir, path)
        elif IMAGE_PATTERN.search(os.path.splitext(item)[1]):
            found.append(path)
    return found


def create_object_detection_dataset_command(args):
    width, height, ch = check_common_arguments(args)
    try:
        num_class, grid_size, num_anchor = int(args.num_class), int(args.grid_size), int(args.num_anchor)
    except ValueError:
        raise CommandError("-n, -d and -a take integers") from None
    if grid_size <= 0 or width % grid_size or height % grid_size:
        raise CommandError("width {} and height {} must be divisible by the grid size {}".format(
            width, height, grid_size))
    logger.log(99, "Creating file list...")
    files = _image_files(args.sourcedir)
    if not files:
        raise CommandError("no image file under '{}'".format(args.sourcedir))
    logger.log(99, "Calculating anchors...")
    anchors = get_anchors(args.sourcedir, files, num_anchor)
    logger.log(99, "Creating output images...")
    written = run_parallel(convert_image, [(f, args.sourcedir, args.outdir, width, height, args.mode,
                                            ch, num_class, grid_size, anchors) for f in files], "images")
    rows = []
    for f, ok in zip(files, written):
        if ok:
            stem = os.path.join(".", "data", os.path.splitext(f)[0])
            rows.append([stem + ".png", stem + "_label.csv", stem + "_region.csv"])
    if not rows:
        raise CommandError("no image under '{}' could be read (see the warnings)".format(args.sourcedir))
    logger.log(99, "Creating CSV files...")
    write_csv_split(rows, ["x:image", "y:label", "r:region"], args, args.shuffle == "true")
    logger.log(99, "Dataset was successfully created.")
    return True


def add_create_object_detection_dataset_command(subparsers):
    sub = subparsers.add_parser("create_object_detection_dataset",
                                help="Create dataset from image and label files.",
                                description="Shape labelled images to one size and write the "
                                            "grid labels, regions and dataset CSV files.")
    add_common_arguments(sub, "source directory with souce image and label files")
    sub.add_argument("-n", "--num_class", help="number of object classes", required=True)
    add_image_shape_arguments(sub)
    sub.add_argument("-a", "--num_anchor", help="number of anchor", required=True)
    sub.add_argument("-d", "--grid_size", help="width and height of detection grid", required=True)
    add_output_arguments(sub)
    sub.set_defaults(func=create_object_detection_dataset_command)
    return sub
