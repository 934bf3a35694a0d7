"""Reading and writing nnabla's model files: ``.nnp``, ``.nntxt``/``.prototxt``, ``.protobuf``
and ``.h5``.

An ``.nnp`` is a zip of ``nnp_version.txt`` (``0.1``), the network definition
(``network.nntxt`` or ``network.protobuf``), the parameters (``parameter.h5`` or
``parameter.protobuf``) and optionally solver-state checkpoints (``*.optimizer``). :func:`read`
parses any mix of these files into one :class:`NnpContents`; :func:`write` writes one.
"""
import io
import os
import struct
import zipfile
import zlib
from collections import OrderedDict

from google.protobuf import message as _message, text_format

from . import parameters as params_io
from . import solver_states
from .files import (FileFormatError, atomic_path, check_readable, check_shape, extension_of,
                    file_label, naming_errors, read_bytes, scratch_path, write_bytes)
from .proto import nnabla_pb2

__all__ = ["NNP_VERSION", "NnpContents", "read", "write", "parse_text", "parse_binary",
           "proto_to_text", "MODEL_EXTENSIONS", "PARAMETER_EXTENSIONS"]

NNP_VERSION = "0.1"
#: The nnp_version.txt values this reader understands (nnabla has only ever written 0.1).
NNP_VERSIONS = (NNP_VERSION,)
TEXT_EXTENSIONS = (".nntxt", ".prototxt")
MODEL_EXTENSIONS = (".nnp", ".protobuf") + TEXT_EXTENSIONS
PARAMETER_EXTENSIONS = (".h5",) + MODEL_EXTENSIONS


class NnpContents:
    """What a set of files holds: ``proto`` (an NNablaProtoBuf with every message read, the
    ``parameter`` entries of protobuf/text files included), ``parameters`` (every parameter
    read, as ``ParameterEntry``, in reading order) and ``optimizer_states`` (optimizer name ->
    solver states of the ``.optimizer`` checkpoints)."""

    def __init__(self):
        self.proto = nnabla_pb2.NNablaProtoBuf()
        self.parameters = []
        self.optimizer_states = OrderedDict()
        self.source = "<NnpContents>"   # the files read, as errors name them


# ------------------------------------------------------------------------------------ parsing
def parse_text(data, source, message_type=None):
    """Parse protobuf text (``.nntxt``); errors name ``source`` and the line."""
    msg = (message_type or nnabla_pb2.NNablaProtoBuf)()
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        text_format.Merge(text, msg)
    except UnicodeDecodeError:
        raise FileFormatError(source, "not a text file (protobuf text expected)") from None
    except text_format.ParseError as e:
        raise FileFormatError(source, "not valid nnabla protobuf text: {}".format(e)) from None
    return msg


def parse_binary(data, source, message_type=None):
    """Parse binary protobuf; errors name ``source``."""
    msg = (message_type or nnabla_pb2.NNablaProtoBuf)()
    try:
        msg.ParseFromString(data)
    except (_message.DecodeError, RuntimeError, ValueError) as e:
        raise FileFormatError(source, "not a valid nnabla protobuf file ({})".format(e)) from None
    return msg


def proto_to_text(proto):
    """The ``.nntxt`` text of a message, as nnabla writes it."""
    return text_format.MessageToString(proto)


# ------------------------------------------------------------------------------------ reading
def _read_member(contents, data, name, ext, source, exclude_parameter, parameter_only):
    if ext in TEXT_EXTENSIONS or ext == ".protobuf":
        if parameter_only and ext in TEXT_EXTENSIONS:
            return
        msg = parse_text(data, source) if ext in TEXT_EXTENSIONS else parse_binary(data, source)
        _check_network_shapes(msg, source)
        if not exclude_parameter:
            contents.parameters.extend(params_io.entries_from_proto(msg, source))
        else:
            del msg.parameter[:]
        contents.proto.MergeFrom(msg)
    elif ext == ".h5":
        if not exclude_parameter:
            contents.parameters.extend(params_io.read_h5_bytes(data, source))
    elif ext == ".optimizer":
        _read_optimizer_checkpoint(contents, data, name, source)


def _check_network_shapes(msg, source):
    """Refuse a variable shape beyond MAX_SHAPE_ELEMENTS before any graph is built from it."""
    for network in msg.network:
        for v in network.variable:
            check_shape(v.shape.dim, "network '{}': variable '{}'".format(network.name, v.name), source)


def _read_optimizer_checkpoint(contents, data, name, source):
    """``<optimizer>_<Solver>_optimizer.h5.optimizer`` or ``optimizer.protobuf.optimizer``."""
    kind = os.path.splitext(os.path.splitext(name)[0])[1]
    if kind == ".h5":
        optimizer_name = "_".join(os.path.basename(name).split("_")[:-2])
        contents.optimizer_states[optimizer_name] = solver_states.states_from_h5_bytes(data, source)
    elif kind == ".protobuf":
        for opt in parse_binary(data, source).optimizer:
            contents.optimizer_states[opt.name] = solver_states.states_from_proto(opt.solver, source)
    else:
        raise FileFormatError(source, "solver-state member '{}' is neither .h5.optimizer nor "
                              ".protobuf.optimizer".format(name))


# Members an .nnp reader uses, by extension; anything else in the archive is skipped unread.
_USED_MEMBER_EXTENSIONS = MODEL_EXTENSIONS + (".h5", ".optimizer")

#: A member may expand to at most this many times its compressed size (and at least
#: ``MIN_MEMBER_LIMIT`` bytes): a small archive cannot make the reader decompress gigabytes.
#: nnabla and nnabla_jit store members uncompressed; raise this for an archive that holds
#: highly compressible parameters (all zeros, say).
MAX_EXPANSION = 100
MIN_MEMBER_LIMIT = 64 << 20
_CHUNK = 1 << 20


def _member_limit(info):
    return max(MIN_MEMBER_LIMIT, MAX_EXPANSION * info.compress_size)


def _too_large(source, info):
    return FileFormatError(source, "member '{}' expands beyond {} bytes from {} compressed bytes: "
                           "refused as a possible zip bomb (raise nnabla_jit.serialization.nnp."
                           "MAX_EXPANSION to read it)".format(info.filename, _member_limit(info),
                                                             info.compress_size))


#: protobuf parses no message of 2 GiB or more: a ``.protobuf`` or text (``.nntxt``) file, or
#: member, beyond this is refused before it is read (a 4 GB sparse ``.nntxt`` costs nothing).
MAX_PROTOBUF_BYTES = 2 ** 31 - 1


def _protobuf_too_long(source, size, text):
    return FileFormatError(source, "the file is {} bytes; protobuf {}files of at most {} bytes are "
                           "read (protobuf's own limit)".format(size, "text " if text else "",
                                                                MAX_PROTOBUF_BYTES))


def _read_chunks(f, source, limit, too_large, text):
    """The bytes of the open file ``f``, read in chunks: refused by ``too_large(size)`` once past
    ``limit`` bytes and, for ``text``, at the first NUL byte (a sparse file of zeros is refused
    at its first chunk, not after reading it all)."""
    chunks, total = [], 0
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        if text:
            nul = chunk.find(b"\0")
            if nul >= 0:
                raise FileFormatError(source, "not a text file (a NUL byte at offset {})".format(
                    total + nul))
        total += len(chunk)
        if total > limit:
            raise too_large(total)
        chunks.append(chunk)
    return b"".join(chunks)


def _read_protobuf_file(source, text):
    """The bytes of a ``.protobuf`` or text file (path or file object), within
    MAX_PROTOBUF_BYTES and, for text, without NUL bytes."""
    def too_long(size):
        return _protobuf_too_long(source, size, text)
    if isinstance(source, (str, os.PathLike)):
        size = check_readable(source)
        if size > MAX_PROTOBUF_BYTES:
            raise too_long(size)
        with open(os.fspath(source), "rb") as f:
            return _read_chunks(f, source, MAX_PROTOBUF_BYTES, too_long, text)
    if hasattr(source, "read"):
        return _read_chunks(source, source, MAX_PROTOBUF_BYTES, too_long, text)
    return read_bytes(source)   # raises naming the type


def _read_archive_member(archive, info, source, ext=None):
    """The bytes of one member, read in chunks and refused once past its size limit (and for a
    protobuf member, past MAX_PROTOBUF_BYTES or, as text, at a NUL byte)."""
    limit = _member_limit(info)
    if info.file_size > limit:
        raise _too_large(source, info)
    protobuf = ext in TEXT_EXTENSIONS or ext == ".protobuf"
    member = "{}:{}".format(file_label(source), info.filename)
    if protobuf:
        if info.file_size > MAX_PROTOBUF_BYTES:
            raise _protobuf_too_long(member, info.file_size, ext in TEXT_EXTENSIONS)
        limit = min(limit, MAX_PROTOBUF_BYTES)

    def too_large(size):
        if protobuf and size > MAX_PROTOBUF_BYTES:
            return _protobuf_too_long(member, size, ext in TEXT_EXTENSIONS)
        return _too_large(source, info)
    with archive.open(info) as f:
        return _read_chunks(f, member, limit, too_large, ext in TEXT_EXTENSIONS)


class _StoredMember(io.RawIOBase):
    """A stored (uncompressed) member of a zip archive, read in place: a read-only seekable
    window of the archive's file, so that h5py reads a member's parameters without the member
    being copied into memory first (zipfile's own reader would re-read from the start on every
    backward seek). Its CRC is checked as it is opened."""

    def __init__(self, f, info, source):
        super().__init__()
        f.seek(info.header_offset)
        header = f.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise FileFormatError(source, "member '{}' has a damaged local header".format(info.filename))
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        self._f, self._size, self._pos = f, info.file_size, 0
        self._start = info.header_offset + 30 + name_length + extra_length
        crc = 0
        while True:
            chunk = self.read(_CHUNK)
            if not chunk:
                break
            crc = zlib.crc32(chunk, crc)
        if self._pos != self._size or crc != info.CRC:
            raise FileFormatError(source, "member '{}' is damaged (CRC or size does not match)".format(
                info.filename))
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer):
        n = max(0, min(len(buffer), self._size - self._pos))
        if n == 0:
            return 0
        self._f.seek(self._start + self._pos)
        got = self._f.readinto(memoryview(buffer)[:n])
        self._pos += got
        return got


def _read_h5_member(contents, archive, opened, info, source, member_source):
    """The parameters of an ``.h5`` member: read in place when it is stored uncompressed (as
    nnabla and nnabla_jit write it), else from its bytes."""
    if info.compress_type != zipfile.ZIP_STORED or info.file_size > _member_limit(info):
        data = _read_archive_member(archive, info, source, ".h5")
        contents.parameters.extend(params_io.read_h5(member_source, data))
        return
    own = isinstance(opened, (str, os.PathLike))
    f = open(os.fspath(opened), "rb") if own else opened
    try:
        window = _StoredMember(f, info, member_source)
        contents.parameters.extend(params_io.read_h5(member_source, window))
    finally:
        if own:
            f.close()


def _check_version(data, source):
    try:
        version = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise FileFormatError(source, "nnp_version.txt is not text") from None
    if version not in NNP_VERSIONS:
        raise FileFormatError(source, "unsupported nnp_version {!r} (this reader knows {})".format(
            version[:40], ", ".join(NNP_VERSIONS)))


def _read_nnp(contents, source, exclude_parameter, parameter_only):
    """Read an archive member by member (a path is not read into memory first)."""
    if isinstance(source, (str, os.PathLike)):
        if check_readable(source) == 0:
            raise FileFormatError(source, "the file is empty")
        opened = source
    else:
        # a zip archive is found from its end, so (as for nnabla's zipfile) the position of a
        # seekable file object does not matter: one just written is read from its start
        if getattr(source, "seekable", lambda: False)():
            source.seek(0)
        data = read_bytes(source)
        if not data:
            raise FileFormatError(source, "the file is empty")
        opened = io.BytesIO(data)
    label = file_label(source)
    try:
        with zipfile.ZipFile(opened) as archive:
            infos = [i for i in archive.infolist() if not i.is_dir()]
            names = [i.filename for i in infos]
            if not any(os.path.splitext(n)[1].lower() in MODEL_EXTENSIONS + (".h5",) for n in names):
                raise FileFormatError(source, "the archive holds no network or parameter file "
                                      "(members: {})".format(", ".join(names[:20]) or "none"))
            version = [i for i in infos if os.path.basename(i.filename) == "nnp_version.txt"]
            if version:
                if version[0].file_size > 1024:
                    raise FileFormatError(source, "nnp_version.txt is {} bytes long".format(
                        version[0].file_size))
                _check_version(archive.read(version[0]), source)
            for info in infos:
                ext = os.path.splitext(info.filename)[1].lower()
                if ext == ".nnp":
                    raise FileFormatError(source, "an .nnp inside an .nnp ('{}') is not "
                                          "supported".format(info.filename))
                if ext not in _USED_MEMBER_EXTENSIONS:
                    continue
                member_source = "{}:{}".format(label, info.filename)
                if ext == ".h5":
                    if not exclude_parameter:
                        _read_h5_member(contents, archive, opened, info, source, member_source)
                    continue
                member = _read_archive_member(archive, info, source, ext)
                _read_member(contents, member, info.filename, ext, member_source,
                             exclude_parameter, parameter_only)
    except FileFormatError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            NotImplementedError, RuntimeError, zlib.error) as e:
        raise FileFormatError(source, "not a readable .nnp (zip) archive ({})".format(e)) from None


def read(files, extension=None, exclude_parameter=False, parameter_only=False):
    """Parse ``files`` (a path or file object, or a list of them) into one :class:`NnpContents`.

    ``extension`` tells the format of file objects. ``exclude_parameter`` skips parameters,
    ``parameter_only`` skips network definitions in text files (as nnabla's ``load`` does).
    An empty ``.protobuf`` or text file is an empty message (nnabla writes an empty parameter
    set as a zero-byte ``.protobuf``); an empty ``.nnp`` or ``.h5`` is an error.
    """
    if isinstance(files, (str, os.PathLike)) or hasattr(files, "read"):
        files = [files]
    contents = NnpContents()
    contents.source = ", ".join(file_label(f) for f in files) or contents.source
    for source in files:
        ext = extension_of(source, extension, "load")
        if ext not in PARAMETER_EXTENSIONS:
            raise ValueError("load: {}: unsupported file type '{}' (expected one of {})".format(
                file_label(source), ext, ", ".join(PARAMETER_EXTENSIONS)))
        if ext == ".nnp":
            _read_nnp(contents, source, exclude_parameter, parameter_only)
            continue
        if ext == ".h5" and isinstance(source, (str, os.PathLike)):
            # read in place by h5py: a large file is never held in memory as bytes
            if check_readable(source) == 0:
                raise FileFormatError(source, "the file is empty")
            if not exclude_parameter:
                contents.parameters.extend(params_io.read_h5(source))
            continue
        if ext in TEXT_EXTENSIONS or ext == ".protobuf":
            data = _read_protobuf_file(source, ext in TEXT_EXTENSIONS)
        else:
            data = read_bytes(source)
        if not data and ext == ".h5":
            raise FileFormatError(source, "the file is empty")
        _read_member(contents, data, file_label(source), ext, source, exclude_parameter,
                     parameter_only)
    return contents


# ------------------------------------------------------------------------------------ writing
def _optimizer_members(optimizer_states, solver_types, state_format):
    """The ``.optimizer`` members of an ``.nnp`` for ``optimizer name -> states``."""
    if state_format == ".protobuf":
        proto = nnabla_pb2.NNablaProtoBuf()
        for name, states in optimizer_states.items():
            opt = proto.optimizer.add(name=name)
            opt.solver.type = solver_types.get(name, "")
            solver_states.states_to_proto(opt.solver, states)
        return [("optimizer.protobuf.optimizer", proto.SerializeToString())]
    if state_format == ".h5":
        return [("{}_{}_optimizer.h5.optimizer".format(name, solver_types.get(name, "Solver")),
                 solver_states.states_to_h5_bytes(states)) for name, states in optimizer_states.items()]
    raise ValueError("save: solver_state_format must be '.h5' or '.protobuf', got {!r}".format(state_format))


def write(path, proto, parameters=(), extension=None, parameter_format=".h5",
          network_format=".nntxt", optimizer_states=None, solver_types=None,
          solver_state_format=".h5"):
    """Write a model file.

    ``.nnp``: a zip of ``nnp_version.txt``, ``network<network_format>``,
    ``parameter<parameter_format>`` (unless ``parameter_format`` is None; ``'.nntxt'`` puts the
    parameters into the network file) and the solver states of ``optimizer_states``.
    ``.nntxt`` / ``.protobuf``: the message with ``parameters`` in it. ``.h5``: parameters only.
    ``parameters`` is a list of ``ParameterEntry``; the write is atomic.
    """
    ext = extension_of(path, extension, "save")
    proto = _copy_without_parameters(proto)
    to_path = isinstance(path, (str, os.PathLike))
    if ext in TEXT_EXTENSIONS + (".protobuf",):
        params_io.add_entries_to_proto(proto, parameters)
        data = proto_to_text(proto).encode("utf-8") if ext in TEXT_EXTENSIONS else proto.SerializeToString()
    elif ext == ".h5" and to_path:
        with atomic_path(path) as tmp:   # written in place: the file is never held in memory
            params_io.write_h5(tmp, parameters)
        return
    elif ext == ".h5":
        data = params_io.h5_bytes(parameters)
    elif ext == ".nnp":
        members = _nnp_members(proto, parameters, parameter_format, network_format,
                               optimizer_states or {}, solver_types or {}, solver_state_format)
        if to_path:
            with atomic_path(path) as tmp, naming_errors(tmp):
                with open(tmp, "wb") as f:
                    _write_nnp(f, members, path)
                    f.flush()
                    os.fsync(f.fileno())
            return
        buf = io.BytesIO()
        _write_nnp(buf, members, None)
        data = buf.getvalue()
    else:
        raise ValueError("save: {}: unsupported file type '{}' (expected .nnp, .nntxt, .prototxt, "
                         ".protobuf or .h5)".format(file_label(path), ext))
    write_bytes(path, data)


def _copy_without_parameters(proto):
    out = nnabla_pb2.NNablaProtoBuf()
    out.CopyFrom(proto)
    del out.parameter[:]
    return out


def _nnp_members(proto, parameters, parameter_format, network_format, optimizer_states,
                 solver_types, solver_state_format):
    """(name, bytes or a function writing the member to a path) of an ``.nnp``'s members."""
    if network_format not in (".nntxt", ".protobuf"):
        raise ValueError("save: network_format must be '.nntxt' or '.protobuf', got {!r}".format(
            network_format))
    members = [("nnp_version.txt", (NNP_VERSION + "\n").encode())]
    if parameter_format in (".nntxt", ".prototxt"):
        params_io.add_entries_to_proto(proto, parameters)
    network = proto_to_text(proto).encode("utf-8") if network_format == ".nntxt" else proto.SerializeToString()
    members.append(("network" + network_format, network))
    if parameter_format == ".h5":
        members.append(("parameter.h5", lambda target: params_io.write_h5(target, parameters)))
    elif parameter_format == ".protobuf":
        pproto = nnabla_pb2.NNablaProtoBuf()
        params_io.add_entries_to_proto(pproto, parameters)
        members.append(("parameter.protobuf", pproto.SerializeToString()))
    elif parameter_format not in (None, ".nntxt", ".prototxt"):
        raise ValueError("save: parameter_format must be '.h5', '.protobuf', '.nntxt' or None, "
                         "got {!r}".format(parameter_format))
    if optimizer_states:
        members += _optimizer_members(optimizer_states, solver_types, solver_state_format)
    return members


def _write_nnp(target, members, beside):
    """Write the zip of ``members`` to ``target`` (a path or file object); a member given as a
    writer is written to a scratch file (beside the path ``beside``) and copied in from there,
    so that the parameters are never held in memory as one more copy."""
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in members:
            if callable(data):
                with scratch_path(beside) as tmp:
                    data(tmp)
                    archive.write(tmp, name)
            else:
                archive.writestr(name, data)

