"""Small synthetic stand-ins for the datasets nnabla's example programs read, written in the
real on-disk formats where the programs look for them, so the programs run unchanged.

Every maker writes under ``root``, a tree laid over a run's working directory: ``home/`` is the
run's ``$HOME`` (``home/nnabla_data`` is what nnabla's ``download()`` looks in first), anything
else is relative to the program's working directory. Contents follow from the arguments alone
(seeded generators), so nnabla's run and nnabla_jit's read the same bytes. Images carry their
class in a coarse pattern, so a classifier's loss goes down within a few iterations.
"""
import gzip
import io
import os
import pickle
import struct
import tarfile

import numpy as np

DATA_HOME = os.path.join("home", "nnabla_data")

MAKERS = {}


def maker(fn):
    MAKERS[fn.__name__] = fn
    return fn


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def class_images(n, classes, shape, seed, levels=8):
    """``n`` uint8 images of ``shape`` (C, H, W) and their labels (0 .. classes-1, in turn):
    each class has a blocky pattern of ``levels`` grey levels (blocks of 4x4 pixels, which
    compress well), each image that pattern with a few blocks changed."""
    rng = np.random.RandomState(seed)
    c, h, w = shape
    bh, bw = (h + 3) // 4, (w + 3) // 4
    patterns = rng.randint(0, levels, (classes, c, bh, bw))
    labels = np.arange(n) % classes
    blocks = patterns[labels]
    changed = rng.rand(n, c, bh, bw) < 0.15
    blocks = np.where(changed, rng.randint(0, levels, blocks.shape), blocks)
    images = np.repeat(np.repeat(blocks, 4, axis=2), 4, axis=3)[:, :, :h, :w]
    images = (images * (255 // (levels - 1))).astype(np.uint8)
    return images, labels.astype(np.uint8)


# ------------------------------------------------------------------------------- MNIST
def _idx(array):
    """The idx format of LeCun's MNIST files: magic (0, 0, type, ndim), big-endian sizes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(">" + "I" * array.ndim,
                                                                          *array.shape)
    return header + array.astype(np.uint8).tobytes()


@maker
def mnist(root, train=640, test=320):
    """MNIST's four gzip idx files (``train-images-idx3-ubyte.gz`` ...)."""
    for prefix, n, seed in (("train", train, 1), ("t10k", test, 2)):
        images, labels = class_images(n, 10, (1, 28, 28), seed)
        _write(os.path.join(root, DATA_HOME, prefix + "-images-idx3-ubyte.gz"),
               gzip.compress(_idx(images[:, 0]), 6))
        _write(os.path.join(root, DATA_HOME, prefix + "-labels-idx1-ubyte.gz"),
               gzip.compress(_idx(labels), 6))


# ---------------------------------------------------------------------------- CIFAR
def _tar_gz(members):
    """A gzip tarball of ``{name: bytes}``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@maker
def cifar10(root, train=50000, test=10000):
    """``cifar-10-python.tar.gz``: five pickled ``data_batch_k`` and a ``test_batch``, each a
    dict of ``b"data"`` (N, 3072) uint8 and ``b"labels"`` (a list), as the real one.
    Several programs reshape to the real sizes (50000 / 10000), hence the defaults."""
    members = {}
    images, labels = class_images(train, 10, (3, 32, 32), 3)
    per = train // 5
    for k in range(5):
        part = slice(k * per, (k + 1) * per)
        members["cifar-10-batches-py/data_batch_{}".format(k + 1)] = pickle.dumps(
            {b"batch_label": b"training batch", b"data": images[part].reshape(per, -1),
             b"labels": [int(v) for v in labels[part]]}, protocol=2)
    images, labels = class_images(test, 10, (3, 32, 32), 4)
    members["cifar-10-batches-py/test_batch"] = pickle.dumps(
        {b"batch_label": b"testing batch", b"data": images.reshape(test, -1),
         b"labels": [int(v) for v in labels]}, protocol=2)
    members["cifar-10-batches-py/batches.meta"] = pickle.dumps(
        {b"label_names": [("class%d" % k).encode() for k in range(10)]}, protocol=2)
    _write(os.path.join(root, DATA_HOME, "cifar-10-python.tar.gz"), _tar_gz(members))


@maker
def cifar100(root, train=50000, test=10000):
    """``cifar-100-python.tar.gz``: pickled ``train`` and ``test`` with ``b"fine_labels"``."""
    members = {}
    for name, n, seed in (("train", train, 5), ("test", test, 6)):
        images, labels = class_images(n, 100, (3, 32, 32), seed)
        members["cifar-100-python/" + name] = pickle.dumps(
            {b"data": images.reshape(n, -1), b"fine_labels": [int(v) for v in labels],
             b"coarse_labels": [int(v) // 5 for v in labels]}, protocol=2)
    _write(os.path.join(root, DATA_HOME, "cifar-100-python.tar.gz"), _tar_gz(members))


# ------------------------------------------------------------------------- Omniglot
def _save_object_pair(path, first, second):
    """``np.save`` of a 2-element object array (what ``np.load(path, allow_pickle=True)``
    unpacks into two values in the meta-learning programs)."""
    pair = np.empty(2, object)
    pair[0], pair[1] = first, second
    buffer = io.BytesIO()
    np.save(buffer, pair, allow_pickle=True)
    _write(path, buffer.getvalue())


@maker
def omniglot(root, background=964, evaluation=659, size=28):
    """``omniglot/data/train.npy`` and ``val.npy`` as meta-learning/data/omniglot_data.py
    writes them: each a pair (uint8 images (letters, 20, H, W), {alphabet: [first, last]}).
    The real images are 105x105; the programs resize them to 28x28, so they are made 28x28."""
    for name, letters, seed in (("train", background, 7), ("val", evaluation, 8)):
        images, _ = class_images(letters * 20, letters, (1, size, size), seed, levels=2)
        images = images[:, 0].reshape(20, letters, size, size).transpose(1, 0, 2, 3)
        alphabets = {"Alphabet_{}".format(k): [k * 20, min(k * 20 + 19, letters - 1)]
                     for k in range((letters + 19) // 20)}
        _save_object_pair(os.path.join(root, "omniglot", "data", name + ".npy"),
                          np.ascontiguousarray(images), alphabets)


# ------------------------------------------------------------------------ ModelNet40
@maker
def modelnet40(root, directory="data/modelnet40_normal_resampled", train_per_class=2,
               test_per_class=1, points=1024, classes=40):
    """ModelNet40 "normal resampled" as the point-cloud programs read it (neu's loader):
    ``modelnet40_shape_names.txt``, ``modelnet40_{train,test}.txt`` listing ``<shape>_NNNN``,
    and ``<shape>/<shape>_NNNN.txt`` with one ``x,y,z,nx,ny,nz`` line per point. Each class
    is an ellipsoid of its own proportions, its points drawn at random on the surface."""
    rng = np.random.RandomState(9)
    base = os.path.join(root, directory)
    names = ["shape{:02d}".format(k) for k in range(classes)]
    axes = 0.5 + rng.rand(classes, 3)
    lists = {"train": [], "test": []}
    for k, name in enumerate(names):
        for n in range(train_per_class + test_per_class):
            item = "{}_{:04d}".format(name, n + 1)
            lists["train" if n < train_per_class else "test"].append(item)
            normal = rng.randn(points, 3)
            normal /= np.linalg.norm(normal, axis=1, keepdims=True)
            xyz = normal * axes[k] + 0.01 * rng.randn(points, 3)
            rows = np.concatenate([xyz, normal], axis=1)
            text = "\n".join(",".join("{:.6f}".format(v) for v in row) for row in rows) + "\n"
            _write(os.path.join(base, name, item + ".txt"), text.encode())
    _write(os.path.join(base, "modelnet40_shape_names.txt"), ("\n".join(names) + "\n").encode())
    for split, items in lists.items():
        _write(os.path.join(base, "modelnet40_{}.txt".format(split)), ("\n".join(items) + "\n").encode())


# ---------------------------------------------------------------- CIFAR-10 as .npy
def _npy(path, array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    _write(path, buffer.getvalue())


@maker
def cifar10_npy(root, directory="cifar10_npy", train=64, test=32):
    """CIFAR-10-like arrays as the responsible-AI programs save and read them with
    ``--input``: ``x_train.npy`` (N, 3, 32, 32) uint8, ``y_train.npy`` and
    ``y_shuffle_train.npy`` (N, 1) (10% of the labels changed), ``x_val.npy``, ``y_val.npy``."""
    images, labels = class_images(train, 10, (3, 32, 32), 10)
    labels = labels.astype(np.int64).reshape(-1, 1)
    shuffled = labels.copy()
    rng = np.random.RandomState(11)
    pick = rng.choice(train, train // 10, replace=False)
    shuffled[pick] = rng.randint(0, 10, (len(pick), 1))
    base = os.path.join(root, directory)
    _npy(os.path.join(base, "x_train.npy"), images)
    _npy(os.path.join(base, "y_train.npy"), labels)
    _npy(os.path.join(base, "y_shuffle_train.npy"), shuffled)
    images, labels = class_images(test, 10, (3, 32, 32), 12)
    _npy(os.path.join(base, "x_val.npy"), images)
    _npy(os.path.join(base, "y_val.npy"), labels.astype(np.int64).reshape(-1, 1))


# -------------------------------------------------------------------- Penn Treebank
@maker
def ptb(root, words=20000, vocabulary=1000):
    """``ptb.train.txt`` (and valid/test): lines of space-separated words, ``<unk>`` among
    them, as in the Penn Treebank files language models download. Words follow a Zipf-like
    law, and each word makes its successors likelier, so there is something to learn."""
    rng = np.random.RandomState(13)
    vocab = ["<unk>"] + ["w{}".format(k) for k in range(1, vocabulary)]
    p = 1.0 / np.arange(1, vocabulary + 1)
    p /= p.sum()
    for split, n in (("train", words), ("valid", words // 10), ("test", words // 10)):
        ids = rng.choice(vocabulary, n, p=p)
        follow = rng.rand(n) < 0.3
        ids[1:][follow[1:]] = (ids[:-1][follow[1:]] * 7 + 1) % vocabulary
        lines, k = [], 0
        while k < n:
            length = rng.randint(5, 25)
            lines.append(" " + " ".join(vocab[i] for i in ids[k:k + length]) + " ")
            k += length
        _write(os.path.join(root, DATA_HOME, "ptb.{}.txt".format(split)), ("\n".join(lines) + "\n").encode())


# -------------------------------------------------------------------- Tiny ImageNet
def _jpeg(image_hwc):
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(image_hwc).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


@maker
def tiny_imagenet(root, train_per_class=2, val=40, classes=200):
    """``tiny-imagenet-200`` already extracted in the data home (the obsolete ImageNet
    example extracts the zip there and skips the download when the folder exists):
    ``wnids.txt``, ``train/<wnid>/images/<wnid>_<k>.JPEG`` and ``val/images/val_<k>.JPEG``
    with ``val/val_annotations.txt``; 64x64 RGB JPEGs."""
    base = os.path.join(root, DATA_HOME, "tiny-imagenet-200")
    wnids = ["n{:08d}".format(1000 + k) for k in range(classes)]
    _write(os.path.join(base, "wnids.txt"), ("\n".join(wnids) + "\n").encode())
    images, labels = class_images(classes * train_per_class, classes, (3, 64, 64), 14)
    count = {}
    labels = np.arange(classes * train_per_class) % classes   # uint8 would wrap at 256 classes
    for image, label in zip(images, labels):
        k = count.get(label, 0)
        count[label] = k + 1
        wnid = wnids[label]
        _write(os.path.join(base, "train", wnid, "images", "{}_{}.JPEG".format(wnid, k)),
               _jpeg(image.transpose(1, 2, 0)))
    images, _ = class_images(val, classes, (3, 64, 64), 15)
    lines = []
    for k, image in enumerate(images):
        name = "val_{}.JPEG".format(k)
        _write(os.path.join(base, "val", "images", name), _jpeg(image.transpose(1, 2, 0)))
        lines.append("{}\t{}\t0\t0\t63\t63".format(name, wnids[k % classes]))
    _write(os.path.join(base, "val", "val_annotations.txt"), ("\n".join(lines) + "\n").encode())


# ------------------------------------------------------------------------------ CelebA
@maker
def celeba(root, directory="celeba/img_align_celeba_png", n=16):
    """Aligned CelebA as PNG files (178x218 RGB, ``000001.png`` ...) in one folder, the layout
    the GAN examples glob with ``--img-path``; the face-centred crop they take sees class-free
    blocky patterns."""
    from PIL import Image
    images, _ = class_images(n, 4, (3, 218, 178), 16)
    for k, image in enumerate(images):
        buffer = io.BytesIO()
        Image.fromarray(image.transpose(1, 2, 0)).save(buffer, format="PNG")
        _write(os.path.join(root, directory, "{:06d}.png".format(k + 1)), buffer.getvalue())


CELEBA_ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose "
    "Black_Hair Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee "
    "Gray_Hair Heavy_Makeup High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard "
    "Oval_Face Pale_Skin Pointy_Nose Receding_Hairline Rosy_Cheeks Sideburns Smiling Straight_Hair "
    "Wavy_Hair Wearing_Earrings Wearing_Hat Wearing_Lipstick Wearing_Necklace Wearing_Necktie Young"
).split()


@maker
def celeba_attributes(root, directory="data/celeba", n=2016):
    """CelebA as StarGAN reads it: ``images/NNNNNN.jpg`` (178x218 RGB JPEGs) and
    ``list_attr_celeba.txt`` (the count, the 40 attribute names, then one line per image with
    its 40 values of 1 or -1)."""
    rng = np.random.RandomState(17)
    images, _ = class_images(n, 8, (3, 218, 178), 18)
    values = np.where(rng.rand(n, len(CELEBA_ATTRIBUTES)) < 0.5, 1, -1)
    lines = [str(n), " ".join(CELEBA_ATTRIBUTES)]
    for k, image in enumerate(images):
        name = "{:06d}.jpg".format(k + 1)
        _write(os.path.join(root, directory, "images", name), _jpeg(image.transpose(1, 2, 0)))
        lines.append(name + " " + " ".join("{:2d}".format(v) for v in values[k]))
    _write(os.path.join(root, directory, "list_attr_celeba.txt"), ("\n".join(lines) + "\n").encode())


# ----------------------------------------------------------------------------- facades
@maker
def facades(root, directory="datasets/facades", train=6, val=2, test=2, size=286):
    """CMP Facades as pix2pix's ``FacadeDataSource`` finds it once downloaded and split:
    ``train/``, ``val/``, ``test/`` each holding ``K.jpg`` (RGB photo) beside ``K.png`` (its
    label map, one byte per pixel, classes 1 .. 12). ``size`` x ``size`` images (the program
    scales the shorter side to 286, then crops 256)."""
    from PIL import Image
    counts = {"train": train, "val": val, "test": test}
    k = 0
    for split, seed in (("train", 19), ("val", 20), ("test", 21)):
        n = counts[split]
        labels, _ = class_images(n, 3, (1, size, size), seed, levels=12)
        labels = labels[:, 0] // (255 // 11) + 1                       # 1 .. 12
        noise = np.random.RandomState(seed + 100).randint(0, 40, (n, size, size, 3))
        photos = (labels[..., None] * 17 + noise).astype(np.uint8)
        for label, photo in zip(labels, photos):
            k += 1
            base = os.path.join(root, directory, split, "cmp_b{:04d}".format(k))
            buffer = io.BytesIO()
            Image.fromarray(label.astype(np.uint8), mode="L").save(buffer, format="PNG")
            _write(base + ".png", buffer.getvalue())
            _write(base + ".jpg", _jpeg(photo))


def make(name, root, **params):
    """Write dataset ``name`` (a function of this module) under ``root``."""
    if name not in MAKERS:
        raise KeyError("program_data: no dataset maker {!r} (known: {})".format(
            name, ", ".join(sorted(MAKERS))))
    MAKERS[name](root, **params)
