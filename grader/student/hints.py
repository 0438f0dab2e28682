"""`hints` holds the progressive hints of every exercise: the idea first, the shape of a line last.

Each hint is Markdown. Level 1 says what the exercise is about and why; each later level is more
concrete; the last one shows the shape of the one or two lines that matter most, never a whole
function (a kit test checks that no hint contains a function body of the reference solutions).
Each hint is a catalog message (marked with `N_`, shown through `tr`): its Chinese is in grader.po, with
the same code spans and code blocks, byte for byte.
"""

from __future__ import annotations

from grader.lang import N_

HINTS: dict[str, tuple[str, ...]] = {
    "attention": (
        N_("""\
Attention is a **weighted average**. Each query is compared with every key by a dot product, which
is large when the two vectors point the same way. Softmax over the keys turns one query's row of
scores into weights that are ≥ 0 and sum to 1, and the query's output is the same weighted sum of
the value vectors.

Before the softmax the scores are divided by √d_k. If the d_k components of a query and a key are
independent with mean 0 and variance 1, their dot product is a sum of d_k products of variance 1,
so its variance is d_k. At d_k = 512 the scores have a standard deviation of about 23; softmax of
numbers that far apart is almost one-hot, its gradient is almost 0, and learning stalls. Dividing by √d_k brings the
variance back to 1 whatever the width."""),
        N_("""\
Follow the shapes. `query` is `(..., L_q, d_k)` and `key` is `(..., L_k, d_k)`: transpose only the
**last two** dims of the key, and the product is one score per (query, key) pair, `(..., L_q, L_k)`.

- `key.T` reverses *every* dim of a batched tensor; `key.transpose(-2, -1)` leaves the leading dims
  (batch, heads) where they are.
- d_k is the width of the vectors in each dot product: `query.size(-1)`.
- Softmax runs over the keys, the **last** dim (`dim=-1`), so that each query's row sums to 1.
- Multiplying the weights `(..., L_q, L_k)` by `value` `(..., L_k, d_v)` gives `(..., L_q, d_v)`."""),
        N_("""\
The mask is a **keep** mask: nonzero means "this query may look at this key", 0 means blocked.
Blocked scores must become -inf *before* the softmax: exp(-inf) = 0, so their weights come out
exactly 0 and every row still sums to 1. Zeroing weights after the softmax is too late: the row
no longer sums to 1.

Dropout, when given, acts on the weights after the softmax. Return the weights you actually used:
the `p_attn` you multiply by `value` is the one after dropout."""),
        N_("""\
The two lines that matter, in this order:

```python
scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., L_q, L_k)
# only when a mask is given:
scores = scores.masked_fill(mask == 0, float("-inf"))  # (..., L_q, L_k)
```

Then softmax over `dim=-1`, dropout when given, and return the output and the weights.
Check yourself on the course notes' 5-token example with `grader show attention`."""),
    ),
    "masking": (
        N_("""\
**Causal** means position t may use positions 0..t, never the future. The simplest way to mix
the past is to average it: `out[:, t] = x[:, :t+1].mean(dim=1)`. The same average is a matrix
product: row t of a (T, T) weight matrix holds 1/(t+1) in columns 0..t and 0 after them, so all
positions at once are `weights @ x`. The lower triangle (with its diagonal) is "the past and the
present".

Attention does the same with weights learnt from queries and keys; this exercise builds the
masks it uses."""),
        N_("""\
There are two ways to write the same causal mask, and the kit uses both:

- a **keep** mask of ones and zeros, 1 on and below the diagonal (may attend), used as
  `scores.masked_fill(keep == 0, float("-inf"))`;
- an **additive** mask of 0 (may attend) and -inf (blocked), used as `scores + mask`.

Either way a blocked score becomes -inf and its weight after the softmax is exactly 0.
`create_look_ahead_mask` returns the first kind and `causal_mask` the second, both shaped
`(1, 1, L, L)` so that they broadcast over the batch and the heads."""),
        N_("""\
- `causal_average`: build the (T, T) weights without a loop (the grader counts your operations):
  `torch.tril` of ones, each row divided by its sum, or zeros masked with -inf and a softmax, as in
  the lab's version 3. Make them with `dtype=x.dtype, device=x.device`. `(T, T) @ (B, T, C)`
  broadcasts to `(B, T, C)`. Never write into `x`: later rows would average rows already averaged.
- `weight_mask_and_normalization`: the scores may have leading dims `(..., T, T)`, so take the
  softmax over `dim=-1`, not `dim=1`.
- `causal_mask`: `torch.triu(..., diagonal=1)` keeps the strict upper triangle and sets the rest,
  the diagonal included, to 0."""),
        N_("""\
The shapes of the key lines:

```python
# tril: (T, T), ones on and below the diagonal
weight = weight.masked_fill(tril == 0, float("-inf"))  # (..., T, T)
# then keep only the strict upper triangle of:
mask = torch.full((1, 1, seq_len, seq_len), float("-inf"))
```

For the look-ahead mask, take the lower triangle of a `(seq_len, seq_len)` ones matrix and
`.view(1, 1, seq_len, seq_len)` it."""),
    ),
    "head_attention": (
        N_("""\
One head of self-attention. Every token is projected three times: a **query** ("what am I looking
for?"), a **key** ("what do I contain?") and a **value** ("what I pass on if chosen"), each by its
own `nn.Linear(n_embd, head_size, bias=False)`. Token t scores every token s by query_t · key_s,
softmax turns the scores into weights, and the output of t is the weighted sum of the values.

It is causal: the lower-triangular matrix of ones from the masking lab says who may look at
whom, and scores where it is 0 become -inf. Scale by √head_size, the width where the dot products
happen, not by √n_embd."""),
        N_("""\
The `tril` matrix never changes and must not be trained, so make it a **buffer**, not a parameter
and not a plain attribute:

- `self.register_buffer("tril", ...)` follows the module through `.to(device)` and `.double()`
  and is saved in `state_dict`, but the optimiser never touches it;
- an `nn.Parameter` would be trained (and the grader would find a parameter too many);
- a plain tensor attribute would stay on the CPU in float32 when the module moves.

Build it once for the longest sequence, `(block_size, block_size)`. A batch may be shorter: use
its top-left corner, `self.tril[:T, :T]`."""),
        N_("""\
The order of `forward`, with the shapes:

1. `k`, `q`, `v` from the three projections, each `(B, T, head_size)`;
2. scores `q @ k.transpose(-2, -1)` divided by √head_size: `(B, T, T)`;
3. the future blocked with -inf, then softmax over the keys (`dim=-1`);
4. dropout on these **weights** (not on the output), then the weights times `v`: `(B, T, head_size)`."""),
        N_("""\
The two lines most people get wrong:

```python
# in __init__: (block_size, block_size)
self.register_buffer(
    "tril", torch.tril(torch.ones(block_size, block_size)))
# in forward:
wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
```"""),
    ),
    "multi_head_attention": (
        N_("""\
One head looks for one kind of relation between tokens; n_heads heads look for n_heads kinds.
Each head works in its own slice of `head_dim = dim // n_heads` features, so `dim` must divide
evenly (raise a `ValueError` that says so when it does not). The heads' outputs are put side by
side, `(B, T, dim)` again, and mixed by one more linear layer, `wo`.

Instead of n_heads small projections, use one fused `nn.Linear(dim, dim)` per role and split its
output: multiplying by the stacked weights and then splitting is the same as n_heads small
products. Head h owns output features `[h*head_dim, (h+1)*head_dim)`."""),
        N_("""\
Splitting the heads is **view, then transpose**:

- `self.wq(q)` is `(B, T, dim)`; `.view(B, T, n_heads, head_dim)` cuts each token's features into
  the heads' slices; `.transpose(1, 2)` makes it `(B, n_heads, T, head_dim)`, one `(T, head_dim)`
  matrix per head.
- A direct `.view(B, n_heads, T, head_dim)` has the right shape and the wrong contents: view deals
  the numbers out in memory order, so one "head" would get pieces of several tokens.
- Merging goes back the same way: `.transpose(1, 2)`, then `.contiguous()` (transpose only changes
  how memory is read, and view needs it laid out in order), then `.view(B, T, dim)`."""),
        N_("""\
Masks and the rest:

- Scale by √head_dim, the width of each head's dot products, not √dim.
- Causal: register the buffer `mask` = your `causal_mask(args.max_seq_len)` (0 and -inf) and **add**
  its corner `self.mask[:, :, :T_q, :T_k]` to the scores.
- The optional `mask` argument is a **keep** mask (0 = blocked): `masked_fill` with -inf, on top
  of the causal one when both apply.
- Cross-attention: T_k comes from `k`, and may differ from T_q.
- Two dropouts: `attn_dropout` on the weights, `resid_dropout` on the output of `wo`."""),
        N_("""\
The shape of the split and of the merge:

```python
# (B, T_q, dim) -> (B, T_q, nh, hd) -> (B, nh, T_q, hd)
xq = self.wq(q).view(B, T_q, self.n_heads, self.head_dim).transpose(1, 2)
# (B, nh, T_q, hd) -> (B, T_q, nh, hd) -> (B, T_q, dim)
out = out.transpose(1, 2).contiguous().view(B, T_q, -1)
```

The same split for `xk` and `xv`, with T_k."""),
    ),
    "positional_encoding": (
        N_("""\
Attention on its own ignores order: shuffle the tokens and the outputs are shuffled the same way.
So each position p gets a fixed vector added to its embedding: sines in the even columns, cosines
in the odd ones, each column pair turning at its own frequency, from one radian per position down
to very slow. Sin and cos are bounded (they never swamp the embedding), give every position its
own vector, and shifting by k positions is the same rotation for every p, so "k tokens back" is
something a layer can learn once."""),
        N_("""\
The table never changes, so compute it once in `__init__` and store it as a **buffer**:
`self.register_buffer("pe", ...)`. Like the course notes' pitfall says, a positional table made an
`nn.Parameter` would be trained, which is not what this encoding is; a buffer follows the module
through `.to(device)` and is saved in `state_dict`, but the optimiser never changes it.

Give it the shape `(1, max_len, d_model)`: the leading 1 broadcasts over the batch."""),
        N_("""\
Build it with broadcasting, no loops:

- `position`: a column `(max_len, 1)` of 0, 1, ..., max_len - 1;
- the frequencies 1 / 10000^(2i / d_model), one per column pair, a row `(d_model / 2,)`; written as
  `exp(-(2i) * ln(10000) / d_model)` it avoids huge powers;
- `position * frequencies` is the `(max_len, d_model / 2)` table of angles: its sin goes into the
  even columns `0::2`, its cos into the odd columns `1::2`.

In `forward`, add the first T rows, `self.pe[:, :T]`, then apply dropout to the sum."""),
        N_("""\
The shape of the two key lines:

```python
# 1 / 10000^(2i / d_model), shape (d_model/2,)
div_term = torch.exp(
    torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
pe[:, 0::2] = torch.sin(position * div_term)  # (max_len, d_model/2)
```"""),
    ),
    "sublayers": (
        N_("""\
Two pieces every Transformer layer wraps around attention. Attention mixes information *between*
positions; the **feed-forward** then transforms each position on its own, the same small MLP for
every token. The **residual connection** adds a sublayer's output to its input, x + correction: the
gradient reaches x unchanged through the `+`, so deep stacks train, and a sublayer that returns 0
leaves x exactly as it was."""),
        N_("""\
`FeedForward`: `w1` widens each token from d_model to d_ff, ReLU, dropout on those hidden
activations, then `w2` back to d_model; both layers have a bias. `nn.Linear` acts on the last dim,
so `(B, T, d_model)` goes in and comes out with no reshaping."""),
        N_("""\
`ResidualConnection` is **pre-norm**: the LayerNorm normalises the sublayer's *input*, and the
residual path x itself is never normalised on its way through. (The original paper put the norm
after the addition, norm(x + sublayer(x)); the course notes mix up the two names, but their code,
and this kit, normalise first.)

- Add `x` itself, not `norm(x)`.
- Dropout acts on the sublayer's output, before the addition.
- `sublayer` is any callable, a module or a lambda: just call it."""),
        N_("""\
The shapes, step by step:

```python
h = torch.relu(self.w1(x))  # (..., d_ff); then dropout, then w2
y = sublayer(self.norm(x))  # (..., d_model), from normalised features
```

What the residual returns is `x` plus `y` after dropout."""),
    ),
    "encoder": (
        N_("""\
An encoder layer is self-attention, then the feed-forward, each wrapped in its own pre-norm
residual connection. It is **not** causal: the whole source sentence is known, so each word may
look at the words before and after it. The only mask is for padding: a keep mask `(B, 1, 1, T)`,
True for real tokens, broadcast over the heads and the queries.

The encoder is a stack of such layers, then one last LayerNorm: in a pre-norm stack the residual
path is never normalised, so its scale grows layer after layer."""),
        N_("""\
Each layer needs its **own** weights: build n_layers separate `EncoderLayer` objects in an
`nn.ModuleList`. `[layer] * n_layers` repeats one object n times, so every "layer" would share the
same weights. Likewise each layer has two `ResidualConnection`s, each with its own LayerNorm.

The self-attention is `MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout),
is_causal=False)`."""),
        N_("""\
A residual connection calls its sublayer with one argument, but attention takes q, k, v and a
mask. Wrap it in a `lambda` of one argument `y` (the normalised x): self-attention takes q, k and v
all from that same `y`, and the padding mask goes along.

`Encoder.forward` runs x through every layer in order, each with the same mask, and applies the
final norm once, after the last layer."""),
        N_("""\
The shape of the two lines that matter:

```python
# n_layers distinct layers, each with its own weights:
self.layers = nn.ModuleList(EncoderLayer(...) for _ in range(n_layers))
# (B, T, d_model):
x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask))
```"""),
    ),
    "decoder": (
        N_("""\
A decoder layer has **three** sublayers, each in its own pre-norm residual connection:

1. causal self-attention over the target so far: in training the whole target goes in at once
   (teacher forcing), so position t must not peek at the tokens it is supposed to predict;
2. cross-attention: queries from the decoder, keys and values from `memory`, the encoder's output.
   This is where the target reads the source;
3. the position-wise feed-forward."""),
        N_("""\
Which mask goes where:

- `self_attn` is built with `is_causal=True`: it adds the look-ahead mask itself. Pass
  `max_seq_len` in its `ModelArgs` so that its causal buffer is long enough.
- `tgt_mask` is an *extra* keep mask for the self-attention (the target's padding).
- `src_mask` is the encoder's padding mask: it belongs to the **cross**-attention, which is not
  causal because the source is known entirely."""),
        N_("""\
In cross-attention T_tgt and T_src may differ: the scores are `(B, n_heads, T_tgt, T_src)` and the
output has the decoder's length, `(B, T_tgt, d_model)`. Every layer of the stack reads the same
`memory` and the same masks; the stack ends with one LayerNorm, as the encoder does. Build
n_layers distinct `DecoderLayer`s in an `nn.ModuleList`."""),
        N_("""\
The shape of the cross-attention step:

```python
# (B, T_tgt, d_model): the decoder's length, whatever T_src is
x = self.residual2(
    x, lambda y: self.cross_attn(y, memory, memory, src_mask))
```

Queries from `y`, the normalised decoder state; keys and values from `memory`, as it is."""),
    ),
    "transformer": (
        N_("""\
The whole model: token ids go through an embedding and the positional encoding into the encoder,
which turns the source into `memory`; the decoder reads the target so far and the memory; the
`generator`, a linear layer, turns each position's features into one logit per target token (no
softmax: cross-entropy and argmax both take raw logits). Training feeds the whole shifted target
at once; generating has no target, so it decodes one token at a time."""),
        N_("""\
Multiply the embeddings by √d_model. The positional encoding has values in [-1, 1]; start the
embedding tables small, std 1/√d_model (`nn.init.normal_`), and times √d_model they have std 1,
the same size as the positions, so neither drowns the other. One `pos` serves both sides:
position p means the same thing in the source and the target. Keep `d_model` on `self`.

If it does not learn, debug as the course notes suggest: a small model first (2 layers, 128 wide,
4 heads), print your masks, and look at the attention weights."""),
        N_("""\
`greedy_decode`, under `torch.no_grad()`:

1. encode the source **once**;
2. start `ys` as a `(B, 1)` column of `start_symbol`, `dtype=torch.long`, on `src.device`;
3. max_len - 1 times: decode `ys`, keep the logits of the **last** position only, append their
   argmax as a new column;
4. return `ys`, `(B, max_len)`."""),
        N_("""\
The shape of the two key lines:

```python
x = self.src_embed(src) * math.sqrt(self.d_model)  # (B, T_src, d_model)
# in greedy_decode, out: (B, t, d_model) -> next_token: (B, 1)
next_token = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)
```"""),
    ),
    "rope": (
        N_("""\
RoPE gives attention its positions by **rotating** queries and keys instead of adding a vector to
the embeddings. Cut each head's features into pairs (2i, 2i+1): each pair is a point in the plane,
turned by the angle p * base^(-2i / head_dim) of its token's position p. A rotation keeps lengths,
and the dot product of a query turned by m * f and a key turned by n * f is the dot product of the
originals with one of them turned by (n - m) * f: the score depends on the distance m - n only."""),
        N_("""\
Three pieces, each small:

- `rope_tables`: the angles are an outer product, positions `(max_seq_len,)` times frequencies
  `(head_dim // 2,)`; return their cos and sin, float32, `(max_seq_len, head_dim // 2)` each.
- `apply_rope`: take the rows of the tables for the positions (`cos[:T]`, or `cos[positions]`),
  `(T, head_dim // 2)`, which broadcast over every leading dim of `x`.
- `RotaryEmbedding`: register the two tables as buffers, and rotate q and k alike in `forward`."""),
        N_("""\
The pairing is **adjacent** features: `x[..., 0::2]` and `x[..., 1::2]`, put back in place with
`torch.stack((even, odd), dim=-1).flatten(-2)`. Splitting `x` into its two halves is Hugging Face's
`rotate_half` convention, a different model: it loses points here. Meta's llama writes the same
rotation with complex numbers (`torch.view_as_complex` on `x.reshape(..., -1, 2)`, times
`torch.complex(cos, sin)`), which is welcome. Keep `x`'s dtype: `cos.to(x.dtype)`."""),
        N_("""\
The shape of the key lines:

```python
angles = torch.outer(positions, base ** (-torch.arange(0, head_dim, 2) / head_dim))
even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, head_dim // 2)
out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
```"""),
    ),
    "kv_cache": (
        N_("""\
In causal attention a past token never changes: its key and value depend on itself and its
position only, and it never looks ahead. So when a model writes one token per step, keep the keys
and values already computed (the **KV cache**) and compute only the new token's query, key and
value. Its output row reads exactly what it would read in one call on the whole sequence, so the
cache is exact, not an approximation."""),
        N_("""\
Count the cached positions first: `T_past = cache[0].size(2)` (0 without a cache), and refuse with
`ValueError` when `T_past + T > max_seq_len`. The new tokens sit at positions `T_past .. T_past + T - 1`:
give those to `self.rope(q, k, positions)`. Then append the rotated keys and the values to the cache
along dim 2, `(B, n_heads, T_past + T, head_dim)`, and return that pair with the output."""),
        N_("""\
The scores are `(B, n_heads, T, T_past + T)`: T new queries against every key. New token t may see
keys `0 .. T_past + t`, all the cached ones and the new ones up to itself. That is the lower triangle
of a `(T, T_past + T)` matrix with its diagonal shifted right by `T_past`. `F.scaled_dot_product_attention`
with `is_causal=True` aligns its triangle top-left, which is right only without a cache: pass
`attn_mask=` instead."""),
        N_("""\
The shape of the key lines:

```python
positions = torch.arange(T_past, T_past + T, device=x.device)
keep = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
```"""),
    ),
    "grouped_query_attention": (
        N_("""\
Grouped-query attention keeps every **query** head and shares the **key/value** heads: `n_kv_heads`
of them, each read by a group of `n_heads // n_kv_heads` query heads. What it saves is memory: a
model that generates text caches the keys and values of every position in every layer, and that
cache shrinks by `n_heads / n_kv_heads`, as do `wk` and `wv`. The two ends have names:
`n_kv_heads == n_heads` is multi-head attention, `n_kv_heads == 1` multi-query attention."""),
        N_("""\
The shapes:

- `wq` stays `nn.Linear(dim, dim)`; `wk` and `wv` are `nn.Linear(dim, n_kv_heads * head_dim)`, so
  `self.wk(x).view(B, T, n_kv_heads, head_dim).transpose(1, 2)` is `(B, n_kv_heads, T, head_dim)`.
- Query head h reads key/value head `h // n_rep`, with `n_rep = n_heads // n_kv_heads`: repeat each
  kv head `n_rep` times **next to itself** (kv0, kv0, kv1, kv1), never tiled (kv0, kv1, kv0, kv1).
- Then it is causal multi-head attention: scale by √head_dim, block j > i (and `mask == 0`) with
  -inf, softmax, merge the heads, `wo`.
- Refuse `n_heads % n_kv_heads != 0` with a `ValueError`: the groups must be equal."""),
        N_("""\
The line that shares the heads, and the cache's size:

```python
xk = xk.repeat_interleave(self.n_rep, dim=1)  # (B, n_kv, T, hd) -> (B, nh, T, hd)
# kv_cache_bytes: keys and values, every layer
2 * n_layers * batch * seq_len * n_kv_heads * head_dim * bytes_per_value
```"""),
    ),
    "flash_attention": (
        N_("""\
FlashAttention computes **exactly** softmax(q k^T / √d) v without ever holding the (T_q, T_k)
matrix of scores. It walks over the keys a tile at a time and keeps, per query, a running maximum
m, a running sum l of exp(s - m) and a running output acc, the sum of exp(s - m) v. Softmax does
not change when every score is shifted by the same amount, so any m works as long as every term
used the same one: when a tile brings a larger maximum, multiply what was summed so far by
exp(m_old - m_new) and it is as if the new maximum had been used from the start."""),
        N_("""\
The shapes, for a tile of Bq queries and Bk keys:

- `s = q_tile @ k_tile.transpose(-2, -1) * scale` is `(..., Bq, Bk)`; `m`, `l` are `(..., Bq)` (or
  `(..., Bq, 1)`), `acc` is `(..., Bq, d)`.
- Slice with `k[..., j:j + block_size, :]`: the last tile may be shorter, and T need not be a
  multiple of `block_size`.
- Divide `acc` by `l` once, after the last tile; the lse is `m + log(l)`, the natural log.
- Causal: compare **global** positions, `j + c > i + r` is blocked (r, c the indices inside the
  tile); tiles entirely above the diagonal can be skipped. Raise `ValueError` when T_q != T_k."""),
        N_("""\
Memory is graded: at T = 12288 the worker may not hold even a T x T bool mask. So no
`torch.tril(torch.ones(T, T))`, no full scores, not in float16 either: build each tile's mask from
two `torch.arange`s. The inputs' dtype and device go into every tensor you make (`dtype=q.dtype`,
`device=q.device`), and the running values are updated out of place (`l = alpha * l + ...`), so
that autograd can go back through the tiles."""),
        N_("""\
The three lines of the online softmax, inside the loop over key tiles:

```python
m_new = torch.maximum(m, s.amax(dim=-1))  # (..., Bq)
alpha, p = torch.exp(m - m_new), torch.exp(s - m_new[..., None])
l, acc, m = alpha * l + p.sum(dim=-1), alpha[..., None] * acc + p @ v_tile, m_new
```"""),
    ),
    "sliding_window": (
        N_("""\
A sliding window is a causal mask with a horizon: query i sees key j when `j <= i` and
`i - j < window`, itself and the `window - 1` positions before it. The work per token and the KV cache
stay bounded, whatever the length; what it forgets is everything further back. Masks combine by
AND, and a padding mask runs along the **keys**: `(B, 1, 1, T_k)` against `(T_q, T_k)`."""),
        N_("""\
A query whose every key is blocked has a row of -inf scores, and softmax of it is 0/0 = NaN, which
spreads into every gradient; with -1e9 fills the row is finite but uniform, an average of values it
may not see. Find such rows with `keep.any(dim=-1, keepdim=True)`, give them finite scores, and set
their weights to 0: the output is zeros, the gradients finite. The rolling cache keeps the **last**
`window` positions: append with `torch.cat(..., dim=2)`, then slice."""),
        N_("""\
The lines that matter:

```python
i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
keep = (j <= i) & (i - j < window)  # (T, T)
mask = keep[None, None] & key_padding[:, None, None, :]  # (B, 1, T_q, T_k)
k = torch.cat([old_k, k], dim=2)[:, :, -window:]  # the rolling cache
```"""),
    ),
    "tiny_gpt": (
        N_("""\
TinyGPT is the track's parts in one model: `tok_embed`, then `n_layers` pre-norm blocks, each
`x = x + attention(norm(x))` then `x = x + feed_forward(norm(x))`, then the final `norm` and `head`.
Attention is grouped-query (`wk`, `wv` give `n_kv_heads * head_dim` features) with RoPE on the queries
and keys, causal, and returns its cache: the keys (after RoPE) and values of every position seen."""),
        N_("""\
With a cache of `T_past` positions, the new tokens sit at positions `T_past .. T_past + T - 1`: rotate
them there, and let new token `t` see keys `0 .. T_past + t` (`tril(diagonal=T_past)` on the
`(T, T_past + T)` grid). Cache `k` and `v` before repeating them for the query heads. generate runs
the prompt once, then gives the model ONE token and the cache per step, never the whole sequence."""),
        N_("""\
The lines that matter:

```python
positions = torch.arange(T_past, T_past + T, device=x.device)
q, k = self.rope(q, k, positions)
k, v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)  # cached n_kv_heads wide
keep = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
logits, cache = model(next_token, cache)
```"""),
    ),
}

