"""Logical ops. Comparisons and logical operators output 1.0 / 0.0 and, as in nnabla, have no
gradient; Sign, Minimum/Maximum and Where pass gradients through."""
from .elementwise import elementwise

# nnabla passes the gradient of Sign straight through.
elementwise("Sign", "sign(x, alpha)", dx="dy")
elementwise("Minimum2", "minimum(x0, x1)", dx0="where(x0 < x1, dy, 0.0)", dx1="where(x0 < x1, 0.0, dy)")
elementwise("Maximum2", "maximum(x0, x1)", dx0="where(x0 > x1, dy, 0.0)", dx1="where(x0 > x1, 0.0, dy)")
elementwise("MinimumScalar", "minimum(x, val)", dx="where(x < val, dy, 0.0)")
elementwise("MaximumScalar", "maximum(x, val)", dx="where(x > val, dy, 0.0)")

elementwise("LogicalAnd", "where(x0 != 0 and x1 != 0, 1.0, 0.0)")
elementwise("LogicalOr", "where(x0 != 0 or x1 != 0, 1.0, 0.0)")
elementwise("LogicalXor", "where((x0 != 0) != (x1 != 0), 1.0, 0.0)")
elementwise("Equal", "where(x0 == x1, 1.0, 0.0)")
elementwise("NotEqual", "where(x0 != x1, 1.0, 0.0)")
elementwise("GreaterEqual", "where(x0 >= x1, 1.0, 0.0)")
elementwise("Greater", "where(x0 > x1, 1.0, 0.0)")
elementwise("LessEqual", "where(x0 <= x1, 1.0, 0.0)")
elementwise("Less", "where(x0 < x1, 1.0, 0.0)")
elementwise("LogicalAndScalar", "where(x != 0 and val, 1.0, 0.0)")
elementwise("LogicalOrScalar", "where(x != 0 or val, 1.0, 0.0)")
elementwise("LogicalXorScalar", "where((x != 0) != val, 1.0, 0.0)")
elementwise("EqualScalar", "where(x == val, 1.0, 0.0)")
elementwise("NotEqualScalar", "where(x != val, 1.0, 0.0)")
elementwise("GreaterEqualScalar", "where(x >= val, 1.0, 0.0)")
elementwise("GreaterScalar", "where(x > val, 1.0, 0.0)")
elementwise("LessEqualScalar", "where(x <= val, 1.0, 0.0)")
elementwise("LessScalar", "where(x < val, 1.0, 0.0)")
elementwise("LogicalNot", "where(x == 0, 1.0, 0.0)")
elementwise("IsNaN", "where(isnan(x), 1.0, 0.0)")
elementwise("IsInf", "where(isinf(x), 1.0, 0.0)")
elementwise("ResetNaN", "where(isnan(x), val, x)", dx="where(isnan(x), 0.0, dy)")
elementwise("ResetInf", "where(isinf(x), val, x)", dx="where(isinf(x), 0.0, dy)")
elementwise("Where", "where(x0 != 0, x1, x2)", dx1="where(ne(x0, 0), dy, 0.0)",
            dx2="where(ne(x0, 0), 0.0, dy)")
