"""The NNB settings file (``convert -s``, written by ``nnb_template``): a two-level YAML mapping

    functions:
      '@mlp/Affine':
        implement: 0
    variables:
      x: FLOAT32
      fc1/affine/W: FIXED16_12

read and written here without a YAML library, in the layout PyYAML's ``yaml.dump`` gives it
(block style, keys in order, single quotes where YAML needs them), so nnabla reads ours and we
read nnabla's. Flow style (``{...}``) and multi-line values are refused with the line.
"""
import re
from collections import OrderedDict

__all__ = ["load_settings", "dump_settings", "quote_scalar", "SettingsFileError"]

_PLAIN_FIRST = re.compile(r"^[^-?:,\[\]{}#&*!|>'\"%@`\s]")
_SPECIAL_WORDS = {"", "~", "null", "true", "false", "yes", "no", "on", "off"}   # PyYAML 1.1 resolvers
_NUMBER = re.compile(r"^[-+]?(\.?[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?|\.(inf|nan))$", re.I)


class SettingsFileError(ValueError):
    def __init__(self, source, line_number, message):
        super().__init__("{}:{}: {}".format(source, line_number, message))


def quote_scalar(text):
    """``text`` as a YAML scalar, quoted where PyYAML quotes it."""
    text = str(text)
    if (_PLAIN_FIRST.match(text) and text.lower() not in _SPECIAL_WORDS and not _NUMBER.match(text)
            and ": " not in text and " #" not in text and not text.endswith((":", " "))):
        return text
    return "'" + text.replace("'", "''") + "'"


def _unquote(text, source, number):
    text = text.strip()
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise SettingsFileError(source, number, "unterminated quote in {!r}".format(text))
        return text[1:-1].replace("''", "'")
    if text.startswith('"'):
        if not text.endswith('"') or len(text) < 2:
            raise SettingsFileError(source, number, "unterminated quote in {!r}".format(text))
        return text[1:-1].encode().decode("unicode_escape")
    if text.startswith(("{", "[")):
        raise SettingsFileError(source, number, "flow style ({!r}) is not read; write one key a "
                                "line as nnb_template does".format(text))
    return text


def _split_key(body, source, number):
    """``key: value`` -> (key, value text); the key may be quoted."""
    if body[0] in "'\"":
        end = 1
        while True:
            end = body.find(body[0], end)
            if end < 0:
                raise SettingsFileError(source, number, "unterminated quote")
            if body[0] == "'" and body[end + 1:end + 2] == "'":
                end += 2
                continue
            break
        key, rest = body[:end + 1], body[end + 1:]
        if not rest.startswith(":"):
            raise SettingsFileError(source, number, "':' expected after the key")
        return _unquote(key, source, number), rest[1:]
    m = re.match(r"^(.*?):(\s|$)(.*)$", body)
    if not m:
        raise SettingsFileError(source, number, "'key: value' expected, got {!r}".format(body))
    return m.group(1).strip(), m.group(3)


def _scalar(text, source, number):
    value = _unquote(text, source, number)
    if not text.strip().startswith(("'", '"')) and re.match(r"^[-+]?[0-9]+$", value):
        return int(value)
    return value


def load_settings(text, source="settings"):
    """The settings in YAML ``text`` as nested OrderedDicts (integers as int)."""
    root = OrderedDict()
    stack = [(-1, root)]
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("'") else line.rstrip()
        if not stripped.strip() or stripped.lstrip().startswith("#") or stripped.strip() == "---":
            continue
        indent = len(stripped) - len(stripped.lstrip(" "))
        key, rest = _split_key(stripped.strip(), source, number)
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if rest.strip():
            parent[key] = _scalar(rest, source, number)
        else:
            child = OrderedDict()
            parent[key] = child
            stack.append((indent, child))
    return root


def dump_settings(settings):
    """``settings`` (nested mappings of scalars) as yaml.dump(default_flow_style=False) writes it."""
    lines = []

    def emit(mapping, indent):
        for key, value in mapping.items():
            if isinstance(value, dict):
                if value:
                    lines.append("{}{}:".format(" " * indent, quote_scalar(key)))
                    emit(value, indent + 2)
                else:
                    lines.append("{}{}: {{}}".format(" " * indent, quote_scalar(key)))
            else:
                lines.append("{}{}: {}".format(" " * indent, quote_scalar(key),
                                               value if isinstance(value, int) else quote_scalar(value)))
    emit(settings, 0)
    return "\n".join(lines) + "\n"
