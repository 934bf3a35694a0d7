import sys
import numpy as np
if sys.argv[1] == "nnabla":
    import nnabla as nn, nnabla.functions as F, nnabla.parametric_functions as PF
else:
    import nnabla_jit as nn, nnabla_jit.functions as F, nnabla_jit.parametric_functions as PF
x = nn.Variable((2, 3, 4, 4), need_grad=True)
c = PF.convolution(x, 3, (3, 3), pad=(1, 1), with_bias=False)
b = PF.batch_normalization(c)
r = F.relu(b)
a = F.add2(r, x)
p = F.max_pooling(a, (2, 2))
g = F.global_average_pooling(p)
for v in (c, b, r, a, p, g):
    f = v.parent
    n = len(f.inputs)
    print(f.info.type_name if hasattr(f, "info") else f.name,
          [[int(f.grad_depends_input_data(i, j)) for j in range(n)] for i in range(n)],
          [int(f.grad_depends_output_data(i, 0)) for i in range(n)])
