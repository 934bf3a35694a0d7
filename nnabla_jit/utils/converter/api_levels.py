"""nnabla-c-runtime's API levels: which functions a level has, their ids and argument codes.

``tables/nnb_api_levels.tsv`` holds nnabla 1.39's table: each level adds functions (or a new
argument list for one, under a new id) to the levels before it. ``ApiLevelInfo`` answers for
one level, as nnabla's converter does (``get_api_level_info().set_api_level(-1)``: the newest).
"""
import csv
import os
from collections import OrderedDict

__all__ = ["ApiLevelInfo", "get_api_level_info", "type_to_pack_format"]

_TABLE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                           "tables", "nnb_api_levels.tsv")
_PACK_FORMATS = {"bool": "B", "double": "f", "float": "f", "int64": "i", "repeated int64": "iI",
                 "Shape": "iI", "string": "i", "Communicator": "C"}


def type_to_pack_format(typestring):
    """The ``struct`` code an argument of table type ``typestring`` is packed with in NNB."""
    return _PACK_FORMATS.get(typestring)


def _read_table():
    levels = OrderedDict()
    with open(_TABLE_PATH, newline="") as f:
        rows = csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t")
        for row in rows:
            levels.setdefault(int(row["api_level"]), OrderedDict())[row["function"]] = (
                row["argument_code"], int(row["function_id"]))
    return levels


class ApiLevelInfo:
    """The functions of one API level (default: the newest, after ``set_api_level(-1)``)."""

    def __init__(self, levels):
        self.api_level_dict = levels
        self.api_level = max(levels)
        self.function_dict = None
        self.set_api_level(-1)

    def set_api_level(self, level):
        """Use ``level`` (-1, or a level above the newest: the newest)."""
        newest = max(self.api_level_dict)
        self.api_level = level if level != -1 and level <= newest else newest
        self.function_dict = OrderedDict()
        for le in sorted(self.api_level_dict):
            if le > self.api_level:
                break
            self.function_dict.update(self.api_level_dict[le])

    def get_current_level(self):
        return self.api_level

    def get_function_list(self):
        return self.function_dict.keys()

    def get_func_id(self, func_name):
        return self.function_dict[func_name][1]

    def get_argument_code(self, func_name):
        code = self.function_dict[func_name][0]
        return "" if code == "Empty" else code

    def get_func_uniq_name(self, func_name):
        return "{}_{}".format(func_name, self.function_dict[func_name][0])


_LEVELS = []


def get_api_level_info():
    """A fresh :class:`ApiLevelInfo` at the newest level (the table is read once)."""
    if not _LEVELS:
        _LEVELS.append(_read_table())
    return ApiLevelInfo(_LEVELS[0])
