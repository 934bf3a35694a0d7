"""nnabla's dtype codes (``nnabla.dtypes``): the integers its C++ core and files use for
NumPy types, both ways. ``np_dtpye_to_int`` keeps nnabla's spelling."""
import numpy as np

__all__ = ["np_dtpye_to_int", "int_to_np_dtype"]

np_dtpye_to_int = {
    bool: 0,
    np.byte: 1,
    np.ubyte: 2,
    np.short: 3,
    np.ushort: 4,
    np.int32: 5,
    np.uint32: 6,
    np.longlong: 9,
    np.int64: 9,
    np.ulonglong: 10,
    np.uint64: 10,
    np.float32: 11,
    np.double: 12,
    np.longdouble: 13,
}

# Later entries win where two types share a code (int64 for 9, uint64 for 10), as in nnabla.
int_to_np_dtype = {code: t for t, code in np_dtpye_to_int.items()}
