"""Train a small Transformer encoder to reverse sequences of tokens (no download).

    python examples/transformer/train.py [--steps 300] [--length 8] [--target 0.1]

Each example is a sequence of ``--length`` random tokens from a vocabulary of ``--vocab``; the
network must output, at every position i, the token at position length-1-i. Nothing but the
positions tells it where to look, so the task is solved by attention: token and position
embeddings go through encoder blocks written out below on ``F.multi_head_attention`` (self-
attention), ``PF.layer_normalization`` and ``PF.affine`` (the feed-forward part), then a linear
read-out. Guessing scores a cross-entropy of log(vocab), about 2.08 for 8 tokens; the script
shows a progress bar, prints the final losses and accuracy on held-out sequences, and exits
with 1 if the held-out cross-entropy is above ``--target`` (0.1 by default).
"""
import argparse
import sys

import numpy as np
from tqdm import tqdm

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.kernel_cache import compile_status
from nnabla_jit.parameter import get_parameter_or_create
from nnabla_jit.initializer import ConstantInitializer, UniformInitializer, calc_uniform_lim_glorot


def linear_params(n_in, n_out, name):
    """A Glorot-uniform (n_in, n_out) weight and a zero bias, registered under ``name``."""
    init = UniformInitializer(calc_uniform_lim_glorot(n_in, n_out))
    return (get_parameter_or_create(name + "_weight", (n_in, n_out), init),
            get_parameter_or_create(name + "_bias", (n_out,), ConstantInitializer(0)))


def encoder_block(x, num_heads, name):
    """Post-norm Transformer encoder block on x (L, B, E): self-attention, then a ReLU
    feed-forward, each followed by a residual connection and layer normalization."""
    embed = x.shape[2]
    with nn.parameter_scope(name):
        qw, qb = linear_params(embed, embed, "q")
        kw, kb = linear_params(embed, embed, "k")
        vw, vb = linear_params(embed, embed, "v")
        ow, ob = linear_params(embed, embed, "out")
        attn, _ = F.multi_head_attention(x, x, x, num_heads, qw, kw, vw, ow, qb, kb, vb, ob)
        x = PF.layer_normalization(x + attn, batch_axis=(0, 1), name="norm1")
        hidden = F.relu(PF.affine(x, 2 * embed, base_axis=2, name="ff1"))
        x = PF.layer_normalization(x + PF.affine(hidden, embed, base_axis=2, name="ff2"),
                                   batch_axis=(0, 1), name="norm2")
    return x


def model(tokens, vocab, embed, num_heads, num_blocks):
    """tokens (L, B) integer ids -> logits (L, B, vocab)."""
    length = tokens.shape[0]
    x = PF.embed(tokens, vocab, embed, name="token_embed")
    positions = nn.Variable.from_numpy_array(np.arange(length)[:, None])
    x = x + PF.embed(positions, length, embed, name="position_embed")   # (L, 1, E) broadcast
    for i in range(num_blocks):
        x = encoder_block(x, num_heads, "block{}".format(i))
    return PF.affine(x, vocab, base_axis=2, name="readout")


def reversal_batch(rng, batch_size, length, vocab):
    tokens = rng.randint(0, vocab, (length, batch_size))
    return tokens, tokens[::-1].copy()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--length", type=int, default=8, help="sequence length")
    parser.add_argument("--vocab", type=int, default=8)
    parser.add_argument("--embed", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.1, help="fail above this test cross-entropy")
    args = parser.parse_args(argv)

    nn.random.seed(args.seed)
    rng = np.random.RandomState(args.seed)

    def graph(batch_size):
        tokens = nn.Variable((args.length, batch_size))
        labels = nn.Variable((args.length, batch_size, 1))
        logits = model(tokens, args.vocab, args.embed, args.heads, args.blocks)
        loss = F.mean(F.softmax_cross_entropy(logits, labels, axis=2))
        return tokens, labels, logits, loss

    tokens, labels, _, loss = graph(args.batch_size)
    solver = S.Adam(args.lr)
    solver.set_parameters(nn.get_parameters())
    with tqdm(range(args.steps), desc="training", unit="step") as bar, compile_status(bar):
        for i in bar:
            tokens.d, target = reversal_batch(rng, args.batch_size, args.length, args.vocab)
            labels.d = target[..., None]
            loss.forward(clear_no_need_grad=True)
            solver.zero_grad()
            loss.backward(clear_buffer=True)
            solver.update()
            if i % 10 == 0:
                bar.set_postfix(loss="{:.4f}".format(float(loss.d)))

    test_tokens, test_labels, test_logits, test_loss = graph(256)
    test_tokens.d, target = reversal_batch(np.random.RandomState(args.seed + 1), 256, args.length, args.vocab)
    test_labels.d = target[..., None]
    test_loss.forward()
    accuracy = float((test_logits.d.argmax(axis=2) == target).mean())
    ce = float(test_loss.d)
    print("final training cross-entropy: {:.4f}".format(float(loss.d)))
    print("test cross-entropy: {:.4f}, token accuracy: {:.4f} (guessing: {:.2f}; target {})".format(
        ce, accuracy, np.log(args.vocab), args.target))
    if not ce <= args.target:
        print("test cross-entropy above the target {}".format(args.target), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
