"""F.multi_head_attention against a NumPy reference and nnabla 1.39's numbers; gradients (first
and second order); PF.multi_head_attention and the PF transformer layers' parameters."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.testing import check_function

NAMES = ["q", "k", "v", "qw", "kw", "vw", "ow", "qb", "kb", "vb", "ob", "abk", "abv", "am", "kpm"]


def reference(q, k, v, num_heads, qw, kw, vw, ow, qb=None, kb=None, vb=None, ob=None, abk=None,
              abv=None, am=None, kpm=None):
    tgt_len, batch = q.shape[:2]
    embed, v_embed = qw.shape[1], vw.shape[1]

    def proj(x, w, b):
        return x @ w + (0 if b is None else b)

    query = proj(q, qw, qb) / np.sqrt(embed // num_heads)
    key, value = proj(k, kw, kb), proj(v, vw, vb)
    if abk is not None:
        key = np.concatenate([key, np.broadcast_to(abk.reshape(1, 1, embed), (1, batch, embed))])
        value = np.concatenate([value, np.broadcast_to(abv.reshape(1, 1, v_embed), (1, batch, v_embed))])
        am = None if am is None else np.pad(am, ((0, 0), (0, 1)))
        kpm = None if kpm is None else np.pad(kpm, ((0, 0), (0, 1)))
    src_len = key.shape[0]

    def heads(x):   # (L, B, H*d) -> (B*H, L, d)
        return x.reshape(x.shape[0], batch * num_heads, -1).transpose(1, 0, 2)

    logits = heads(query) @ heads(key).transpose(0, 2, 1)
    if am is not None:
        logits = logits + am
    if kpm is not None:
        logits = logits.reshape(batch, num_heads, tgt_len, src_len)
        logits = np.where(kpm[:, None, None, :] != 0, -np.inf, logits).reshape(-1, tgt_len, src_len)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ heads(value)).transpose(1, 0, 2).reshape(tgt_len, batch, v_embed)
    return proj(out, ow, ob), weights


def make_case(tgt_len, src_len, batch, num_heads, head_dim, head_vdim, with_bias, attn_bias,
              additive, padding, seed, d_q=3, d_k=2, d_v=2, out_dim=2):
    rng = np.random.RandomState(seed)
    embed, v_embed = num_heads * head_dim, num_heads * head_vdim
    u = lambda *s: rng.uniform(-1, 1, s)   # noqa: E731
    arrays = dict(q=u(tgt_len, batch, d_q), k=u(src_len, batch, d_k), v=u(src_len, batch, d_v),
                  qw=u(d_q, embed), kw=u(d_k, embed), vw=u(d_v, v_embed), ow=u(v_embed, out_dim))
    if with_bias:
        arrays.update(qb=u(embed), kb=u(embed), vb=u(v_embed), ob=u(out_dim))
    if attn_bias:
        arrays.update(abk=u(1, 1, embed), abv=u(1, 1, v_embed))
    if additive:
        arrays["am"] = u(tgt_len, src_len)
    if padding:   # mask the last key of the first sequence (never a whole row)
        kpm = np.zeros((batch, src_len))
        kpm[0, -1] = 1 if src_len > 1 or attn_bias else 0
        arrays["kpm"] = kpm
    return arrays


def as_call(arrays, num_heads):
    """(fn, reference, input list, indices of the differentiable inputs) for check_function."""
    names = [n for n in NAMES if n in arrays]

    def bind(values):
        given = dict(zip(names, values))
        return given, [given.get(n) for n in NAMES[3:13]]

    def fn(*vs):
        g, rest = bind(vs)
        return F.multi_head_attention(g["q"], g["k"], g["v"], num_heads, *rest[:4], *rest[4:10],
                                      additive_mask=g.get("am"), key_padding_mask=g.get("kpm"))

    def ref(*arrs):
        g, _ = bind(arrs)
        return reference(num_heads=num_heads, **g)

    return fn, ref, [arrays[n] for n in names], [i for i, n in enumerate(names) if n != "kpm"]


cases = st.fixed_dictionaries(dict(
    tgt_len=st.integers(1, 2), src_len=st.integers(1, 3), batch=st.integers(1, 2),
    num_heads=st.integers(1, 2), head_dim=st.integers(1, 2), head_vdim=st.integers(1, 2),
    with_bias=st.booleans(), attn_bias=st.booleans(), additive=st.booleans(),
    padding=st.booleans(), seed=st.integers(0, 2 ** 16)))


@given(cases)
def test_forward_backward_and_grad_rule(case):
    fn, ref, inputs, wrt = as_call(make_case(**case), case["num_heads"])
    check_function(fn, inputs, ref, wrt=wrt, double_backward=False)


def test_double_backward():
    arrays = make_case(2, 2, 1, 2, 1, 1, True, True, True, True, seed=4, d_q=1, d_k=1, d_v=1,
                       out_dim=1)
    fn, _, inputs, wrt = as_call(arrays, 2)
    check_function(fn, inputs, wrt=wrt, backward=False, grad_rule=False)


def pinned(shape, offset):
    n = int(np.prod(shape))
    return (0.5 * np.sin(np.arange(n) * 1.3 + offset)).reshape(shape).astype(np.float32)


def test_matches_nnabla_numbers():
    """nnabla 1.39's outputs for these inputs (all options on, two heads)."""
    v = nn.Variable.from_numpy_array
    shapes = [(2, 1, 3), (3, 1, 3), (3, 1, 2), (3, 4), (3, 4), (2, 4), (4, 3), (4,), (4,), (4,),
              (3,), (1, 1, 4), (1, 1, 4), (2, 3)]
    args = [v(pinned(s, i)) for i, s in enumerate(shapes)]
    y, w = F.multi_head_attention(*args[:3], 2, *args[3:13], 0.0, additive_mask=args[13],
                                  key_padding_mask=v(np.array([[0, 1, 0]], np.float32)))
    nn.forward_all([y, w])
    np.testing.assert_allclose(y.d.reshape(-1), [-0.328067, -0.387585, 0.12071, -0.297914,
                                                 -0.397194, 0.085416], atol=2e-6)
    np.testing.assert_allclose(w.d.reshape(-1), [
        0.39702, 0, 0.364181, 0.238799, 0.196221, 0, 0.493062, 0.310718, 0.413633, 0, 0.356229,
        0.230138, 0.198258, 0, 0.481975, 0.319767], atol=2e-6)


def test_dropout_scales_kept_weights():
    arrays = make_case(2, 3, 2, 2, 2, 2, True, False, False, False, seed=0)
    xs = {n: nn.Variable.from_numpy_array(a) for n, a in arrays.items()}
    args = [xs[n] for n in ("q", "k", "v")] + [2] + [xs[n] for n in ("qw", "kw", "vw", "ow", "qb", "kb", "vb", "ob")]
    _, plain = F.multi_head_attention(*args)
    _, dropped = F.multi_head_attention(*args, None, None, 0.5)
    nn.forward_all([plain, dropped])
    kept = dropped.d != 0
    assert kept.any() and not kept.all()
    np.testing.assert_allclose(dropped.d[kept], 2 * plain.d[kept], rtol=1e-6)


def test_bad_shapes_raise():
    q, k = nn.Variable((2, 1, 3)), nn.Variable((3, 1, 3))
    w = nn.Variable((3, 4))
    with pytest.raises(ValueError, match="divisible by num_heads=3"):
        F.multi_head_attention(q, k, k, 3, w, w, w, nn.Variable((4, 4)))
    with pytest.raises(ValueError, match="key_padding_mask of shape"):
        F.multi_head_attention(q, k, k, 2, w, w, w, nn.Variable((4, 4)),
                               key_padding_mask=nn.Variable((1, 2)))


# ------------------------------------------------------------------------------ PF
def test_pf_multi_head_attention_parameters():
    q = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(2, 3, 4).astype(np.float32))
    kv = nn.Variable.from_numpy_array(np.random.RandomState(1).randn(5, 3, 6).astype(np.float32))
    y, w = PF.multi_head_attention(q, kv, kv, num_heads=2, v_embed_dim=8, out_dim=2,
                                   add_attn_bias=True, name="attn")
    nn.forward_all([y, w])
    assert y.shape == (2, 3, 2) and w.shape == (6, 2, 6)
    shapes = {k: v.shape for k, v in nn.get_parameters().items()}
    scope = "attn/multi_head_attention/"
    assert shapes == {scope + "q_weight": (4, 4), scope + "k_weight": (6, 4),
                      scope + "v_weight": (6, 8), scope + "out_weight": (8, 2),
                      scope + "q_bias": (4,), scope + "k_bias": (4,), scope + "v_bias": (8,),
                      scope + "out_bias": (2,), scope + "attn_bias_k": (1, 1, 4),
                      scope + "attn_bias_v": (1, 1, 8)}
    params = {k[len(scope):]: p.d for k, p in nn.get_parameters().items()}
    want_y, want_w = reference(q.d, kv.d, kv.d, 2, params["q_weight"], params["k_weight"],
                               params["v_weight"], params["out_weight"], params["q_bias"],
                               params["k_bias"], params["v_bias"], params["out_bias"],
                               params["attn_bias_k"], params["attn_bias_v"])
    np.testing.assert_allclose(y.d, want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.d, want_w, rtol=1e-4, atol=1e-5)


def test_pf_transformer_parameters_and_gradients():
    """Parameter names and shapes as nnabla's PF.transformer creates them; every parameter
    receives a gradient."""
    rng = np.random.RandomState(0)
    src = nn.Variable.from_numpy_array(rng.randn(5, 2, 4).astype(np.float32))
    tgt = nn.Variable.from_numpy_array(rng.randn(3, 2, 4).astype(np.float32))
    out = PF.transformer(src, tgt, embed_dim=4, num_heads=2, num_encoder_layers=1,
                         num_decoder_layers=1, dim_feedforward=6, dropout=0.0)
    assert out.shape == (3, 2, 4)
    params = nn.get_parameters()
    attn = ["q_weight", "k_weight", "v_weight", "out_weight", "q_bias", "k_bias", "v_bias", "out_bias"]
    norm = ["layer_normalization/beta", "layer_normalization/gamma"]
    enc = "transformer/encoder00/transformer_encode/"
    dec = "transformer/decoder00/transformer_decode/"
    want = ([enc + "src_self_attn/multi_head_attention/" + n for n in attn]
            + [enc + "enc_layer_norm1/" + n for n in norm]
            + [enc + "enc_affine1/affine/W", enc + "enc_affine1/affine/b",
               enc + "enc_affine2/affine/W", enc + "enc_affine2/affine/b"]
            + [enc + "enc_layer_norm2/" + n for n in norm]
            + [dec + "tgt_self_attn/multi_head_attention/" + n for n in attn]
            + [dec + "dec_layer_norm1/" + n for n in norm]
            + [dec + "tgt_memory_attn/multi_head_attention/" + n for n in attn]
            + [dec + "dec_layer_norm2/" + n for n in norm]
            + [dec + "dec_affine1/affine/W", dec + "dec_affine1/affine/b",
               dec + "dec_affine2/affine/W", dec + "dec_affine2/affine/b"]
            + [dec + "dec_layer_norm3/" + n for n in norm])
    assert list(params) == want
    assert params[enc + "enc_affine1/affine/W"].shape == (4, 6)
    assert params[dec + "dec_layer_norm3/layer_normalization/gamma"].shape == (1, 1, 4)
    loss = F.sum(out * nn.Variable.from_numpy_array(rng.randn(3, 2, 4).astype(np.float32)))
    for p in params.values():
        p.grad.zero()
    loss.forward()
    loss.backward()
    assert all(np.abs(p.g).max() > 0 for p in params.values())


def test_pf_transformer_encode_matches_its_parts():
    """transformer_encode = LN(x + FF(LN(x + attention(x)))) with the layers it registered."""
    rng = np.random.RandomState(0)
    src = nn.Variable.from_numpy_array(rng.randn(4, 2, 4).astype(np.float32))
    out = PF.transformer_encode(src, 4, 2, dim_feedforward=5, dropout=0.0)
    out.forward()
    p = {k[len("transformer_encode/"):]: v.d for k, v in nn.get_parameters().items()}
    a = "src_self_attn/multi_head_attention/"
    attn, _ = reference(src.d, src.d, src.d, 2, *[p[a + n] for n in (
        "q_weight", "k_weight", "v_weight", "out_weight", "q_bias", "k_bias", "v_bias", "out_bias")])

    def norm(x, name):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        base = name + "/layer_normalization/"
        return (x - mu) / np.sqrt(var + 1e-5) * p[base + "gamma"] + p[base + "beta"]

    x = norm(src.d + attn, "enc_layer_norm1")
    ff = np.maximum(x @ p["enc_affine1/affine/W"] + p["enc_affine1/affine/b"], 0)
    ff = ff @ p["enc_affine2/affine/W"] + p["enc_affine2/affine/b"]
    np.testing.assert_allclose(out.d, norm(x + ff, "enc_layer_norm2"), rtol=1e-4, atol=1e-4)
