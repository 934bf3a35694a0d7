"""``forward`` (executors over a CSV dataset -> output_result.csv) and ``infer`` (executors on
raw binary input files -> ``<prefix>_<i>.bin``), as nnabla_cli does them.

Per sample, an output of shape (N,) or of more than 3 dimensions becomes columns
``name__0 ...`` of the result CSV; a 2-D output is written to a CSV file and a 3-D one (1 or 3
channels) to a PNG image, whose paths go into the result CSV.
"""
import csv
import os

import numpy as np
from tqdm import tqdm

from ..data_source import write_csv_rows
from ..data_source_implements import read_csv_rows
from ..load import load
from . import CommandError, batch_size_argument

__all__ = ["add_forward_command", "add_infer_command", "run_executors"]


def _load(args):
    files = [args.config] + ([args.param] if args.param else [])
    batch_size = args.batch_size if args.batch_size > 0 else None
    return load(files, prepare_data_iterator=False, batch_size=batch_size)


def _set_data(pv, data, data_name):
    v = pv.variable_instance
    data = np.asarray(data)
    if data.shape != v.shape:
        if data.size != v.size:
            raise CommandError("data '{}' of shape {} does not fit variable '{}' of shape {}".format(
                data_name, data.shape, pv.name, v.shape))
        data = data.reshape(v.shape)
    v.d = data.astype(np.float32) if data.dtype == np.float64 else data
    v.need_grad = False


def run_executors(executors, data):
    """Run every executor with ``data`` (data name -> array); returns a list, per executor and
    output, of (name, array averaged over ``num_evaluations`` as nnabla does)."""
    results = []
    for e in executors:
        for pv, data_name in e.dataset_assign.items():
            if data_name not in data:
                raise CommandError("executor '{}' needs data '{}', which the dataset does not have "
                                   "(it has: {})".format(e.name, data_name, ", ".join(data)))
            _set_data(pv, data[data_name], data_name)
        for pv, generator in e.generator_assign.items():
            pv.variable_instance.d = generator(pv.variable_instance.shape)
        outs = list(e.output_assign.items())
        total = [np.zeros(pv.variable_instance.shape, np.float64) for pv, _ in outs]
        squares = [np.zeros_like(t) for t in total]
        for _ in range(e.num_evaluations):
            e.forward_target.forward(clear_buffer=True)
            if e.need_back_propagation:
                e.backward_target.backward(clear_buffer=True)
            for k, (pv, _) in enumerate(outs):
                d = pv.variable_instance.d
                if e.repeat_evaluation_type == "last":
                    total[k] = d.astype(np.float64)
                else:
                    total[k] += d
                    squares[k] += np.asarray(d, np.float64) ** 2
        n = e.num_evaluations
        for k, (pv, (_, data_name)) in enumerate(outs):
            if e.repeat_evaluation_type == "last":
                value = total[k]
            elif e.repeat_evaluation_type == "std":
                value = np.nan_to_num(np.sqrt(np.maximum(squares[k] / n - (total[k] / n) ** 2, 0)))
            else:
                value = total[k] / n
            results.append((data_name or pv.name, value.astype(pv.variable_instance.d.dtype)))
    return results


# ------------------------------------------------------------------------------------ forward
def _kind_of(sample):
    """nnabla's choice per output: ('col', n columns), ('.csv', 1) or ('.png', n images)."""
    if sample.ndim == 2:
        return ".csv", 1
    if sample.ndim == 3:
        return ".png", 1 if sample.shape[0] in (1, 3) else sample.shape[0]
    return "col", int(np.prod(sample.shape))


def _write_sample_file(args, out_index, file_index, sample, kind, image_index, n_images):
    name = "{}_{:04d}".format(out_index, file_index // 1000) + os.path.sep
    if n_images > 1:
        name += "{}_".format(image_index)
    name += "{}{}".format(file_index, kind)
    full = os.path.join(args.outdir, args.result_outdir, name)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if kind == ".csv":
        with open(full, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(np.asarray(sample))
    else:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        img = np.clip(np.asarray(sample, np.float32) * 255.0, 0, 255).astype(np.uint8)
        if img.shape[0] == 3:
            img = img.transpose(1, 2, 0)
        elif img.shape[0] == 1:
            img = img[0]
        else:
            img = img[image_index]
        plt.imsave(full, img, cmap="gray" if img.ndim == 2 else None)
    return os.path.join(".", args.result_outdir, name)


def _result_columns(args, results, batch_index, header):
    """Per sample of the batch, the values (or file paths) for the result CSV."""
    rows = None
    for out_index, (name, value) in enumerate(results):
        kind, n = _kind_of(value[0])
        if header is not None:
            header.extend([name] if n == 1 else ["{}__{}".format(name, d) for d in range(n)])
        if rows is None:
            rows = [[] for _ in range(len(value))]
        for s, sample in enumerate(value):
            if kind == "col":
                rows[s].extend(str(v) for v in np.ravel(sample))
            else:
                rows[s].extend(_write_sample_file(args, out_index, batch_index + s, sample, kind, i, n)
                               for i in range(n))
    return rows or []


def forward_command(args):
    if not args.dataset:
        raise CommandError("give the dataset with -d/--dataset (a CSV file)")
    if os.path.splitext(args.dataset)[1].lower() != ".csv":
        raise CommandError("unsupported dataset '{}': forward reads CSV datasets".format(args.dataset))
    info = _load(args)
    executors = list(info.executors.values())
    if not executors:
        raise CommandError("{} has no executor to run".format(args.config))
    normalize = all(not e.no_image_normalization for e in executors)
    for d in info.datasets.values():
        if d.uri == args.dataset or d.cache_dir == args.dataset:
            normalize = normalize and d.normalize
    rows = [row for row in read_csv_rows(args.dataset) if row]
    if not rows:
        raise CommandError("{} is empty".format(args.dataset))
    header, rows = rows[0], rows[1:]
    os.makedirs(args.outdir, exist_ok=True)
    from ..data_iterator import data_iterator_csv_dataset
    batch_size = executors[0].network.batch_size
    result_path = os.path.join(args.outdir, args.outfile)
    out_rows = []
    with data_iterator_csv_dataset(args.dataset, batch_size, shuffle=False, normalize=normalize,
                                   with_memory_cache=False, with_file_cache=False) as di:
        with tqdm(total=len(rows), desc="forward", unit="data") as bar:
            index = 0
            while index < di.size:
                data = dict(zip(di.variables, di.next()))
                results = run_executors(executors, data)
                columns = _result_columns(args, results, index, header if index == 0 else None)
                for i, cols in enumerate(columns):
                    if index + i < len(rows):
                        out_rows.append(rows[index + i] + cols)
                bar.update(min(len(columns), len(rows) - index))
                index += len(columns)
    write_csv_rows(result_path, [header] + out_rows)
    print("Forward completed: {}".format(result_path))
    return True


def add_forward_command(subparsers):
    sub = subparsers.add_parser(
        "forward", help="Do evaluation with NNP and test dataset.",
        description="Run the executors of an NNP over every row of a CSV dataset and write the "
                    "rows with the outputs appended to OUTDIR/output_result.csv.")
    sub.add_argument("-c", "--config", required=True, help="path to nnp / nntxt")
    sub.add_argument("-p", "--param", help="path to parameter file")
    sub.add_argument("-d", "--dataset", help="path to CSV dataset")
    sub.add_argument("-o", "--outdir", required=True, help="output directory")
    sub.add_argument("-f", "--outfile", default="output_result.csv", help="output file name")
    sub.add_argument("--result_outdir", default="",
                     help="directory (inside outdir) for per-sample csv/png outputs")
    sub.add_argument("-b", "--batch_size", type=batch_size_argument, default=-1,
                     help="batch size (default: the one in the file)")
    sub.set_defaults(func=forward_command)
    return sub


# ------------------------------------------------------------------------------------ infer
_DATA_TYPES = {"uint8": np.uint8, "int32": np.int32, "float32": np.float32}


def infer_command(args):
    if args.data_type not in _DATA_TYPES:
        raise CommandError("data type must be uint8, int32 or float32, got '{}'".format(args.data_type))
    info = _load(args)
    executors = list(info.executors.values())
    if not executors:
        raise CommandError("{} has no executor to run".format(args.config))
    needed = [(pv, d) for e in executors for pv, d in e.dataset_assign.items()]
    if len(args.inputs) != len(needed):
        raise CommandError("the executors need {} inputs ({}), {} files given".format(
            len(needed), ", ".join(d for _, d in needed), len(args.inputs)))
    data = {}
    for (pv, name), path in zip(needed, args.inputs):
        dtype = _DATA_TYPES[args.data_type]
        if args.data_type == "float32":     # nnabla's rule: the file name can tell the type
            dtype = np.int32 if "int32" in path else np.uint8 if "uint8" in path else np.float32
        if not os.path.exists(path):
            raise FileNotFoundError("{}: no such file".format(path))
        data[name] = np.fromfile(path, dtype)
        if data[name].size != pv.variable_instance.size:
            raise CommandError("{}: {} bytes are {} {} values, input '{}' of shape {} needs {}".format(
                path, os.path.getsize(path), data[name].size, np.dtype(dtype).name, name,
                tuple(pv.variable_instance.shape), pv.variable_instance.size))
    results = run_executors(executors, data)
    for i, (name, value) in enumerate(results):
        if args.output is not None:
            value.astype(np.float32).tofile("{}_{}.bin".format(args.output, i))
        print("{}: shape {}".format(name, value.shape))
    return True


def add_infer_command(subparsers):
    sub = subparsers.add_parser(
        "infer", help="Do inference with NNP and binary data file input.",
        description="Run the executors of an NNP on raw binary input files (one per data "
                    "variable) and write each output to <output>_<i>.bin as float32.")
    sub.add_argument("-c", "--config", required=True, help="path to nnp / nntxt")
    sub.add_argument("-o", "--output", help="output file prefix")
    sub.add_argument("-p", "--param", help="path to parameter file")
    sub.add_argument("-t", "--data_type", default="float32", help="uint8, int32 or float32")
    sub.add_argument("-b", "--batch_size", type=batch_size_argument, default=1,
                     help="batch size (-1: the one in the file)")
    sub.add_argument("inputs", nargs="+", help="binary input files")
    sub.set_defaults(func=infer_command)
    return sub
