"""Known mistakes in sublayers.py, each as edits of solutions/sublayers.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="adds_norm_x",
        why="Adds the normalised input back, norm(x) + dropout(sublayer(norm(x))), instead of x itself.",
        diagnosis=("ResidualConnection adds norm(x) back: the residual adds the input itself, x + "
                   "dropout(sublayer(norm(x)))."),
        edits=(
            (
                "return x + self.dropout(sublayer(self.norm(x)))",
                "return self.norm(x) + self.dropout(sublayer(self.norm(x)))",
            ),
        ),
    ),
    Mistake(
        name="dropout_after_w2",
        why="The feed-forward drops its output, dropout(w2(relu(w1(x)))), instead of the hidden activations.",
        diagnosis="FeedForward drops its output: apply dropout to the hidden activations, w2(dropout(relu(w1(x)))).",
        edits=(
            ("h = self.dropout(torch.relu(self.w1(x)))", "h = torch.relu(self.w1(x))"),
            ("return self.w2(h)", "return self.dropout(self.w2(h))"),
        ),
    ),
    Mistake(
        name="dropout_before_sublayer",
        why="Applies dropout to the sublayer's input, x + sublayer(dropout(norm(x))), not to its output.",
        diagnosis=("ResidualConnection applies dropout before the sublayer: apply it to the sublayer's output, x "
                   "+ dropout(sublayer(norm(x)))."),
        edits=(("self.dropout(sublayer(self.norm(x)))", "sublayer(self.dropout(self.norm(x)))"),),
    ),
    Mistake(
        name="layer_norm_over_positions",
        why="Normalises each feature over the positions (dim -2) instead of over d_model (dim -1).",
        diagnosis=("the layer norm runs over the positions: normalise over the features, the last dim "
                   "(nn.LayerNorm(d_model))."),
        edits=(
            (
                "        return x + self.dropout(sublayer(self.norm(x)))",
                "        mean = x.mean(dim=-2, keepdim=True)\n"
                "        var = x.var(dim=-2, keepdim=True, unbiased=False)\n"
                "        y = (x - mean) / torch.sqrt(var + self.norm.eps) * self.norm.weight + self.norm.bias\n"
                "        return x + self.dropout(sublayer(y))",
            ),
        ),
    ),
    Mistake(
        name="no_residual",
        why="Forgets the residual: returns dropout(sublayer(norm(x))) without adding x.",
        diagnosis="ResidualConnection forgets the residual: return x + dropout(sublayer(norm(x))).",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))", "return self.dropout(sublayer(self.norm(x)))"),),
    ),
    Mistake(
        name="post_norm",
        why="Post-norm: returns norm(x + dropout(sublayer(x))) instead of x + dropout(sublayer(norm(x))).",
        diagnosis="ResidualConnection is post-norm: normalise the sublayer's input, x + dropout(sublayer(norm(x))).",
        edits=(("return x + self.dropout(sublayer(self.norm(x)))", "return self.norm(x + self.dropout(sublayer(x)))"),),
    ),
    Mistake(
        name="relu_missing",
        why="The feed-forward has no relu between w1 and w2, so it is one linear map.",
        diagnosis="FeedForward has no relu between w1 and w2: use w2(dropout(relu(w1(x)))).",
        edits=(("self.dropout(torch.relu(self.w1(x)))", "self.dropout(self.w1(x))"),),
    ),
    Mistake(
        name="feed_forward_dropout_default",
        why="FeedForward's dropout defaults to 0.1 instead of the contract's 0.0, so built without it, it drops.",
        diagnosis=("FeedForward built without a dropout argument drops in training mode: the default is 0.0, "
                   "FeedForward(d_model, d_ff, dropout=0.0)."),
        edits=(("def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0)",
                "def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1)"),),
    ),
    Mistake(
        name="residual_dropout_default",
        why="ResidualConnection's dropout defaults to 0.1 instead of the contract's 0.0.",
        diagnosis=("ResidualConnection built without a dropout argument drops in training mode: the default is 0.0, "
                   "ResidualConnection(d_model, dropout=0.0)."),
        edits=(("def __init__(self, d_model: int, dropout: float = 0.0)",
                "def __init__(self, d_model: int, dropout: float = 0.1)"),),
    ),
    Mistake(
        name="feed_forward_fixed_dropout",
        why="FeedForward builds nn.Dropout(0.1), a fixed probability, instead of nn.Dropout(dropout).",
        diagnosis=("FeedForward drops with a fixed probability, whatever dropout it was given: build "
                   "nn.Dropout(dropout) with the argument."),
        edits=(("self.w2 = nn.Linear(d_ff, d_model)\n        self.dropout = nn.Dropout(dropout)",
                "self.w2 = nn.Linear(d_ff, d_model)\n        self.dropout = nn.Dropout(0.1)"),),
    ),
)
