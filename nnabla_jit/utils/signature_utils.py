"""Editing function signatures (nnabla's ``nnabla.utils.signature_utils``): ``SignatureEx``
is an ``inspect.Signature`` that can drop and add arguments and format itself for generated
wrapper code."""
import inspect

__all__ = ["SignatureEx", "PARAM_KINDS", "param_kind_to_int"]

_P = inspect.Parameter
PARAM_KINDS = [_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD, _P.VAR_POSITIONAL, _P.KEYWORD_ONLY,
               _P.VAR_KEYWORD]
param_kind_to_int = {kind: k for k, kind in enumerate(PARAM_KINDS)}


def _insertion_index(params, kind):
    """Where a parameter of ``kind`` goes: after every parameter of its kind or an earlier one."""
    for i, p in enumerate(params):
        if param_kind_to_int[p.kind] > param_kind_to_int[kind]:
            return i
    return len(params)


class SignatureEx(inspect.Signature):

    def drop_arg(self, argname, raise_if_not_found=False):
        """The signature without ``argname`` (KeyError if absent and ``raise_if_not_found``)."""
        params = dict(self.parameters)
        if argname in params:
            del params[argname]
        elif raise_if_not_found:
            raise KeyError("'{}' not found in {}".format(argname, list(params)))
        return self.replace(parameters=params.values())

    def add_arg(self, argname, kind=inspect.Parameter.POSITIONAL_OR_KEYWORD, *,
                default=inspect.Parameter.empty, annotation=inspect.Parameter.empty):
        """The signature with ``argname`` added after the last argument of its kind."""
        params = list(self.parameters.values())
        params.insert(_insertion_index(params, kind),
                      inspect.Parameter(argname, kind, default=default, annotation=annotation))
        return self.replace(parameters=params)

    @property
    def has_return_annotation(self):
        return self.return_annotation is not self.empty

    def format_argument_signature(self):
        """The text between the parentheses, e.g. ``x, y=1, *args``."""
        text = str(self)
        return text[:text.rfind(")")].strip("()")

    def format_return_annotation(self):
        """The text after the parentheses (`` -> int``), or ''."""
        return str(self).split(")")[1] if self.has_return_annotation else ""

    def format_caller_argument_signature(self):
        """The arguments as a call passing them through: ``x, y, *args, k=k, **kw``."""
        args = []
        for name, p in self.parameters.items():
            if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
                args.append(name)
            elif p.kind is _P.KEYWORD_ONLY:
                args.append("{0}={0}".format(name))
            else:
                args.append(str(p))
        return ", ".join(args)
