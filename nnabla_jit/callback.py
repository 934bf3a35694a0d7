"""Global callbacks (nnabla's ``nnabla.callback``): hooks called around every function's
forward/backward and around every solver operation on each parameter, registered by key.

    nn.set_function_pre_hook("trace", lambda f: print(f.name))
    loss.forward(); loss.backward()        # prints every function, in execution order
    nn.unset_function_pre_hook("trace")

The executor and the solvers ask :func:`function_hooks` / :func:`solver_hooks` for the hooks to
call, which combine the global ones with those passed to a single call (the call's own run first).
"""
__all__ = ["set_function_pre_hook", "set_function_post_hook", "unset_function_pre_hook",
           "unset_function_post_hook", "set_solver_pre_hook", "set_solver_post_hook",
           "unset_solver_pre_hook", "unset_solver_post_hook", "function_hooks", "solver_hooks"]

# key -> callable, in registration order (dicts keep it); re-registering a key replaces it.
_function_pre = {}
_function_post = {}
_solver_pre = {}
_solver_post = {}


def _setter(table, what):
    def set_hook(key, hook):
        if not callable(hook):
            raise TypeError("set_{}: the hook for key {!r} must be callable, got {}".format(
                what, key, type(hook).__name__))
        table[str(key)] = hook
    set_hook.__name__ = "set_" + what
    set_hook.__doc__ = "Register ``hook`` under ``key`` as a global {}.".format(what.replace("_", " "))
    return set_hook


def _unsetter(table, what):
    def unset_hook(key):
        if str(key) not in table:
            raise KeyError("unset_{}: no hook registered under key {!r} (registered: {})".format(
                what, key, sorted(table)))
        del table[str(key)]
    unset_hook.__name__ = "unset_" + what
    unset_hook.__doc__ = "Remove the global {} registered under ``key``.".format(what.replace("_", " "))
    return unset_hook


set_function_pre_hook = _setter(_function_pre, "function_pre_hook")
set_function_post_hook = _setter(_function_post, "function_post_hook")
unset_function_pre_hook = _unsetter(_function_pre, "function_pre_hook")
unset_function_post_hook = _unsetter(_function_post, "function_post_hook")
set_solver_pre_hook = _setter(_solver_pre, "solver_pre_hook")
set_solver_post_hook = _setter(_solver_post, "solver_post_hook")
unset_solver_pre_hook = _unsetter(_solver_pre, "solver_pre_hook")
unset_solver_post_hook = _unsetter(_solver_post, "solver_post_hook")


def _combined(own, table):
    if not table:
        return own
    hooks = ([own] if own is not None else []) + list(table.values())

    def call_all(*args):
        for h in hooks:
            h(*args)
    return call_all


def function_hooks(pre, post):
    """The (pre, post) function hooks for one forward/backward call: ``pre``/``post`` (may be
    None) followed by the global ones; None where there is none at all."""
    return _combined(pre, _function_pre), _combined(post, _function_post)


def solver_hooks(pre, post):
    """The (pre, post) hooks for one solver operation, as :func:`function_hooks`."""
    return _combined(pre, _solver_pre), _combined(post, _solver_post)


# ------------------------------------------------------------------ clear-called flag recorder
# nnabla's ``nnabla.testing.clear_called_flag_recorder`` (what its memory-release tests read):
# while active, the executor records the (data, grad) clear-called flags of each function's
# inputs after its forward (recomputations included) and after its backward (before that step's
# frees), and those of its outputs after its backward.
_recorder = {"active": False, "inputs": [], "outputs": []}


def recorder_active():
    return _recorder["active"]


def _flags(variables):
    return [(v._body.data.clear_called, v._body.grad.clear_called) for v in variables]


def record_inputs(node):
    """The data and grad flags of the inputs (after a forward; in backward before its frees)."""
    _recorder["inputs"].append(_flags(node.inputs))


def record_outputs(node):
    """The flags of the outputs (after a backward step and its frees)."""
    _recorder["outputs"].append(_flags([v for v in node.outputs if v is not None]))
