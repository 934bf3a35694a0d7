"""``cache``: show, empty or fill the kernel cache (see ``nnabla_jit/kernel_cache.py``).

    nnabla_jit cache info     where the cache lives, what moves it, how many files and bytes
    nnabla_jit cache clear    remove the generated kernels and numba's machine code of nnabla_jit
    nnabla_jit cache warm     compile the kernels of common training steps ahead of time
"""
from ... import deferred_compile, kernel_cache
from ...kernel_cache import ENV_VAR

__all__ = ["add_cache_command"]


def _size(n):
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return "{:.0f} {}".format(n, unit)
        n /= 1024
    return "{:.1f} GiB".format(n)


def cache_info_command(args):
    deferred_compile.stop_worker()   # a background compile of an empty cache: not now
    info = kernel_cache.info()
    print("kernel cache: {}{}".format(info["directory"], "" if info["usable"] else
                                      "  (unusable: kernels are compiled in memory)"))
    for part in ("kernels", "numba"):
        entry = info[part]
        print("  {:8} {}  ({} files, {})".format(part + ":", entry["directory"] or "-",
                                                 entry["files"], _size(entry["bytes"])))
    print("moved by {} (now {}); numba's part by NUMBA_CACHE_DIR (now {}); default "
          "$XDG_CACHE_HOME/nnabla_jit or ~/.cache/nnabla_jit".format(
              ENV_VAR, info["variables"][ENV_VAR] or "(unset)",
              info["variables"]["NUMBA_CACHE_DIR"] or "(unset)"))
    return True


def cache_clear_command(args):
    deferred_compile.stop_worker()   # a background compile of an empty cache: not now
    removed = kernel_cache.clear()
    print("removed {} files from the kernel cache ({})".format(removed, kernel_cache.configured_cache_dir()))
    return True


def cache_warm_command(args):
    deferred_compile.stop_worker()   # a background compile of an empty cache: not now
    # Imported here: the warm-up builds networks (F, PF, solvers), which `info` and `clear` do
    # not need.
    from ..kernel_warmup import NETWORKS, warm
    names = args.networks or list(NETWORKS)
    seconds = warm(names, jobs=args.jobs, verbose=not args.quiet)
    print("kernels of {} compiled into {} in {:.1f} s".format(
        ", ".join(names), kernel_cache.configured_cache_dir(), seconds))
    return True


def add_cache_command(subparsers):
    parser = subparsers.add_parser(
        "cache", help="Show, empty or fill the kernel cache.",
        description="The kernel cache holds generated kernels and numba's machine code "
                    "(default ~/.cache/nnabla_jit; moved by {} and, for numba's part, "
                    "NUMBA_CACHE_DIR).".format(ENV_VAR))
    actions = parser.add_subparsers(title="actions", metavar="ACTION", dest="action", required=True)
    sub = actions.add_parser("info", help="Where the cache is and how big.")
    sub.set_defaults(func=cache_info_command)
    sub = actions.add_parser("clear", help="Remove every cached kernel.")
    sub.set_defaults(func=cache_clear_command)
    sub = actions.add_parser("warm", help="Compile the kernels of common training steps now.")
    sub.add_argument("networks", nargs="*", help="which of lenet, digits, mlp, small (default: all)")
    sub.add_argument("-j", "--jobs", type=int, default=None,
                     help="processes compiling at once (default: the number of CPUs)")
    sub.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    sub.set_defaults(func=cache_warm_command)
